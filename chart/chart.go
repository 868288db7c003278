// Package chart draws a model's reward curve from its history.jsonl rows:
// the mean training reward of each step (with a moving average, since one
// step's reward is noisy) and the held-out reward wherever a "val" split was
// logged. It is what `art demo` leaves next to its checkpoints and what
// `art chart` draws for any model directory.
package chart

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/artgo/art/internal/atomicfile"
)

// Series are the points read from history rows, sorted by step.
type Series struct {
	Train plotter.XYs // train/reward per step
	Val   plotter.XYs // val/reward per step
}

// FromHistory collects train/reward and val/reward from history rows (as
// store.ModelDir.ReadHistory returns them). Rows without a step or without
// either metric are ignored; when a split was logged twice at one step the
// later row wins.
func FromHistory(rows []map[string]any) Series {
	train, val := map[float64]float64{}, map[float64]float64{}
	for _, r := range rows {
		step, ok := number(r["step"])
		if !ok {
			continue
		}
		if v, ok := number(r["train/reward"]); ok {
			train[step] = v
		}
		if v, ok := number(r["val/reward"]); ok {
			val[step] = v
		}
	}
	return Series{Train: sorted(train), Val: sorted(val)}
}

func number(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}

func sorted(m map[float64]float64) plotter.XYs {
	out := make(plotter.XYs, 0, len(m))
	for x, y := range m {
		out = append(out, plotter.XY{X: x, Y: y})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].X < out[j].X })
	return out
}

// movingAverage smooths ys over a trailing window of n points.
func movingAverage(xys plotter.XYs, n int) plotter.XYs {
	out := make(plotter.XYs, len(xys))
	var sum float64
	for i, p := range xys {
		sum += p.Y
		if i >= n {
			sum -= xys[i-n].Y
		}
		out[i] = plotter.XY{X: p.X, Y: sum / float64(min(i+1, n))}
	}
	return out
}

// Write draws the series as a PNG (800×480) into w.
func Write(w io.Writer, s Series, title string) error {
	if len(s.Train) == 0 && len(s.Val) == 0 {
		return errors.New("chart: no train/reward or val/reward in the history")
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "step"
	p.Y.Label.Text = "mean reward"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	if len(s.Train) > 0 {
		raw, err := plotter.NewLine(s.Train)
		if err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		raw.Color = color.RGBA{R: 160, G: 190, B: 230, A: 255}
		p.Add(raw)
		p.Legend.Add("train reward", raw)
		if len(s.Train) >= 10 {
			n := max(5, len(s.Train)/20)
			avg, err := plotter.NewLine(movingAverage(s.Train, n))
			if err != nil {
				return fmt.Errorf("chart: %w", err)
			}
			avg.Color = color.RGBA{R: 20, G: 70, B: 160, A: 255}
			avg.Width = vg.Points(2)
			p.Add(avg)
			p.Legend.Add(fmt.Sprintf("train reward, mean of %d steps", n), avg)
		}
	}
	if len(s.Val) > 0 {
		line, pts, err := plotter.NewLinePoints(s.Val)
		if err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		red := color.RGBA{R: 200, G: 60, B: 20, A: 255}
		line.Color, line.Width = red, vg.Points(1.5)
		pts.Color, pts.Shape, pts.Radius = red, draw.CircleGlyph{}, vg.Points(4)
		p.Add(line, pts)
		p.Legend.Add("held-out reward", line, pts)
	}
	return render(w, p, "png")
}

// WriteFile draws the series into a PNG file, replacing it atomically.
func WriteFile(path string, s Series, title string) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return Write(w, s, title) })
}
