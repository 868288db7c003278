package safetensors

import "testing"

// BenchmarkReadF32 measures load throughput per stored dtype (bytes/s of
// file data), from memory so that only decoding is measured.
func BenchmarkReadF32(b *testing.B) {
	const n = 4 << 20 // 4 Mi elements
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i%1000) / 7
	}
	for _, d := range []DType{F32, BF16, F16} {
		b.Run(d.String(), func(b *testing.B) {
			f := mustOpenBytes(b, mustWrite(b, []Tensor{FromF32("w", d, []int{n}, vals)}, nil))
			dst := make([]float32, n)
			b.SetBytes(int64(n * d.Size()))
			for b.Loop() {
				if err := f.ReadF32Into("w", dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
