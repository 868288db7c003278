package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// randQuantSource returns an N×K fp32 weight whose blocks of 32 have very
// different magnitudes (one outlier block, one all-zero block, tiny ones),
// so the per-block scales matter.
func randQuantSource(r *rand.Rand, N, K int) *Mat {
	v := randSlice(r, N*K)
	for b := 0; b < len(v)/qBlock; b++ {
		x := v[b*qBlock : (b+1)*qBlock]
		switch b % 7 {
		case 1:
			for i := range x {
				x[i] *= 1e-3
			}
		case 3:
			x[r.IntN(qBlock)] = 40 // an outlier
		case 5:
			clear(x)
		}
	}
	return NewMatF32(N, K, v)
}

func TestQuantizeQ8RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const N, K = 70, 160
	src := randQuantSource(r, N, K)
	q, err := Quantize(src, Q8)
	if err != nil {
		t.Fatal(err)
	}
	quants, scales := append([]int8(nil), q.Quants...), append([]uint16(nil), q.Scales...)
	deq := Dequantize(q) // reads the stored copy, before packing
	for n := range N {
		for b := range K / qBlock {
			x := src.F32[n*K+b*qBlock : n*K+(b+1)*qBlock]
			var amax float32
			for _, v := range x {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			if want := F32ToF16(amax / 127); scales[n*K/qBlock+b]-want > 1 {
				t.Fatalf("row %d block %d: scale %#x, want fp16(max|w|/127) = %#x (or the next)", n, b, scales[n*K/qBlock+b], want)
			}
			d := F16ToF32(scales[n*K/qBlock+b])
			for i, v := range x {
				k := b*qBlock + i
				qv := quants[n*K+k]
				if qv < -127 {
					t.Fatalf("(%d,%d): quant %d below -127", n, k, qv)
				}
				got := deq.F32[n*K+k]
				if got != float32(qv)*d {
					t.Fatalf("(%d,%d): dequantized %v, want %d·%v", n, k, got, qv, d)
				}
				// Round to nearest: within half a step (and an ulp).
				if e := math.Abs(float64(got - v)); e > float64(d)/2*(1+1e-6) {
					t.Fatalf("(%d,%d): |%v − %v| = %g > d/2 = %g", n, k, got, v, e, d/2)
				}
				// The step is at most max|w|/127 of the block, up to the
				// fp16 rounding of the scale (an ulp, 2⁻²⁴, if subnormal).
				if float64(d) > float64(amax)/127*(1+1.0/1024)+0x1p-24 {
					t.Fatalf("(%d,%d): scale %v too large for max %v", n, k, d, amax)
				}
			}
		}
	}
	// Packing keeps the bits: Q8Blocks, Row and At read them back from the
	// panels (the stored copy is released).
	q.Prepack()
	if q.Quants != nil || q.Scales != nil {
		t.Fatal("packing kept the stored Q8 copy")
	}
	gq, gs := q.Q8Blocks()
	for i := range quants {
		if gq[i] != quants[i] {
			t.Fatalf("Q8Blocks quant %d = %d, want %d", i, gq[i], quants[i])
		}
	}
	for i := range scales {
		if gs[i] != scales[i] {
			t.Fatalf("Q8Blocks scale %d = %#x, want %#x", i, gs[i], scales[i])
		}
	}
	checkRowsDequantized(t, q, deq)
	// Quantizing again from the dequantized values is the identity.
	q2, err := Quantize(deq, Q8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range quants {
		if q2.Quants[i] != quants[i] {
			t.Fatalf("requantized %d = %d, want %d", i, q2.Quants[i], quants[i])
		}
	}
}

func TestQuantizeQ8Errors(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	if _, err := Quantize(NewMatF32(2, 48, randSlice(r, 96)), Q8); err == nil || !strings.Contains(err.Error(), "blocks of 32") {
		t.Errorf("48 columns: err = %v, want a whole-blocks error", err)
	}
	v := randSlice(r, 64)
	v[40] = float32(math.NaN())
	if _, err := Quantize(NewMatF32(2, 32, v), Q8); err == nil || !strings.Contains(err.Error(), "row 1") {
		t.Errorf("NaN: err = %v, want an error naming row 1", err)
	}
	if _, err := Quantize(NewMatF32(1, 32, randSlice(r, 32)), BF16); err == nil {
		t.Error("quantizing to BF16 succeeded")
	}
	// 16-bit sources quantize from their stored bits.
	b := randMat(r, 3, 64, BF16)
	q, err := Quantize(b, Q8)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Quantize(Dequantize(b), Q8)
	for i := range q.Quants {
		if q.Quants[i] != want.Quants[i] {
			t.Fatalf("BF16 source: quant %d = %d, want %d", i, q.Quants[i], want.Quants[i])
		}
	}
}

// quantShapes cover the tile edges (rows 1..8, partial panels) and K whose
// sum blocks do not start on a block of 32 (K = 640 sums in blocks of 216;
// 800 in 200), so the kernels cross scale blocks inside a sum.
func quantShapes() []mnk {
	var s []mnk
	for M := 1; M <= 9; M++ {
		s = append(s, mnk{M, 65, 96}, mnk{M, 129, 640})
	}
	for _, N := range []int{1, 7, 16, 17, 33, 63, 64, 127, 128} {
		s = append(s, mnk{3, N, 800}, mnk{6, N, 32})
	}
	return append(s,
		mnk{1, 300, 896}, mnk{2, 1500, 224}, mnk{13, 700, 896}, mnk{9, 130, 4096}, mnk{8, 70, 4864},
		mnk{128, 70, 320}, mnk{129, 70, 320}, mnk{133, 200, 288}, mnk{140, 1100, 64})
}

// TestLinearQ8 checks that a Q8 product equals, bit for bit, the fp32
// product of the dequantized weights on every variant and path (streamed
// in place by the AVX2 kernels, widened per block elsewhere), with and
// without bias, alone and in LinearMulti.
func TestLinearQ8(t *testing.T) { testLinearQuant(t, Q8, 9) }

// TestLinearQ4 is TestLinearQ8 for Q4 weights.
func TestLinearQ4(t *testing.T) { testLinearQuant(t, Q4, 19) }

func testLinearQuant(t *testing.T, dt DType, seed uint64) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(seed, 10))
		for i, sh := range quantShapes() {
			if thin(i) {
				continue
			}
			w, err := Quantize(randQuantSource(r, sh.N, sh.K), dt)
			if err != nil {
				t.Fatal(err)
			}
			ref := Dequantize(w)
			in := randSlice(r, sh.M*sh.K)
			var bias []float32
			if i%2 == 0 {
				bias = randSlice(r, sh.N)
			}
			got, want := make([]float32, sh.M*sh.N), make([]float32, sh.M*sh.N)
			Linear(got, in, w, bias, sh.M)
			Linear(want, in, ref, bias, sh.M)
			what := fmt.Sprintf("%v M=%d N=%d K=%d", dt, sh.M, sh.N, sh.K)
			sameBits(t, what, got, want)
			LinearMulti(in, sh.M, LinearOp{Out: got, W: w, Bias: bias})
			sameBits(t, what+" LinearMulti", got, want)
			if i%5 == 0 {
				scaleWant, scale := linear64(in, ref, bias, sh.M)
				closeTo(t, what+" vs float64", got, scaleWant, scale)
			}
		}
	})
}

// TestLinearBackwardInputQ8: dX = dY·W with W in Q8 equals the same with
// the dequantized fp32 W, bit for bit.
func TestLinearBackwardInputQ8(t *testing.T) { testLinearBackwardInputQuant(t, Q8, 11) }

// TestLinearBackwardInputQ4 is TestLinearBackwardInputQ8 for Q4 weights.
func TestLinearBackwardInputQ4(t *testing.T) { testLinearBackwardInputQuant(t, Q4, 21) }

func testLinearBackwardInputQuant(t *testing.T, dt DType, seed uint64) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(seed, 12))
		// N (weight rows: the packed k-rows) off the multiples of 8 and
		// 64, and with sum blocks that do not start on a panel (N = 640:
		// blocks of 216) or a group of 16 (a Q4 byte holds rows 16s+i and
		// 16s+8+i); K (weight columns) with a last panel of 32.
		for _, sh := range []mnk{{1, 5, 32}, {6, 64, 64}, {7, 65, 96}, {13, 129, 640}, {40, 300, 512}, {100, 70, 1088},
			{3, 640, 96}, {9, 83, 160}, {20, 900, 224}, {150, 203, 96}, {2, 8, 32}} {
			w, err := Quantize(randQuantSource(r, sh.N, sh.K), dt)
			if err != nil {
				t.Fatal(err)
			}
			checkBackwardInputAsF32(t, r, fmt.Sprintf("%v M=%d N=%d K=%d", dt, sh.M, sh.N, sh.K), w, Dequantize(w), sh.M)
		}
	})
}

// TestPackPanelsTQuant checks the transposing pack of quantized panels
// (LinearBackwardInput's B block) value by value against the panels'
// dequantized weights, on blocks of rows that start on and off a panel, a
// group of 8 and a Q4 byte group, end inside them, and span a full or a
// half (32-column) last panel of columns; the rest of each packed row must
// be zero. On the AVX2 variant the groups of 8 rows run the assembly loops
// and the other rows the Go loop.
func TestPackPanelsTQuant(t *testing.T) {
	for _, dt := range []DType{Q8, Q4} {
		t.Run(dt.String(), func(t *testing.T) { testPackPanelsTQuant(t, dt) })
	}
}

func testPackPanelsTQuant(t *testing.T, dt DType) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(31, 32))
		const N, K = 200, 160 // 4 panels, the last with 8 rows; columns: 64, 64, 32
		w, err := Quantize(randQuantSource(r, N, K), dt)
		if err != nil {
			t.Fatal(err)
		}
		deq := Dequantize(w).F32
		// Natural, and the int8 unit's order (vnniPos, q4VnniPos).
		for _, p := range []*panels{w.panels(), w.panels().reorderQuant()} {
			testPackPanelsTQuantOf(t, p, deq, dt, K)
		}
	})
}

func testPackPanelsTQuantOf(t *testing.T, p *panels, deq []float32, dt DType, K int) {
	t.Helper()
	for _, pk := range [][2]int{{0, 200}, {0, 8}, {8, 8}, {8, 64}, {16, 3}, {24, 57}, {56, 16}, {60, 13},
		{64, 136}, {72, 24}, {88, 41}, {136, 64}, {192, 8}, {197, 3}, {128, 72}} {
		pc, kc := pk[0], pk[1]
		for col0 := 0; col0 < K; col0 += panelW {
			ncols := min(panelW, K-col0)
			what := fmt.Sprintf("%v (vnni %v) rows [%d,%d) cols %d+%d", dt, p.vnni, pc, pc+kc, col0, ncols)
			checkPackedBlock(t, what, kc, ncols, func(dst []float32, doff int) { packPanelsTQuant(dst, doff, p, pc, kc, col0, ncols) },
				func(i, j int) float32 { return deq[(pc+i)*K+col0+j] })
		}
	}
}

// TestLinearQ8_RowInvariant: a row of a Q8 product has the same bits alone
// and in any batch (decode, prefill chunks, training passes).
func TestLinearQ8_RowInvariant(t *testing.T) { testLinearQuantRowInvariant(t, Q8, 13) }

// TestLinearQ4_RowInvariant is TestLinearQ8_RowInvariant for Q4 weights.
func TestLinearQ4_RowInvariant(t *testing.T) { testLinearQuantRowInvariant(t, Q4, 23) }

func testLinearQuantRowInvariant(t *testing.T, dt DType, seed uint64) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(seed, 14))
		for _, sh := range [][2]int{{640, 130}, {896, 64}} {
			K, N := sh[0], sh[1]
			w, err := Quantize(randQuantSource(r, N, K), dt)
			if err != nil {
				t.Fatal(err)
			}
			linearRowsAlone(t, r, w, randSlice(r, N))
		}
	})
}

// TestQuantizeQ4_GGML checks Q4 against GGML's reference Q4_0 rounding on
// blocks worked by hand: d = m/−8 for the weight m of largest magnitude
// (so m itself is nibble 0 and the other sign reaches at most 7·|d|, the
// value +8·|d| clamped to nibble 15), weights rounded half up from
// trunc(w/d + 8.5), byte j holding weights j and j+16.
func TestQuantizeQ4_GGML(t *testing.T) {
	row := make([]float32, 64)
	// Block 0: m = −8 (the first of the largest, before +8), so d = 1
	// and weight w is nibble w+8; +8 clamps to 15 (value 7).
	for j := range 32 {
		row[j] = float32(j%16) - 8 // −8..7 twice
	}
	row[20] = 8
	// Block 1: m = +4 at column 3, d = −0.5: w ↦ trunc(−2w + 8.5).
	copy(row[32:], []float32{1, -1, 0.3, 4, -4, 0.24, 0.26, -1.75})
	nib, sc := make([]byte, 32), make([]uint16, 2)
	if err := QuantizeRowQ4(nib, sc, row); err != nil {
		t.Fatal(err)
	}
	if d0, d1 := F16ToF32(sc[0]), F16ToF32(sc[1]); d0 != 1 || d1 != -0.5 {
		t.Fatalf("scales %v, %v; want 1, -0.5", d0, d1)
	}
	want := func(b, j int) byte { // the nibble of weight j of block b
		if b == 0 {
			if j == 20 {
				return 15
			}
			return byte(j % 16)
		}
		switch w := row[32+j]; w {
		case 4:
			return 0
		case -4:
			return 15 // 16.5, clamped
		default:
			return byte(int(-2*w + 8.5))
		}
	}
	for b := range 2 {
		for j := range 16 {
			got := nib[16*b+j]
			if lo, hi := got&15, got>>4; lo != want(b, j) || hi != want(b, j+16) {
				t.Errorf("block %d byte %d = %#02x; want weights %d, %d as nibbles %d, %d", b, j, got, j, j+16, want(b, j), want(b, j+16))
			}
		}
	}
	// The same bytes through a Q4 matrix, packed and read back.
	m := NewMatQ4(1, 64, append([]byte(nil), nib...), append([]uint16(nil), sc...))
	back, bs := m.Q4Blocks()
	if string(back) != string(nib) || bs[0] != sc[0] || bs[1] != sc[1] {
		t.Fatalf("Q4Blocks after packing: %x %x; want %x %x", back, bs, nib, sc)
	}
	for k := range 64 {
		n := int(nib[k/32*16+k%16]>>(4*(k%32/16))) & 15
		if got, want := m.At(0, k), float32(n-8)*F16ToF32(sc[k/32]); got != want {
			t.Fatalf("At(0, %d) = %v, want (%d−8)·d = %v", k, got, n, want)
		}
	}
}

// TestQuantizeQ4RoundTrip: Q4 weights are within about half a step of the
// source, packing keeps the bytes, and Row, At and Dequantize agree.
func TestQuantizeQ4RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	const N, K = 70, 160
	src := randQuantSource(r, N, K)
	q, err := Quantize(src, Q4)
	if err != nil {
		t.Fatal(err)
	}
	nib, scales := append([]byte(nil), q.Nibbles...), append([]uint16(nil), q.Scales...)
	deq := Dequantize(q)
	for n := range N {
		for b := range K / qBlock {
			d := float64(F16ToF32(scales[n*K/qBlock+b]))
			for i := range qBlock {
				k := b*qBlock + i
				got, v := float64(deq.F32[n*K+k]), float64(src.F32[n*K+k])
				// Half a step, plus the fp16 rounding of d over 8 steps;
				// GGML clamps at nibble 15, so a weight of the other
				// sign than the largest, past 7.5 steps, is off by
				// up to a whole step.
				steps := 0.5
				if d != 0 {
					steps = max(steps, v/d-7)
				}
				if e := math.Abs(got - v); e > math.Abs(d)*(steps+8.0/2048+1e-3)+1e-30 {
					t.Fatalf("(%d,%d): |%v − %v| = %g > %g steps of d = %g", n, k, got, v, e, steps, d)
				}
			}
		}
	}
	q.Prepack()
	if q.Nibbles != nil || q.Scales != nil {
		t.Fatal("packing kept the stored Q4 copy")
	}
	gn, gs := q.Q4Blocks()
	if string(gn) != string(nib) {
		t.Fatal("Q4Blocks nibbles differ from the quantized ones")
	}
	for i := range scales {
		if gs[i] != scales[i] {
			t.Fatalf("Q4Blocks scale %d = %#x, want %#x", i, gs[i], scales[i])
		}
	}
	checkRowsDequantized(t, q, deq)
	if _, err := Quantize(NewMatF32(2, 48, randSlice(r, 96)), Q4); err == nil || !strings.Contains(err.Error(), "blocks of 32") {
		t.Errorf("48 columns: err = %v, want a whole-blocks error", err)
	}
	v := randSlice(r, 64)
	v[40] = float32(math.Inf(1))
	if _, err := Quantize(NewMatF32(2, 32, v), Q4); err == nil || !strings.Contains(err.Error(), "row 1") {
		t.Errorf("Inf: err = %v, want an error naming row 1", err)
	}
}

// sameBits fails unless got and want are identical, NaNs included.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: index %d: %v (%#x), want %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// checkRowsDequantized fails unless every row q gives (Row, and At for each
// element) is deq's, its dequantized fp32 copy, bit for bit.
func checkRowsDequantized(t *testing.T, q, deq *Mat) {
	t.Helper()
	N, K := q.Rows, q.Cols
	row := make([]float32, K)
	for n := range N {
		q.Row(row, n)
		for k, v := range row {
			if v != deq.F32[n*K+k] || q.At(n, k) != v {
				t.Fatalf("(%d,%d): Row %v, At %v, want %v", n, k, v, q.At(n, k), deq.F32[n*K+k])
			}
		}
	}
}
