//go:build amd64 && !purego

package fmapeak

import "golang.org/x/sys/cpu"

// fma256 runs n iterations of 12 VFMADD231PS on ymm registers (192 flops
// each); fma512 the same on zmm registers (384 flops).
//
//go:noescape
func fma256(n int)

//go:noescape
func fma512(n int)

//go:noescape
func dp512(n int)

//go:noescape
func vnni512(n int)

// The engine's kernels take AVX-512 where the CPU has it (F and BW, as
// engine/kernels' dispatch), else AVX2 with FMA.
var (
	has512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW
	has256 = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasDP  = has512 && cpu.X86.HasAVX512BF16
	hasI8  = has512 && cpu.X86.HasAVX512VNNI
)

// runInt8 runs the int8 dot-product probe, if the CPU has the unit.
func runInt8(n int) (float64, bool) {
	if !hasI8 {
		return 0, false
	}
	vnni512(n)
	return float64(n) * 2048, true
}

// runBF16 runs the bf16 dot-product probe, if the CPU has the unit.
func runBF16(n int) (float64, bool) {
	if !hasDP {
		return 0, false
	}
	dp512(n)
	return float64(n) * 1024, true
}

func unit() string {
	switch {
	case has512:
		return "fp32 FMA, AVX-512 (512-bit)"
	case has256:
		return "fp32 FMA, AVX2 (256-bit)"
	}
	return goUnit
}

func run(n int) float64 {
	switch {
	case has512:
		fma512(n)
		return float64(n) * 384
	case has256:
		fma256(n)
		return float64(n) * 192
	}
	return runGo(n)
}
