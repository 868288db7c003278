package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/artgo/art/experiment"
)

// learnedSE is how many paired standard errors a seed's held-out gain
// must reach to count as learned.
const learnedSE = 3

// outcome is one seed's run of one example: its table row and its held-out
// gain with the gain's paired standard error.
type outcome struct {
	example string
	seed    uint64
	gain    float64
	se      float64 // paired by scenario; 0 when unknown
	row     string
	// trained counts the GRPO steps that trained; compared those that
	// logged loss/rollout_logprob_abs_diff, whose largest value is maxDiff
	// (0: the trainer's logprobs equal the sampler's bit for bit).
	trained, compared int
	maxDiff           float64
}

// learned reports whether the gain is at least learnedSE paired standard
// errors (and positive: a gain with no error known never counts).
func (o outcome) learned() bool { return o.se > 0 && o.gain >= learnedSE*o.se }

// writeSummary writes one line per example, in the order they first appear
// in outs: the seeds run, the minimum, median and maximum held-out gain,
// and how many seeds learned.
func writeSummary(w io.Writer, outs []outcome) {
	fmt.Fprintf(w, "| example | seeds | held-out gain min / median / max | learned (gain ≥ %d paired SE) | trainer vs sampler logprobs (loss/rollout_logprob_abs_diff) |\n", learnedSE)
	fmt.Fprintln(w, "|---|---|---|---|---|")
	var order []string
	byExample := map[string][]outcome{}
	for _, o := range outs {
		if _, ok := byExample[o.example]; !ok {
			order = append(order, o.example)
		}
		byExample[o.example] = append(byExample[o.example], o)
	}
	for _, ex := range order {
		os := byExample[ex]
		gains := make([]float64, len(os))
		seeds := make([]string, len(os))
		learned, trained, compared, maxDiff := 0, 0, 0, 0.0
		for i, o := range os {
			gains[i], seeds[i] = o.gain, fmt.Sprint(o.seed)
			if o.learned() {
				learned++
			}
			trained, compared, maxDiff = trained+o.trained, compared+o.compared, max(maxDiff, o.maxDiff)
		}
		fmt.Fprintf(w, "| %s | %s | %+.3f / %+.3f / %+.3f | **%d of %d** | %s |\n", ex, strings.Join(seeds, ", "),
			slices.Min(gains), median(gains), slices.Max(gains), learned, len(os), onPolicyCell(trained, compared, maxDiff))
	}
}

// onPolicyCell says how the trained steps' logprobs compared with the
// sampler's.
func onPolicyCell(trained, compared int, maxDiff float64) string {
	switch {
	case trained == 0:
		return "no step trained"
	case compared == trained && maxDiff == 0:
		return fmt.Sprintf("exactly 0 on all %d trained steps", trained)
	default:
		return fmt.Sprintf("logged on %d of %d trained steps, largest %.3g", compared, trained, maxDiff)
	}
}

// pairedStderr is the standard error of the mean change from before to
// after, the two paired by index (the same seeded games).
func pairedStderr(before, after []float64) float64 {
	if len(before) != len(after) {
		return 0
	}
	diffs := make([]float64, len(before))
	for i := range before {
		diffs[i] = after[i] - before[i]
	}
	_, se := experiment.MeanStderr(diffs)
	return se
}

// median returns the median of v (the mean of the middle two when even).
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
