package model

import (
	"math"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/parallel"
)

// Row-parallel versions of the element-wise layers for the training passes.
// Each splits its rows over the cores and runs the serial function (the
// reference, shared with the inference forward) on each range, so results
// are bit-identical to it and do not depend on the number of cores.

// Rows per goroutine below which a layer runs inline (a row of these layers
// costs about a microsecond; starting a goroutine a few).
const (
	normMinRows   = 16
	swigluMinRows = 2
	ropeMinRows   = 16
)

// rmsNormForwardPar is rmsNormForward over rows in parallel.
func rmsNormForwardPar(out, rstd, inp, weight []float32, T, C int, eps float64) {
	parallel.For(T, normMinRows, func(lo, hi int) {
		var r []float32
		if rstd != nil {
			r = rstd[lo:hi]
		}
		rmsNormForward(out[lo*C:hi*C], r, inp[lo*C:hi*C], weight, hi-lo, C, eps)
	})
}

// rmsNormBackwardPar is rmsNormBackward over rows in parallel. With a
// weight gradient (full fine-tuning) every row adds to the same dweight, so
// it stays serial.
func rmsNormBackwardPar(dinp, dweight, dout, inp, weight, rstd []float32, T, C int) {
	if dweight != nil {
		rmsNormBackward(dinp, dweight, dout, inp, weight, rstd, T, C)
		return
	}
	parallel.For(T, normMinRows, func(lo, hi int) {
		rmsNormBackward(dinp[lo*C:hi*C], nil, dout[lo*C:hi*C], inp[lo*C:hi*C], weight, rstd[lo:hi], hi-lo, C)
	})
}

// swigluForwardPar is swigluForward over T rows of F values in parallel,
// vectorised (kernels.SwiGLU computes the same float32 operations).
func swigluForwardPar(h, gate, up []float32, T, F int) {
	parallel.For(T, swigluMinRows, func(lo, hi int) {
		kernels.SwiGLU(h[lo*F:hi*F], gate[lo*F:hi*F], up[lo*F:hi*F])
	})
}

// swigluBackwardPar is swigluBackward over T rows of F values in
// parallel, vectorised (kernels.SwiGLUBackward).
func swigluBackwardPar(dgate, dup, dh, gate, up []float32, T, F int) {
	parallel.For(T, swigluMinRows, func(lo, hi int) {
		s := func(x []float32) []float32 { return x[lo*F : hi*F] }
		kernels.SwiGLUBackward(s(dgate), s(dup), s(dh), s(gate), s(up))
	})
}

// softmaxCausalVec is softmaxCausal vectorised: the probabilities of the
// first visible entries of row after scaling, zero in the rest. The sum
// runs in float64, so it can differ from softmaxCausal in the last bit.
func softmaxCausalVec(row []float32, visible int, scale float32) {
	v := row[:visible]
	kernels.Scale(scale, v)
	sum, _ := kernels.ExpShift(v, kernels.Max(v))
	kernels.Scale(float32(1/sum), v)
	clear(row[visible:])
}

// ropeTable holds cos and sin of pos·freq for positions 0..n-1, (n, HD/2)
// each, computed exactly as ropeForward does, so the training passes need
// no Sincos per row.
type ropeTable struct {
	half     int
	cos, sin []float32
}

func newRopeTable(freqs []float64, n int) ropeTable {
	half := len(freqs)
	t := ropeTable{half: half, cos: make([]float32, n*half), sin: make([]float32, n*half)}
	for p := range n {
		for i, f := range freqs {
			s, c := math.Sincos(float64(p) * f)
			t.cos[p*half+i], t.sin[p*half+i] = float32(c), float32(s)
		}
	}
	return t
}

// rope rotates, in place, the nh heads of the T rows of x (T, nh*HD) at
// positions 0..T-1: by +angle (ropeForward) or, with inverse, by -angle,
// the transpose, which is ropeBackward.
func (rt *ropeTable) rope(x []float32, T, nh, HD int, inverse bool) {
	half := HD / 2
	parallel.For(T, ropeMinRows, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			cos := rt.cos[t*rt.half : t*rt.half+half]
			sin := rt.sin[t*rt.half : t*rt.half+half]
			row := x[t*nh*HD : (t+1)*nh*HD]
			for h := 0; h < nh; h++ {
				v := row[h*HD : (h+1)*HD]
				a, b := v[:half], v[half:HD]
				if inverse {
					for i := range a {
						d1, d2 := a[i], b[i]
						a[i] = d1*cos[i] + d2*sin[i]
						b[i] = d2*cos[i] - d1*sin[i]
					}
					continue
				}
				for i := range a {
					x1, x2 := a[i], b[i]
					a[i] = x1*cos[i] - x2*sin[i]
					b[i] = x2*cos[i] + x1*sin[i]
				}
			}
		}
	})
}
