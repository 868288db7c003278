package train

import "math"

// groupAdvantages returns each trajectory's advantage within its group: the
// reward minus the group mean, divided by the population standard deviation
// plus 1e-6 when scale is set (ART's formula).
func groupAdvantages(rewards []float64, scale bool) []float64 {
	n := float64(len(rewards))
	var mean float64
	for _, r := range rewards {
		mean += r
	}
	mean /= n
	var variance float64
	for _, r := range rewards {
		variance += (r - mean) * (r - mean)
	}
	std := math.Sqrt(variance / n)
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		out[i] = r - mean
		if scale {
			out[i] /= std + 1e-6
		}
	}
	return out
}

// balance shrinks negative advantages when b > 0 and positive ones when
// b < 0 (ART's advantage_balance, b in [-1, 1]).
func balance(a, b float64) float64 {
	switch {
	case b > 0 && a < 0:
		return a * (1 - b)
	case b < 0 && a > 0:
		return a * (1 + b)
	}
	return a
}
