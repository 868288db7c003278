package model

import (
	"math"

	"github.com/artgo/art/internal/parallel"
)

// ropeFreqs returns the HD/2 rotary inverse frequencies of cfg, including the
// llama3 long-context rescaling when configured (as transformers computes it).
func ropeFreqs(cfg Config) []float64 {
	half := cfg.HeadDim / 2
	inv := make([]float64, half)
	for i := range inv {
		inv[i] = 1 / math.Pow(cfg.RopeTheta, float64(2*i)/float64(cfg.HeadDim))
	}
	rs := cfg.RopeScaling
	if rs != nil && (rs.RopeType == "linear" || rs.Type == "linear") {
		for i := range inv {
			inv[i] /= rs.Factor
		}
		return inv
	}
	if rs == nil || (rs.RopeType != "llama3" && rs.Type != "llama3") {
		return inv
	}
	old := float64(rs.OriginalMaxPositionEmbeddings)
	lowWavelen := old / rs.LowFreqFactor
	highWavelen := old / rs.HighFreqFactor
	for i, f := range inv {
		wavelen := 2 * math.Pi / f
		switch {
		case wavelen < highWavelen:
			// high frequencies are kept
		case wavelen > lowWavelen:
			inv[i] = f / rs.Factor
		default:
			smooth := (old/wavelen - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
			inv[i] = (1-smooth)*f/rs.Factor + smooth*f
		}
	}
	return inv
}

// ropeTable holds cos and sin of pos·freq, (rows, HD/2) each, for the
// positions of a pass's rows: 0..cap-1 for training sequences, each
// token's cache position for an inference batch. Rotating from a table
// computes the angles once per pass instead of once per layer and tensor.
type ropeTable struct {
	half     int
	cos, sin []float32
}

// set fills the table for rows at positions pos (row t at pos[t]).
func (rt *ropeTable) set(freqs []float64, pos []int) {
	half := len(freqs)
	n := len(pos) * half
	if cap(rt.cos) < n {
		rt.cos, rt.sin = make([]float32, n), make([]float32, n)
	}
	rt.half, rt.cos, rt.sin = half, rt.cos[:n], rt.sin[:n]
	for t, p := range pos {
		for i, f := range freqs {
			s, c := math.Sincos(float64(p) * f)
			rt.cos[t*half+i], rt.sin[t*half+i] = float32(c), float32(s)
		}
	}
}

// Rows per goroutine below which the rotation runs inline (a row costs
// about a microsecond; starting a goroutine a few).
const ropeMinRows = 16

// forward rotates, in place, each of the nh heads (HD wide) of the T rows
// of x (T, nh*HD) by its row's angles, pairing element i with i+HD/2 (the
// "rotate_half" convention of Llama and Qwen2 checkpoints).
func (rt *ropeTable) forward(x []float32, T, nh, HD int) {
	half := HD / 2
	parallel.For(T, ropeMinRows, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			cos, sin := rt.cos[t*rt.half:t*rt.half+half], rt.sin[t*rt.half:t*rt.half+half]
			row := x[t*nh*HD : (t+1)*nh*HD]
			for h := 0; h < nh; h++ {
				a, b := row[h*HD:h*HD+half], row[h*HD+half:(h+1)*HD]
				for i := range a {
					x1, x2 := a[i], b[i]
					a[i] = x1*cos[i] - x2*sin[i]
					b[i] = x2*cos[i] + x1*sin[i]
				}
			}
		}
	})
}

// backward turns dx, the gradient w.r.t. forward's output, into the
// gradient w.r.t. its input, in place: the rotation's transpose, a
// rotation by the opposite angles.
func (rt *ropeTable) backward(dx []float32, T, nh, HD int) {
	half := HD / 2
	parallel.For(T, ropeMinRows, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			cos, sin := rt.cos[t*rt.half:t*rt.half+half], rt.sin[t*rt.half:t*rt.half+half]
			row := dx[t*nh*HD : (t+1)*nh*HD]
			for h := 0; h < nh; h++ {
				a, b := row[h*HD:h*HD+half], row[h*HD+half:(h+1)*HD]
				for i := range a {
					d1, d2 := a[i], b[i]
					a[i] = d1*cos[i] + d2*sin[i]
					b[i] = d2*cos[i] - d1*sin[i]
				}
			}
		}
	})
}
