package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/artgo/art/chart"
	"github.com/artgo/art/store"
)

// newChartCmd returns `art chart`, which draws a model's reward curve.
func newChartCmd() *cobra.Command {
	var out, title string
	cmd := &cobra.Command{
		Use:   "chart MODEL_DIR [--out FILE.png]",
		Short: "Draw a model's reward curve (train and held-out reward per step) as a PNG",
		Long: `chart reads MODEL_DIR/history.jsonl (MODEL_DIR is <path>/<project>/models/<name>)
and draws the mean training reward of each step, its moving average, and the
held-out reward at every step where a "val" split was logged. The PNG is
written atomically, by default to MODEL_DIR/reward.png.`,
		Example: `  art chart .art/demo/models/tictactoe
  art chart .art/my-project/models/agent --out curve.png`,
		Args: oneArg("MODEL_DIR, the model folder (<path>/<project>/models/<name>)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := store.Open(args[0])
			if err != nil {
				return err
			}
			if out != "" && !strings.EqualFold(filepath.Ext(out), ".png") {
				return fmt.Errorf("chart: --out %s: the reward chart is a PNG; name the file .png (art plot also draws SVG)", out)
			}
			rows, err := dir.ReadHistory()
			var corrupt *store.CorruptLinesError
			if errors.As(err, &corrupt) {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", err)
			} else if err != nil {
				return err
			}
			if len(rows) == 0 {
				return fmt.Errorf("chart: %s has no history.jsonl rows yet (log some steps with model.Log first)", args[0])
			}
			if out == "" {
				out = filepath.Join(args[0], "reward.png")
			}
			if title == "" {
				title = filepath.Base(filepath.Clean(args[0]))
			}
			if err := chart.WriteFile(out, chart.FromHistory(rows), title); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "PNG file to write (default MODEL_DIR/reward.png)")
	cmd.Flags().StringVar(&title, "title", "", "chart title (default: the model's name)")
	return cmd
}
