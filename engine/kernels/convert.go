package kernels

import (
	"math"
	"sync"

	"github.com/x448/float16"
)

// BF16ToF32 widens a bfloat16 bit pattern to float32 (exact).
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds f to the nearest bfloat16, ties to even; NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it quiet and non-zero
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F16ToF32 widens an IEEE half-precision bit pattern to float32 (exact).
func F16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }

// F32ToF16 rounds f to the nearest IEEE half, ties to even.
func F32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// f16Table returns the fp32 value of every half bit pattern (256 KiB, built
// on first use), for the Go paths that widen many f16 values.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for i := range t {
		t[i] = F16ToF32(uint16(i))
	}
	return t
})
