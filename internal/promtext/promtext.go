// Package promtext writes metrics in Prometheus' text exposition format
// (version 0.0.4) and keeps histograms for it: enough for the server's
// /metrics without a metrics library.
package promtext

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ContentType is the Content-Type of the format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Histogram counts observations per upper bound, as a Prometheus
// histogram. The zero value is not usable: make one with NewHistogram. It
// is not safe for concurrent use.
type Histogram struct {
	Bounds []float64 // upper bounds, ascending; +Inf is implied
	Counts []int64   // per bucket (not cumulative); the last is +Inf's
	Sum    float64
	N      int64
}

// NewHistogram returns an empty histogram with the given upper bounds.
func NewHistogram(bounds ...float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]int64, len(bounds)+1)}
}

// Observe adds v.
func (h *Histogram) Observe(v float64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Sum += v
	h.N++
}

// Clone returns a copy that shares nothing with h.
func (h Histogram) Clone() Histogram {
	h.Counts = slices.Clone(h.Counts)
	return h
}

// Writer builds a metrics page.
type Writer struct{ b strings.Builder }

// Metric starts a metric family: its HELP and TYPE lines.
func (w *Writer) Metric(name, typ, help string) {
	fmt.Fprintf(&w.b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// Sample writes one sample; labels is "" or the text between the braces
// (values escaped with Label).
func (w *Writer) Sample(name, labels string, v float64) {
	w.b.WriteString(name)
	if labels != "" {
		w.b.WriteString("{" + labels + "}")
	}
	w.b.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
}

// Histogram writes h's family (HELP, TYPE, buckets, sum, count).
func (w *Writer) Histogram(name, help string, h Histogram) {
	w.Metric(name, "histogram", help)
	var cum int64
	for i, le := range h.Bounds {
		cum += h.Counts[i]
		w.Sample(name+"_bucket", `le="`+strconv.FormatFloat(le, 'g', -1, 64)+`"`, float64(cum))
	}
	w.Sample(name+"_bucket", `le="+Inf"`, float64(h.N))
	w.Sample(name+"_sum", "", h.Sum)
	w.Sample(name+"_count", "", float64(h.N))
}

// String returns the page written so far.
func (w *Writer) String() string { return w.b.String() }

// Label returns name="value" with value escaped.
func Label(name, value string) string {
	return name + `="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(value) + `"`
}
