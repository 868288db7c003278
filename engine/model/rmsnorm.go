package model

import (
	"math"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/parallel"
)

// Rows per goroutine below which a norm runs inline (a row costs about a
// microsecond; starting a goroutine a few).
const normMinRows = 16

// rmsNormForward normalises each of the T rows of inp (T,C) by its root mean
// square and scales by weight (C): out = inp * rstd * weight. It saves the
// per-row reciprocal rms in rstd (T) for the backward pass; rstd may be nil.
// out and inp may alias. Rows are split over the cores; each row is
// computed alone, so the result does not depend on their number.
func rmsNormForward(out, rstd, inp, weight []float32, T, C int, eps float64) {
	parallel.For(T, normMinRows, func(lo, hi int) {
		var r []float32
		if rstd != nil {
			r = rstd[lo:hi]
		}
		rmsNormForwardRows(out[lo*C:hi*C], r, inp[lo*C:hi*C], weight, hi-lo, C, eps)
	})
}

// rmsNormBackward accumulates dinp (T,C) += ∂loss/∂inp given dout (T,C),
// the forward input inp, weight and the saved rstd. The weight gradient is
// accumulated into dweight unless it is nil (frozen base weights).
func rmsNormBackward(dinp, dweight, dout, inp, weight, rstd []float32, T, C int) {
	if dweight != nil {
		// Every row adds to the same dweight (full fine-tuning): serial.
		rmsNormBackwardRows(dinp, dweight, dout, inp, weight, rstd, T, C)
		return
	}
	parallel.For(T, normMinRows, func(lo, hi int) {
		rmsNormBackwardRows(dinp[lo*C:hi*C], nil, dout[lo*C:hi*C], inp[lo*C:hi*C], weight, rstd[lo:hi], hi-lo, C)
	})
}

// rmsNormForwardRows is rmsNormForward on the caller's goroutine.
func rmsNormForwardRows(out, rstd, inp, weight []float32, T, C int, eps float64) {
	for t := 0; t < T; t++ {
		x := inp[t*C : (t+1)*C]
		r := float32(1 / math.Sqrt(kernels.SumSquares(x)/float64(C)+eps))
		if rstd != nil {
			rstd[t] = r
		}
		kernels.NormScale(out[t*C:(t+1)*C], x, weight, r)
	}
}

// rmsNormBackwardRows is rmsNormBackward on the caller's goroutine.
func rmsNormBackwardRows(dinp, dweight, dout, inp, weight, rstd []float32, T, C int) {
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
