//go:build linux

package kernels

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// BenchmarkDecodeGroupDP is a decoding group of 8 rows on UnitBF16 over
// Qwen2.5-0.5B's LM head and gate/up shapes: the 8-row kernel (one pass
// over the weights) against 6 + 2 rows, interleaved in one process, as the
// bytes of weights streamed per second.
func BenchmarkDecodeGroupDP(b *testing.B) {
	if !hasDP() {
		b.Skip("no AVX512_BF16")
	}
	defer func(u Unit, v bool) { unit, useDPM8 = u, v }(currentUnit(), useDPM8)
	unit = UnitBF16
	r := rand.New(rand.NewPCG(8, 8))
	for _, sh := range []struct {
		name string
		N, K int
	}{{"lm_head_151936x896", 151936, 896}, {"gate_up_9728x896", 9728, 896}, {"down_896x4864", 896, 4864}, {"qkv_1152x896", 1152, 896}} {
		w := randMat(r, sh.N, sh.K, BF16)
		w.Prepack()
		const M = 8
		inp := randSlice(r, M*sh.K)
		out := make([]float32, M*sh.N)
		for _, m8 := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/m8=%v", sh.name, m8), func(b *testing.B) {
				useDPM8 = m8
				for b.Loop() {
					Linear(out, inp, w, nil, M)
				}
				b.ReportMetric(float64(2*sh.N*sh.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkI8Step is a decoding step's Q8 or Q4 products for a group of
// 8 on UnitInt8 over Qwen2.5-0.5B's shapes (benchStep): the int8 kernel
// choices, ms a step.
func BenchmarkI8Step(b *testing.B) {
	if !hasI8() {
		b.Skip("no AVX512_VNNI")
	}
	defer func(u Unit, v, w bool) { unit, useI8M8, useI8M6 = u, v, w }(currentUnit(), useI8M8, useI8M6)
	unit = UnitInt8
	for _, dt := range []DType{Q8, Q4} {
		b.Run(dt.String(), func(b *testing.B) {
			r := rand.New(rand.NewPCG(8, 10))
			benchStep(b, func(N, K int) *Mat {
				w, err := Quantize(NewMatF32(N, K, randSlice(r, N*K)), dt)
				if err != nil {
					b.Fatal(err)
				}
				return w
			}, []stepVariant{
				{"m3", func() { useI8M8, useI8M6 = false, false }},
				{"m6t", func() { useI8M8, useI8M6 = false, true }},
				{"m8", func() { useI8M8, useI8M6 = true, true }},
			})
		})
	}
}

// BenchmarkDPStep is a decoding step's bf16 products for a group of 8 on
// UnitBF16 over Qwen2.5-0.5B's shapes (benchStep): the 8-row kernel
// against 6 + 2 rows, ms a step.
func BenchmarkDPStep(b *testing.B) {
	if !hasDP() {
		b.Skip("no AVX512_BF16")
	}
	defer func(u Unit, v bool) { unit, useDPM8 = u, v }(currentUnit(), useDPM8)
	unit = UnitBF16
	r := rand.New(rand.NewPCG(8, 11))
	benchStep(b, func(N, K int) *Mat { return randMat(r, N, K, BF16) }, []stepVariant{
		{"m8", func() { useDPM8 = true }},
		{"m6+2", func() { useDPM8 = false }},
	})
}

// stepVariant is one kernel choice of benchStep: set selects it.
type stepVariant struct {
	name string
	set  func()
}

// benchStep times a decoding step's products for a group of 8 over
// Qwen2.5-0.5B's shapes (24 layers of distinct weights made by mk, then
// the LM head: cold, as in a model), each variant once per iteration in
// turn, so that the host's bandwidth, which drifts by the minute, is the
// same for all. It reports ms a step and the weights' GB/s per variant.
func benchStep(b *testing.B, mk func(N, K int) *Mat, variants []stepVariant) {
	benchStepRows(b, 8, mk, variants)
}

// benchStepRows is benchStep for M rows.
func benchStepRows(b *testing.B, M int, mk func(N, K int) *Mat, variants []stepVariant) {
	w := newStepWeights(mk)
	r := rand.New(rand.NewPCG(8, 12))
	x, x4 := randSlice(r, M*896), randSlice(r, M*4864)
	out := make([]float32, M*151936)
	times := make([][]float64, len(variants))
	for b.Loop() {
		for i, v := range variants {
			v.set()
			t := time.Now()
			w.layersStep(out, x, x4, M)
			Linear(out, x, w.head, nil, M)
			times[i] = append(times[i], time.Since(t).Seconds())
		}
	}
	for i, v := range variants {
		med := median(times[i])
		b.ReportMetric(med*1e3, v.name+"_ms")
		b.ReportMetric(float64(w.bytes)/med/1e9, v.name+"_GB/s")
	}
}

// stepWeights are Qwen2.5-0.5B-shaped decoding weights: 24 layers of
// distinct matrices (q, k, v as one; gate and up as one) and the LM head,
// packed, with the bytes one pass over them reads.
type stepWeights struct {
	layers []struct{ qkv, o, gateUp, down *Mat }
	head   *Mat
	bytes  int64
}

// newStepWeights makes the matrices with mk and packs them.
func newStepWeights(mk func(N, K int) *Mat) *stepWeights {
	w := &stepWeights{}
	mat := func(N, K int) *Mat {
		m := mk(N, K)
		m.Prepack()
		w.bytes += int64(m.LinearBytes())
		return m
	}
	w.layers = make([]struct{ qkv, o, gateUp, down *Mat }, 24)
	for l := range w.layers {
		w.layers[l].qkv, w.layers[l].o, w.layers[l].gateUp, w.layers[l].down = mat(1152, 896), mat(896, 896), mat(9728, 896), mat(896, 4864)
	}
	w.head = mat(151936, 896)
	return w
}

// layersStep runs the layers' products for M rows (x: M×896, x4:
// M×4864), all into out.
func (w *stepWeights) layersStep(out, x, x4 []float32, M int) {
	for _, l := range w.layers {
		Linear(out, x, l.qkv, nil, M)
		Linear(out, x, l.o, nil, M)
		Linear(out, x, l.gateUp, nil, M)
		Linear(out, x4, l.down, nil, M)
	}
}

// median sorts v and returns its middle value: a step the host stalls is
// an outlier, not a share of a mean.
func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkDecodeStepChunks is a single sequence's decoding step (one row)
// over Qwen2.5-0.5B's shapes (benchStepRows) with each product cut into
// 8 chunks per goroutine dealt from one counter, or 32 or 64 taken from
// each goroutine's own range (runOwned) one at a time or a half or a third
// of what is left at a time (ownedBatch): Q4 and Q8 on UnitInt8, bf16 on
// UnitBF16, where the CPU has them.
func BenchmarkDecodeStepChunks(b *testing.B) {
	defer func(u Unit, c, ob int, o bool) { unit, decodeChunks, ownedBatch, ownedRanges = u, c, ob, o }(currentUnit(), decodeChunks, ownedBatch, ownedRanges)
	variants := []stepVariant{{"counter8", func() { decodeChunks, ownedRanges = 8, false }}}
	for _, v := range [][2]int{{32, 0}, {32, 2}, {32, 3}, {64, 2}} {
		variants = append(variants, stepVariant{fmt.Sprintf("owned%d/batch%d", v[0], v[1]), func() { decodeChunks, ownedBatch, ownedRanges = v[0], v[1], true }})
	}
	r := rand.New(rand.NewPCG(8, 13))
	for _, dt := range []DType{Q4, Q8, BF16} {
		b.Run(dt.String(), func(b *testing.B) {
			useDecodeUnit(b, dt)
			benchStepRows(b, 1, func(N, K int) *Mat { return randStepMat(b, r, dt, N, K) }, variants)
		})
	}
}

// BenchmarkDecodeStepPages is a single sequence's decoding products over
// Qwen2.5-0.5B's shapes (as benchStepRows) with the packed weights on
// 4 KiB pages and on huge pages (packedmem.go): two sets of matrices,
// timed in turn, ms a step for the layers and the LM head. Q8 on UnitInt8
// and bf16 on UnitBF16, where the CPU has them.
func BenchmarkDecodeStepPages(b *testing.B) {
	defer func(u Unit, h bool) { unit, useHugePages = u, h }(currentUnit(), useHugePages)
	for _, dt := range []DType{Q8, BF16} {
		b.Run(dt.String(), func(b *testing.B) {
			useDecodeUnit(b, dt)
			r := rand.New(rand.NewPCG(8, 14))
			sets := []struct {
				name  string
				w     *stepWeights
				times [2][]float64 // layers, head
			}{{name: "4KiB"}, {name: "huge"}}
			for i := range sets {
				useHugePages = i == 1
				sets[i].w = newStepWeights(func(N, K int) *Mat { return randStepMat(b, r, dt, N, K) })
			}
			x, x4 := randSlice(r, 896), randSlice(r, 4864)
			out := make([]float32, 151936)
			for b.Loop() {
				for i := range sets {
					s := &sets[i]
					t := time.Now()
					s.w.layersStep(out, x, x4, 1)
					t1 := time.Now()
					Linear(out, x, s.w.head, nil, 1)
					s.times[0] = append(s.times[0], t1.Sub(t).Seconds())
					s.times[1] = append(s.times[1], time.Since(t1).Seconds())
				}
			}
			for _, s := range sets {
				for i, part := range []string{"layers", "head"} {
					b.ReportMetric(median(s.times[i])*1e3, s.name+"_"+part+"_ms")
				}
			}
		})
	}
}

// useDecodeUnit sets the unit that decodes dt weights (UnitBF16 for bf16,
// UnitInt8 for Q8 and Q4), or skips b on a CPU without it.
func useDecodeUnit(b *testing.B, dt DType) {
	switch {
	case dt == BF16 && hasDP():
		unit = UnitBF16
	case dt != BF16 && hasI8():
		unit = UnitInt8
	default:
		b.Skip("no unit for ", dt)
	}
}

// randStepMat returns an N×K matrix of random weights stored as dt (BF16,
// Q8 or Q4).
func randStepMat(b *testing.B, r *rand.Rand, dt DType, N, K int) *Mat {
	if dt == BF16 {
		return randMat(r, N, K, BF16)
	}
	w, err := Quantize(NewMatF32(N, K, randSlice(r, N*K)), dt)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkDecodeStepPrefetch is a single sequence's decoding step over
// Qwen2.5-0.5B's shapes (benchStepRows) on UnitBF16 with the dp panels
// prefetched 64 bytes to 4 KiB ahead (prefetchDecodeDP).
func BenchmarkDecodeStepPrefetch(b *testing.B) {
	if !hasDP() {
		b.Skip("no AVX512_BF16")
	}
	defer func(u Unit, d int) { unit, prefetchDecodeDP = u, d }(currentUnit(), prefetchDecodeDP)
	unit = UnitBF16
	var variants []stepVariant
	for _, d := range []int{64, 128, 256, 1024, 4096} {
		variants = append(variants, stepVariant{fmt.Sprint("ahead", d), func() { prefetchDecodeDP = d }})
	}
	r := rand.New(rand.NewPCG(8, 15))
	benchStepRows(b, 1, func(N, K int) *Mat { return randMat(r, N, K, BF16) }, variants)
}
