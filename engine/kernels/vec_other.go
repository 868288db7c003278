//go:build !amd64 || purego

package kernels

// Without assembly the vector helpers run entirely in Go.

func dotAsm(a, b []float32, n int) (float32, int)          { return 0, 0 }
func axpyAsm(alpha float32, x, y []float32, n int) int     { return 0 }
func scaleAsm(alpha float32, x []float32, n int) int       { return 0 }
func widenAsm(dst []float32, src []uint16, n int) int      { return 0 }
func softmaxGradAsm(dp, p []float32, c, scale float32) int { return 0 }

func pairsAsm(dst, src []float32, n int) int { return 0 }

func sumSquaresAsm(x []float32) (float64, bool)       { return 0, false }
func normScaleAsm(out, x, w []float32, r float32) int { return 0 }
