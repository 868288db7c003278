package model

import "math"

// ropeFreqs returns the HD/2 rotary inverse frequencies of cfg, including the
// llama3 long-context rescaling when configured (as transformers computes it).
func ropeFreqs(cfg Config) []float64 {
	half := cfg.HeadDim / 2
	inv := make([]float64, half)
	for i := range inv {
		inv[i] = 1 / math.Pow(cfg.RopeTheta, float64(2*i)/float64(cfg.HeadDim))
	}
	rs := cfg.RopeScaling
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

// ropeForward rotates, in place, each of the nh heads (HD wide) of the T rows
// of x (T, nh*HD) by the angle pos[t]*freq, pairing element i with i+HD/2
// (the "rotate_half" convention of Llama and Qwen2 checkpoints).
func ropeForward(x []float32, pos []int, freqs []float64, T, nh, HD int) {
	half := HD / 2
	cos := make([]float32, half)
	sin := make([]float32, half)
	for t := 0; t < T; t++ {
		p := float64(pos[t])
		for i, f := range freqs {
			s, c := math.Sincos(p * f)
			cos[i], sin[i] = float32(c), float32(s)
		}
		row := x[t*nh*HD : (t+1)*nh*HD]
		for h := 0; h < nh; h++ {
			v := row[h*HD : (h+1)*HD]
			for i := 0; i < half; i++ {
				x1, x2 := v[i], v[i+half]
				v[i] = x1*cos[i] - x2*sin[i]
				v[i+half] = x2*cos[i] + x1*sin[i]
			}
		}
	}
}

// ropeBackward turns the gradient w.r.t. ropeForward's output into the
// gradient w.r.t. its input, in place: the rotation's transpose.
func ropeBackward(dx []float32, pos []int, freqs []float64, T, nh, HD int) {
	half := HD / 2
	cos := make([]float32, half)
	sin := make([]float32, half)
	for t := 0; t < T; t++ {
		p := float64(pos[t])
		for i, f := range freqs {
			s, c := math.Sincos(p * f)
			cos[i], sin[i] = float32(c), float32(s)
		}
		row := dx[t*nh*HD : (t+1)*nh*HD]
		for h := 0; h < nh; h++ {
			v := row[h*HD : (h+1)*HD]
			for i := 0; i < half; i++ {
				d1, d2 := v[i], v[i+half]
				v[i] = d1*cos[i] + d2*sin[i]
				v[i+half] = d2*cos[i] - d1*sin[i]
			}
		}
	}
}
