package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/artgo/art/chart"
	"github.com/artgo/art/store"
)

// newPlotCmd returns `art plot`, which draws a metric of several models.
func newPlotCmd() *cobra.Command {
	var data, metric, out, title string
	var models []string
	var bar bool
	cmd := &cobra.Command{
		Use:   "plot --metric NAME --out FILE.png|svg [--data DIR] [--models P/M,...] [--bar]",
		Short: "Chart a metric of several models over steps (or their latest values as bars), as PNG or SVG",
		Long: `plot reads history.jsonl of every model under DIR (or of the models named by
--models, as PROJECT/MODEL) and draws METRIC over steps, one line per model,
or with --bar each model's latest value as a bar: the comparisons ART's
benchmarking helpers draw. The format follows the file's extension.`,
		Example: `  art plot --metric val/reward --out val.png
  art plot --data /tmp/runs --metric loss/grad_norm --models demo/tictactoe,demo/other --out grad.svg
  art plot --metric val/reward --bar --out compare.png`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if metric == "" || out == "" {
				return fmt.Errorf("plot: --metric and --out are required")
			}
			if _, err := chart.Format(out); err != nil {
				return err
			}
			runs, err := findRuns("plot", data)
			if err != nil {
				return err
			}
			runs, err = selectRuns(runs, models)
			if err != nil {
				return err
			}
			var lines []chart.Line
			var bars []chart.Bar
			for _, r := range runs {
				rows, _ := r.Dir.ReadHistory() // corrupt lines are skipped; the rest still plots
				pts := chart.Metric(rows, metric)
				label := r.ID()
				if len(runs) > 1 && allSameProject(runs) {
					label = r.Name
				}
				lines = append(lines, chart.Line{Label: label, Points: pts})
				if len(pts) > 0 {
					bars = append(bars, chart.Bar{Label: label, Value: pts[len(pts)-1].Y})
				}
			}
			if len(bars) == 0 {
				// Said here, not by the drawing inside the file's atomic
				// write, whose error would wrap it in the write's.
				return fmt.Errorf("plot: no model has logged %s (under %s)", metric, data)
			}
			if title == "" {
				title = metric
			}
			err = chart.WriteFileWith(out, func(w io.Writer, format string) error {
				if bar {
					return chart.WriteBars(w, format, title, metric+" (latest)", bars)
				}
				return chart.WriteLines(w, format, title, metric, lines)
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", store.DefaultBasePath, "data folder holding <project>/models/<name>")
	f.StringVar(&metric, "metric", "", "metric to draw, as history.jsonl names it (val/reward, train/reward, loss/grad_norm, ...)")
	f.StringVarP(&out, "out", "o", "", "image file to write (.png or .svg)")
	f.StringSliceVar(&models, "models", nil, "models to draw, as PROJECT/MODEL (default: every model under --data)")
	f.BoolVar(&bar, "bar", false, "draw each model's latest value as a bar instead of lines over steps")
	f.StringVar(&title, "title", "", "chart title (default: the metric)")
	return cmd
}

// selectRuns keeps the runs named PROJECT/MODEL, in the order given; none
// named means all.
func selectRuns(runs []store.Run, names []string) ([]store.Run, error) {
	if len(names) == 0 {
		return runs, nil
	}
	var out []store.Run
	for _, n := range names {
		found := false
		for _, r := range runs {
			if r.ID() == n {
				out, found = append(out, r), true
			}
		}
		if !found {
			var all []string
			for _, r := range runs {
				all = append(all, r.ID())
			}
			return nil, fmt.Errorf("plot: no model %q (models: %s)", n, strings.Join(all, ", "))
		}
	}
	return out, nil
}

func allSameProject(runs []store.Run) bool {
	for _, r := range runs {
		if r.Project != runs[0].Project {
			return false
		}
	}
	return true
}
