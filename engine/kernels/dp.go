package kernels

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/artgo/art/internal/parallel"
)

// Unit is the arithmetic the weight products (Linear and
// LinearBackwardInput: the model's projections, forward and backward) run
// on. Everything else (LoRA, attention, norms, softmax) is fp32 in every
// unit.
type Unit uint8

const (
	// UnitFP32 is exact fp32: the products of fp32 (or widened 16-bit)
	// weights and fp32 activations, summed with FMAs.
	UnitFP32 Unit = iota
	// UnitBF16 rounds both factors of every weight product to bf16 (ties
	// to even) and sums the exact products in fp32, two at a time
	// (VDPBF16PS, AVX512_BF16): half the bytes per multiply-add and, on
	// CPUs that run it at the FMA's rate, twice the products per cycle.
	// A bf16 weight loses nothing; fp16 and fp32 weights are rounded to
	// bf16's 8 significant bits, activations too. Quantized weights (Q8,
	// Q4) keep their exact fp32 path.
	UnitBF16
	// UnitInt8 rounds the activations of Q8 and Q4 weights' products to
	// Q8_0 blocks and sums int8 products exactly in int32 per block
	// (VPDPBUSD, AVX512_VNNI), as llama.cpp does on CPUs (int8.go):
	// a quarter of fp32's bytes per multiply-add, and four products per
	// instruction lane. Other weights run as on UnitBF16 where the CPU
	// has it, else as on UnitFP32.
	// Never chosen by auto: it is asked for (the quantized weights'
	// products stay exact by default).
	UnitInt8
)

func (u Unit) String() string {
	switch u {
	case UnitFP32:
		return "fp32"
	case UnitBF16:
		return "bf16"
	case UnitInt8:
		return "int8"
	}
	return fmt.Sprintf("Unit(%d)", uint8(u))
}

// ParseUnit reads a unit name: "fp32" (or "exact"), "bf16", "int8", or
// "auto" or "" (the fastest the CPU has of fp32 and bf16: auto is then
// true, and the caller asks BestUnit).
func ParseUnit(s string) (u Unit, auto bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fp32", "exact", "f32":
		return UnitFP32, false, nil
	case "bf16":
		return UnitBF16, false, nil
	case "int8":
		return UnitInt8, false, nil
	case "auto", "":
		return UnitFP32, true, nil
	}
	return 0, false, fmt.Errorf("matmul unit %q: want fp32 (exact), bf16, int8 or auto", s)
}

// UnitEnv is the environment variable that picks the unit at start-up
// (fp32, bf16, int8 or auto; default auto).
const UnitEnv = "ART_MATMUL_UNIT"

// unit is the unit in use and unitWhy why: chosen on first use
// (currentUnit: startUnit's measurement costs ~20 ms, which a program
// that multiplies nothing should not pay), or by SetUnit before any
// product runs.
var (
	unitOnce sync.Once
	unit     Unit
	unitWhy  string
)

// currentUnit returns the unit in use, choosing it first if nothing has.
func currentUnit() Unit {
	unitOnce.Do(func() { unit, unitWhy = startUnit() })
	return unit
}

// startUnit reads UnitEnv and, for auto, measures.
func startUnit() (Unit, string) {
	env := os.Getenv(UnitEnv)
	u, auto, err := ParseUnit(env)
	switch {
	case err != nil:
		return UnitFP32, fmt.Sprintf("%v (%s); using fp32", err, UnitEnv)
	case auto:
		return BestUnit()
	case u == UnitBF16 && !hasDP():
		return UnitFP32, fmt.Sprintf("%s=bf16 but this CPU has no AVX512_BF16; using fp32", UnitEnv)
	case u == UnitInt8 && !hasI8():
		return UnitFP32, fmt.Sprintf("%s=int8 but this CPU has no AVX512_VNNI; using fp32", UnitEnv)
	}
	return u, fmt.Sprintf("set by %s=%s", UnitEnv, env)
}

// Units lists the units this CPU can run the weight products on, exact
// fp32 first.
func Units() []Unit {
	us := []Unit{UnitFP32}
	if hasDP() {
		us = append(us, UnitBF16)
	}
	if hasI8() {
		us = append(us, UnitInt8)
	}
	return us
}

// ActiveUnit is the unit the weight products run on, and why it was chosen.
func ActiveUnit() (Unit, string) {
	u := currentUnit()
	return u, unitWhy
}

// SetUnit makes the weight products run on u. It must be called before
// any product runs (a flag read at start-up, a test's setup): sampler and
// trainer must use one unit for their logprobs to agree. It fails if the
// CPU lacks the unit.
func SetUnit(u Unit) error {
	switch u {
	case UnitFP32:
	case UnitBF16:
		if !hasDP() {
			return fmt.Errorf("matmul unit bf16 needs AVX512_BF16, which this CPU (or the %s kernels in use) lacks", active)
		}
	case UnitInt8:
		if !hasI8() {
			return fmt.Errorf("matmul unit int8 needs AVX512_VNNI, which this CPU (or the %s kernels in use) lacks", active)
		}
	default:
		return fmt.Errorf("unknown matmul unit %d", u)
	}
	unitOnce.Do(func() {}) // chosen: no measurement on first use
	unit, unitWhy = u, "set by the program"
	return nil
}

// UseUnit makes the weight products run on the unit named name (see
// ParseUnit; "auto" measures with BestUnit now), for a flag read at
// start-up, and returns it. A flag left empty is better not passed on:
// the kernels then choose on first use, and a program that multiplies
// nothing does not measure.
func UseUnit(name string) (Unit, error) {
	u, auto, err := ParseUnit(name)
	if err != nil {
		return 0, err
	}
	if auto {
		u, _ = BestUnit()
	}
	return u, SetUnit(u)
}

// BestUnit measures the units the CPU has on the microkernel the weight
// products spend their time in (6 rows × 64 columns over weights in L1)
// and returns the fastest, with what was measured. bf16 must beat fp32 by
// 20 % in multiply-adds per second to be chosen: it rounds, so it has to
// pay for it.
func BestUnit() (Unit, string) {
	if !hasDP() {
		return UnitFP32, "fp32: the only unit this CPU has"
	}
	fp32, bf16 := unitRates()
	if bf16 > 1.2*fp32 {
		return UnitBF16, fmt.Sprintf("bf16: %.0f GFLOP/s a core against fp32's %.0f, measured at first use", bf16, fp32)
	}
	return UnitFP32, fmt.Sprintf("fp32: %.0f GFLOP/s a core, bf16 %.0f (needs 1.2×), measured at first use", fp32, bf16)
}

// unitRates times the 6-row AVX-512 kernels on an L1-resident block: each
// unit warmed up for a few milliseconds (a unit idle until then can start
// slow: one such start measured bf16 at a third of its rate), then the best
// of alternating runs of ~1 ms, so a burst of other work lowers one run of
// each, not the choice.
func unitRates() (fp32, bf16 float64) {
	const k, np = 128, 2 // k k-rows (fp32) or pairs (bf16) of 2 panels: 64 KiB
	a := make([]float32, 6*k)
	b := make([]float32, np*k*panelW)
	c := make([]float32, 6*np*panelW)
	for i := range a {
		a[i] = math.Float32frombits(0x3f803f80) // 1.0 as fp32 ≈ 1.0039, as a bf16 pair 1, 1
	}
	for i := range b {
		b[i] = math.Float32frombits(0x3c003c00)
	}
	rate := func(dp bool, d time.Duration) float64 {
		t := tileArgs{mr: 6, k: k, a: a, lda: k, bf: b, ldb: panelW, pstride: k * panelW, np: np, ncols: np * panelW,
			c: c, ldc: np * panelW, dp: dp}
		macs := float64(6 * k * np * panelW)
		if dp {
			macs *= 2
		}
		n := 0
		start := time.Now()
		for time.Since(start) < d {
			for range 8 {
				tile(&t)
			}
			n += 8
		}
		return 2 * macs * float64(n) / time.Since(start).Seconds() / 1e9
	}
	dp := hasDP()
	rate(false, 3*time.Millisecond)
	if dp {
		rate(true, 3*time.Millisecond)
	}
	for range 6 {
		fp32 = max(fp32, rate(false, time.Millisecond))
		if dp {
			bf16 = max(bf16, rate(true, time.Millisecond))
		}
	}
	return fp32, bf16
}

// The bf16 pair layout. A row of activations becomes bf16 pairs: word i
// (32 bits) holds k-rows 2i (low half) and 2i+1 (high half), rounded to
// bf16, a zero filling an odd K's last pair; that is the row rounded to
// bf16 and read as 32-bit words. A weight's dp panels hold, per pair-row i
// of panel p, 64 such words, column j's at p·K2·64 + i·64 + j (K2 =
// ⌈K/2⌉): the fp32 panels' layout with pairs for k-rows, so the fp32
// drivers move them unchanged. Both are kept in float32 slices as bit
// patterns (never computed with, only copied).

// pairs returns ⌈k/2⌉, the pairs of k k-rows.
func pairs(k int) int { return (k + 1) / 2 }

// bf16Pair packs two fp32 values as one pair word.
func bf16Pair(lo, hi float32) float32 {
	return math.Float32frombits(uint32(dpBF16(lo)) | uint32(dpBF16(hi))<<16)
}

// dpBF16 rounds f to bf16 as the unit's conversion (VCVTNE2PS2BF16) does:
// F32ToBF16, but a denormal becomes a zero of its sign (the dot products
// would read it as zero anyway).
func dpBF16(f float32) uint16 { return F32ToBF16(ftz(f)) }

// toPairs writes rows × k values of src (row stride lds) as bf16 pairs to
// dst (row stride ⌈k/2⌉ words), on all cores when there are many.
func toPairs(dst, src []float32, rows, k, lds int) {
	parallel.For(rows, max(1, (1<<18)/max(k, 1)), func(lo, hi int) {
		toPairsRows(dst, src, lo, hi, k, lds)
	})
}

// toPairsRows is toPairs for rows [lo, hi).
func toPairsRows(dst, src []float32, lo, hi, k, lds int) {
	k2 := pairs(k)
	for r := lo; r < hi; r++ {
		s, d := src[r*lds:r*lds+k], dst[r*k2:(r+1)*k2]
		done := pairsAsm(d, s, k)
		for i := done / 2; i < k/2; i++ {
			d[i] = bf16Pair(s[2*i], s[2*i+1])
		}
		if k%2 == 1 {
			d[k2-1] = bf16Pair(s[k-1], 0)
		}
	}
}

// dpPanels returns m's dp panels: B = wᵀ (K k-rows, N columns) rounded to
// bf16 pairs, for Linear. Built on first use from the exact weight (for a
// BF16 weight packed on UnitBF16 they are its only copy: Mat.pack).
func (m *Mat) dpPanels() []float32 {
	m.pack()
	if d := m.dp.Load(); d != nil {
		return *d
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dp.Load() == nil {
		d := m.buildDP()
		m.dp.Store(&d)
	}
	return *m.dp.Load()
}

// dpBits returns the bits of weight (n, k) from the dp panels d of a weight
// of K columns.
func dpBits(d []float32, K, n, k int) uint16 {
	w := math.Float32bits(d[(n/panelW)*pairs(K)*panelW+(k/2)*panelW+n%panelW])
	return uint16(w >> (16 * (k & 1)))
}

// buildDP lays m's weights out as dp panels of B = wᵀ, spread over the
// available cores.
func (m *Mat) buildDP() []float32 {
	N, K := m.Rows, m.Cols
	K2 := pairs(K)
	var d []float32
	if n := (N + panelW - 1) / panelW * K2 * panelW; m.DType == F32 {
		d = heapFloats(n) // not from a slab: see heapFloats
	} else {
		d = packed[float32](n, 0)
	}
	// Worker w fills columns w, w+t, ...
	fill := func(w, t int) {
		if m.DType == BF16 { // the bits themselves: dp panels are then a lossless copy
			bits := make([]uint16, K+1)
			for n := w; n < N; n += t {
				if m.U16 != nil { // packing (Mat.pack)
					copy(bits, m.U16[n*K:(n+1)*K])
				} else {
					m.rowBits(bits, n)
				}
				base := (n/panelW)*K2*panelW + n%panelW
				for i := range K2 {
					d[base+i*panelW] = math.Float32frombits(uint32(bits[2*i]) | uint32(bits[2*i+1])<<16)
				}
			}
			return
		}
		row := make([]float32, K+1)
		for n := w; n < N; n += t {
			m.Row(row[:K], n)
			base := (n/panelW)*K2*panelW + n%panelW
			for i := range K2 {
				d[base+i*panelW] = bf16Pair(row[2*i], row[2*i+1])
			}
		}
	}
	spread(N*K, runtime.GOMAXPROCS(0), fill)
	return d
}

// dpWord is what VDPBF16PS adds to one fp32 lane for one pair of pairs:
// acc + a_hi·b_hi, rounded, then + a_lo·b_lo, rounded (ties to even; each
// product of two bf16 is exact in fp32), with bf16 denormal inputs read
// as zero and a denormal result flushed to zero, as Intel's SDM defines
// the instruction.
func dpWord(acc float32, a, b float32) float32 {
	ua, ub := math.Float32bits(a), math.Float32bits(b)
	half := func(u uint32) float32 { return ftz(math.Float32frombits(u)) }
	hi := float32(half(ua&0xffff0000) * half(ub&0xffff0000))
	acc = ftz(acc + hi)
	lo := float32(half(ua<<16) * half(ub<<16))
	return ftz(acc + lo)
}

// ftz flushes a denormal f to the zero of its sign (denormals are read
// as zero and results flushed by the unit).
func ftz(f float32) float32 {
	if u := math.Float32bits(f); u&0x7f800000 == 0 {
		return math.Float32frombits(u & 0x80000000)
	}
	return f
}

// dpUnit reports whether m's products run on the bf16 dot products:
// UnitBF16 (or UnitInt8 on a CPU that has them) is in use and m is not
// quantized (Q8 and Q4 keep their own paths).
func (m *Mat) dpUnit() bool { return bf16Products() && m.DType != Q8 && m.DType != Q4 }

// bf16Products reports whether the unit in use runs unquantized weights'
// products on the bf16 dot products.
func bf16Products() bool {
	u := currentUnit()
	return u == UnitBF16 || u == UnitInt8 && hasDP()
}

// i8Unit reports whether m's products run on UnitInt8's int8 kernels.
func (m *Mat) i8Unit() bool { return (m.DType == Q8 || m.DType == Q4) && currentUnit() == UnitInt8 }

// toDP makes j (a product of inner size K over A = a, lda) a UnitBF16
// one: A rounded to pairs into a pooled buffer, K counting pairs; the
// caller sets B. If shared already holds this A as pairs (an earlier job
// of LinearMulti over the same input), j reads it instead.
func (j *job) toDP(shared *job) {
	K2 := pairs(j.K)
	if shared != nil && shared.dp && shared.src == &j.a[0] && shared.M == j.M && shared.K == K2 && shared.srcLda == j.lda {
		j.a, j.lda, j.K, j.dp, j.src, j.srcLda = shared.a, K2, K2, true, shared.src, shared.srcLda
		return
	}
	j.abuf = getPairBuf(j.M * K2)
	toPairs(*j.abuf, j.a, j.M, j.K, j.lda)
	j.src, j.srcLda = &j.a[0], j.lda
	j.a, j.lda, j.K, j.dp = *j.abuf, K2, K2, true
}

// Pooled buffers of activations as pairs, apart from the drivers' small
// scratch (getBuf): they run to hundreds of megabytes (the LM head's input
// gradient: 256 rows × 151936 logits), and a fresh one costs a page fault
// every 4 KiB on first touch, which measured 30 times the conversion.
var pairPool sync.Pool

// getPairBuf returns a pooled buffer of n floats, a new one (backed by
// huge pages where the kernel allows) if the pooled one is smaller.
func getPairBuf(n int) *[]float32 {
	if b, ok := pairPool.Get().(*[]float32); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	s := heapFloats(n)
	return &s
}
