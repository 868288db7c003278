package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/artgo/art/store"
)

// newShowCmd returns `art show`, which describes one model of a data folder.
func newShowCmd() *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "show [PROJECT/]MODEL [--data DIR]",
		Short: "Describe one model: base model, LoRA, checkpoints, and its latest metrics per split",
		Long: `show prints what a model under DIR is (model.json: base model, LoRA
configuration), its checkpoints, how much history it has logged, the latest
value of every metric of each split, and the step with the best val/reward.
MODEL alone must be unique across DIR's projects; PROJECT/MODEL is exact.`,
		Example: `  art show tictactoe --data /tmp/demo
  art show my-project/agent`,
		Args: oneArg("[PROJECT/]MODEL, the model to describe"),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := findRuns("show", data)
			if err != nil {
				return err
			}
			project, name, hasProject := strings.Cut(args[0], "/")
			if !hasProject {
				project, name = "", args[0]
			}
			var match []store.Run
			var all []string
			for _, r := range runs {
				all = append(all, r.ID())
				if r.Name == name && (project == "" || r.Project == project) {
					match = append(match, r)
				}
			}
			switch {
			case len(match) == 0:
				return fmt.Errorf("show: no model %q under %s (models: %s)", args[0], data, strings.Join(all, ", "))
			case len(match) > 1:
				return fmt.Errorf("show: %q is in several projects; name one of them as PROJECT/MODEL: %s", name, strings.Join(all, ", "))
			}
			return printShow(cmd, match[0])
		},
	}
	cmd.Flags().StringVar(&data, "data", store.DefaultBasePath, "data folder holding <project>/models/<name>")
	return cmd
}

func printShow(cmd *cobra.Command, r store.Run) error {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%s/%s  %s\n", r.Project, r.Name, r.Dir.Path())
	var model map[string]any
	if err := r.Dir.ReadModel(&model); err == nil {
		if b, ok := model["base_model"].(string); ok && b != "" {
			fmt.Fprintf(w, "  base model   %s\n", b)
		}
		if l, ok := model["lora_config"]; ok {
			lb, _ := json.Marshal(l)
			fmt.Fprintf(w, "  lora         %s\n", lb)
		}
	}
	s, steps, rows := readRun(r)
	fmt.Fprintf(w, "  checkpoints  %s\n", stepList(steps))
	fmt.Fprintf(w, "  history      %d rows", len(rows))
	if !s.Updated.IsZero() {
		fmt.Fprintf(w, ", updated %s", s.Updated.Local().Format("2006-01-02 15:04"))
	}
	fmt.Fprintln(w)
	if s.Warning != "" {
		fmt.Fprintf(w, "  warning      %s\n", s.Warning)
	}
	// The latest value of every metric, by split (the part before "/").
	latest := map[string]metricAt{}
	best := metricAt{Step: -1}
	for _, row := range rows {
		step, _ := row["step"].(float64)
		for k, v := range row {
			if f, ok := v.(float64); ok && k != "step" && strings.Contains(k, "/") {
				latest[k] = metricAt{f, int(step)}
			}
		}
		if v, ok := row["val/reward"].(float64); ok && (best.Step < 0 || v >= best.Value) {
			best = metricAt{v, int(step)}
		}
	}
	if best.Step >= 0 {
		fmt.Fprintf(w, "  best         val/reward %.4g at step %d\n", best.Value, best.Step)
	}
	for _, k := range slices.Sorted(maps.Keys(latest)) {
		fmt.Fprintf(w, "  %-40s %12.6g  @%d\n", k, latest[k].Value, latest[k].Step)
	}
	return nil
}

// stepList prints steps compactly: "0-12, 15" (or "none").
func stepList(steps []int) string {
	if len(steps) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(steps); {
		j := i
		for j+1 < len(steps) && steps[j+1] == steps[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", steps[i], steps[j]))
		} else {
			parts = append(parts, fmt.Sprint(steps[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
