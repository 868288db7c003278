package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/artgo/art/store"
)

// runSummary is one row of `art runs`.
type runSummary struct {
	Project string `json:"project"`
	Model   string `json:"model"`
	Path    string `json:"path"`
	// Step is the latest checkpoint step (-1: no checkpoint).
	Step int `json:"step"`
	// TrainReward and ValReward are the latest logged mean rewards of the
	// splits, with the step they were logged at (nil: never logged).
	TrainReward *metricAt `json:"train_reward,omitempty"`
	ValReward   *metricAt `json:"val_reward,omitempty"`
	Updated     time.Time `json:"updated"` // the newest of history.jsonl and the checkpoints
	Warning     string    `json:"warning,omitempty"`
}

type metricAt struct {
	Value float64 `json:"value"`
	Step  int     `json:"step"`
}

// newRunsCmd returns `art runs`, which lists the runs under a data folder.
func newRunsCmd() *cobra.Command {
	var data string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runs [--data DIR]",
		Short: "List the projects and models under a data folder: latest step, rewards, last update",
		Long: `runs lists every model under DIR (<DIR>/<project>/models/<name>, the layout
art serve, the SDK and art demo --path write; a folder holding .art works too)
with its latest checkpoint step, its latest train and val rewards (the mean
reward logged for each split, with the step it was logged at) and when it
last changed.`,
		Example: `  art runs
  art runs --data /tmp/demo
  art runs --data .art --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := findRuns("runs", data)
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				return fmt.Errorf("runs: no models under %s (expected <project>/models/<name> folders)", data)
			}
			sums := make([]runSummary, len(runs))
			for i, r := range runs {
				sums[i], _, _ = readRun(r)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(sums)
			}
			return printRuns(cmd.OutOrStdout(), sums)
		},
	}
	cmd.Flags().StringVar(&data, "data", store.DefaultBasePath, "data folder holding <project>/models/<name>")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// findRuns is store.Find for the command's --data, with an error that
// says what to give --data when the folder is not there.
func findRuns(command, data string) ([]store.Run, error) {
	runs, err := store.Find(data)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: --data %s: no such folder; give --data the folder holding <project>/models/<name> (art serve's --data, art demo's --path)", command, data)
	}
	return runs, err
}

// readRun reads one model's checkpoint steps and history rows and what
// `art runs` shows of them; a damaged file is a warning on its row, not a
// failure of the listing.
func readRun(r store.Run) (s runSummary, steps []int, rows []map[string]any) {
	data := r.ReadRun()
	s = runSummary{Project: r.Project, Model: r.Name, Path: r.Dir.Path(), Step: -1, Updated: data.Updated, Warning: data.Warning}
	steps, rows = data.Checkpoints, data.History
	if len(steps) > 0 {
		s.Step = steps[len(steps)-1]
	}
	for _, row := range rows {
		step, _ := row["step"].(float64)
		if v, ok := row["train/reward"].(float64); ok {
			s.TrainReward = &metricAt{v, int(step)}
		}
		if v, ok := row["val/reward"].(float64); ok {
			s.ValReward = &metricAt{v, int(step)}
		}
	}
	return s, steps, rows
}

func printRuns(w io.Writer, sums []runSummary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tMODEL\tSTEP\tTRAIN REWARD\tVAL REWARD\tUPDATED")
	reward := func(m *metricAt) string {
		if m == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f @%d", m.Value, m.Step)
	}
	for _, s := range sums {
		step, updated := "-", "-"
		if s.Step >= 0 {
			step = fmt.Sprint(s.Step)
		}
		if !s.Updated.IsZero() {
			updated = s.Updated.Local().Format("2006-01-02 15:04")
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", s.Project, s.Model, step, reward(s.TrainReward), reward(s.ValReward), updated)
		if s.Warning != "" {
			line += "\t(" + s.Warning + ")"
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
