package model

import "math"

// rmsNormForward normalises each of the T rows of inp (T,C) by its root mean
// square and scales by weight (C): out = inp * rstd * weight. It saves the
// per-row reciprocal rms in rstd (T) for the backward pass; rstd may be nil.
// out and inp may alias.
func rmsNormForward(out, rstd, inp, weight []float32, T, C int, eps float64) {
	for t := 0; t < T; t++ {
		x := inp[t*C : (t+1)*C]
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		r := float32(1 / math.Sqrt(ss/float64(C)+eps))
		if rstd != nil {
			rstd[t] = r
		}
		o := out[t*C : (t+1)*C]
		for i, v := range x {
			o[i] = v * r * weight[i]
		}
	}
}

// rmsNormBackward accumulates dinp (T,C) += ∂loss/∂inp given dout (T,C),
// the forward input inp, weight and the saved rstd. The weight gradient is
// accumulated into dweight unless it is nil (frozen base weights).
func rmsNormBackward(dinp, dweight, dout, inp, weight, rstd []float32, T, C int) {
	for t := 0; t < T; t++ {
		x := inp[t*C : (t+1)*C]
		dy := dout[t*C : (t+1)*C]
		dx := dinp[t*C : (t+1)*C]
		r := rstd[t]
		var dot float64 // Σ dy·w·x
		for i, v := range x {
			dot += float64(dy[i]) * float64(weight[i]) * float64(v)
		}
		k := float32(dot/float64(C)) * r * r * r
		for i, v := range x {
			dx[i] += dy[i]*weight[i]*r - v*k
		}
		if dweight != nil {
			for i, v := range x {
				dweight[i] += dy[i] * v * r
			}
		}
	}
}
