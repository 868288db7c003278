package train

import "math"

// tokenTerms computes, for each sampled token of one sequence, the loss
// value and its derivative with respect to the token's new log probability.
//
// lp are the new log probabilities, old the old ones (NaN = use lp, ratio
// 1), adv the per-token advantages and w the sequence's token weight. The
// row loss is Σ L_t·w / n over its n sampled tokens (ART's "mean"
// reduction), so the per-token terms returned here already include w/n.
//
// orig are the sampling-time logprobs when old were precalculated, else
// nil. Only truncated importance sampling reads them: its weight becomes
// min(e^(old-orig), U) (the trainer-vs-sampler mismatch) instead of
// min(r, U). A NaN in orig falls back to r.
func tokenTerms(c Config, lp, old, orig, adv []float64, w float64) (loss float64, dlp []float64) {
	n := len(lp)
	dlp = make([]float64, n)
	if n == 0 {
		return 0, dlp
	}
	d := make([]float64, n) // log ratio, detached where it is a weight
	var meanD float64
	for t := range lp {
		if !math.IsNaN(old[t]) {
			d[t] = lp[t] - old[t]
		}
		meanD += d[t]
	}
	meanD /= float64(n)
	seqRatio := math.Exp(meanD)
	scale := w / float64(n)
	for t := range lp {
		tokRatio := math.Exp(d[t])
		// r is the importance ratio; dr is ∂r/∂lp_t (used by PPO only).
		var r, dr float64
		switch c.ImportanceSamplingLevel {
		case "sequence":
			r, dr = seqRatio, seqRatio/float64(n)
		case "average":
			r, dr = (tokRatio+seqRatio)/2, (tokRatio+seqRatio/float64(n))/2
		case "geometric_average":
			r = math.Sqrt(tokRatio * seqRatio)
			dr = r * (1 + 1/float64(n)) / 2
		default:
			r, dr = tokRatio, tokRatio
		}
		if m := c.MaxNegativeAdvantageISWeight; m > 0 && r > m {
			r, dr = m, 0
		}
		if c.MaskProbRatio && (r <= 1-c.Epsilon || r >= 1+c.EpsilonHigh) {
			r, dr = 0, 0
		}
		a := adv[t]
		if c.KimiK2Tau > 0 {
			a -= c.KimiK2Tau * d[t]
		}
		clipped := math.Min(math.Max(r, 1-c.Epsilon), 1+c.EpsilonHigh)
		tis := 1.0
		if c.TruncatedIS > 0 {
			if orig != nil && !math.IsNaN(orig[t]) && !math.IsNaN(old[t]) {
				tis = math.Min(math.Exp(old[t]-orig[t]), c.TruncatedIS)
			} else {
				tis = math.Min(r, c.TruncatedIS)
			}
		}
		var l, g float64
		if c.Loss == "ppo" {
			unclipped, clippedObj := r*a, clipped*a
			if unclipped <= clippedObj {
				l, g = -unclipped, -a*dr
			} else {
				l, g = -clippedObj, 0
			}
		} else { // CISPO: REINFORCE with a clipped, stop-gradient IS weight
			l, g = -clipped*a*lp[t], -clipped*a
		}
		loss += l * tis * scale
		dlp[t] = g * tis * scale
	}
	return loss, dlp
}

// entropyBonus is one sampled token's entropy term, before the row's mean
// over its tokens: -β·H·w for its predictive distribution's entropy H
// (β = c.EntropyCoef, w the sequence's token weight), and the derivative
// with respect to H. Rewarding entropy keeps the policy sampling moves it
// is not yet sure of; without it a policy can become near-certain of a
// wrong action that then is never sampled again, so never corrected.
func entropyBonus(c Config, H, w float64) (loss, dH float64) {
	return -c.EntropyCoef * H * w, -c.EntropyCoef * w
}
