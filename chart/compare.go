package chart

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/artgo/art/internal/atomicfile"
)

// Line is one model's values of a metric over steps.
type Line struct {
	Label  string
	Points plotter.XYs
}

// Metric collects one metric over steps from history rows (a later row wins
// at a step); rows without the step or the metric are skipped.
func Metric(rows []map[string]any, name string) plotter.XYs {
	m := map[float64]float64{}
	for _, r := range rows {
		step, ok := number(r["step"])
		if !ok {
			continue
		}
		if v, ok := number(r[name]); ok {
			m[step] = v
		}
	}
	return sorted(m)
}

// Format returns the image format of a file name: "png" or "svg".
func Format(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("chart: %s: want a .png or .svg file", path)
	}
}

// WriteLines draws a metric over steps for several models, one line each,
// in format ("png" or "svg").
func WriteLines(w io.Writer, format, title, metric string, lines []Line) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "step"
	p.Y.Label.Text = metric
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	drawn := 0
	for i, l := range lines {
		if len(l.Points) == 0 {
			continue
		}
		line, err := plotter.NewLine(l.Points)
		if err != nil {
			return fmt.Errorf("chart: %s: %w", l.Label, err)
		}
		line.Color, line.Width = plotutil.Color(i), vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(l.Label, line)
		drawn++
	}
	if drawn == 0 {
		return fmt.Errorf("chart: no model has logged %s", metric)
	}
	return render(w, p, format)
}

// Bar is one model's value of a metric.
type Bar struct {
	Label string
	Value float64
}

// WriteBars draws one bar per model (e.g. the latest val/reward of each).
func WriteBars(w io.Writer, format, title, metric string, bars []Bar) error {
	if len(bars) == 0 {
		return errors.New("chart: no bars to draw")
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = metric
	vals := make(plotter.Values, len(bars))
	names := make([]string, len(bars))
	for i, b := range bars {
		vals[i], names[i] = b.Value, b.Label
	}
	bc, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	bc.Color = color.RGBA{R: 20, G: 70, B: 160, A: 255}
	p.Add(plotter.NewGrid(), bc)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.75, float64(len(bars))-0.25 // room beside the outer bars
	return render(w, p, format)
}

func render(w io.Writer, p *plot.Plot, format string) error {
	// 600×360 points: 800×480 pixels in a PNG.
	wt, err := p.WriterTo(600, 360, format)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("chart: write %s: %w", format, err)
	}
	return nil
}

// WriteFileWith writes an image drawn by draw to path atomically, in the
// format its extension names.
func WriteFileWith(path string, draw func(w io.Writer, format string) error) error {
	format, err := Format(path)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return draw(w, format) })
}
