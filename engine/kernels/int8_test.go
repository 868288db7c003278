package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// linearI8Ref is UnitInt8's Linear as int8.go defines it, from the
// weight's own row-major quants and scales: activations rounded per
// block (an fp32 reciprocal, then to nearest even), each block's exact
// integer sum times (dw·d), added from zero, then the bias.
func linearI8Ref(in []float32, M, K int, quants []int8, scales []uint16, N int, bias []float32) []float32 {
	out := make([]float32, M*N)
	nb := K / qBlock
	for m := range M {
		q := make([]int8, K)
		d := make([]float32, nb)
		for g := range nb {
			x := in[m*K+g*qBlock:][:qBlock]
			var amax float64
			for _, v := range x {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			if amax == 0 {
				continue
			}
			if math.IsNaN(amax) || math.IsInf(amax, 0) {
				d[g] = float32(math.NaN())
				continue
			}
			inv := 127 / float32(amax)
			for i, v := range x {
				q[g*qBlock+i] = int8(math.RoundToEven(float64(v * inv)))
			}
			d[g] = float32(amax) / 127
		}
		for n := range N {
			var acc float32
			for g := range nb {
				var dot int32
				for k := g * qBlock; k < (g+1)*qBlock; k++ {
					dot += int32(quants[n*K+k]) * int32(q[k])
				}
				acc += float32(float32(dot) * (F16ToF32(scales[n*nb+g]) * d[g]))
			}
			if bias != nil {
				acc += bias[n]
			}
			out[m*N+n] = acc
		}
	}
	return out
}

// needI8 skips a test of the VPDPBUSD kernels themselves on a CPU without
// them (the Go emulation runs UnitInt8 everywhere).
func needI8(t *testing.T) {
	t.Helper()
	if !hasI8() {
		t.Skip("this CPU has no AVX512_VNNI: the UnitInt8 kernels cannot run here (their Go emulation is tested by TestLinearInt8 on every variant)")
	}
}

// quantValues returns the integer values of a Q8 or Q4 weight, row-major
// (Q4: GGML's nibbles n as n−8).
func quantValues(w *Mat) []int8 {
	if w.DType == Q8 {
		return append([]int8(nil), w.Quants...)
	}
	q := make([]int8, w.Rows*w.Cols)
	for i := range q {
		blk, j := i/qBlock, i%qBlock
		b := w.Nibbles[blk*qBlock/2+j%(qBlock/2)]
		q[i] = int8(b>>(4*(j/(qBlock/2)))&15) - 8
	}
	return q
}

// TestLinearInt8 checks Q8 and Q4 products on UnitInt8 against
// linearI8Ref bit for bit on every variant (the VPDPBUSD kernels on
// AVX-512 with VNNI, the Go emulation elsewhere), with and without bias,
// alone and in LinearMulti, over the tile edges of quantShapes and a NaN
// in one row.
func TestLinearInt8(t *testing.T) {
	for _, dt := range []DType{Q8, Q4} {
		t.Run(dt.String(), func(t *testing.T) { testLinearInt8(t, dt) })
	}
}

func testLinearInt8(t *testing.T, dt DType) {
	withUnit(t, UnitInt8, func(t *testing.T) {
		forVariants(t, func(t *testing.T) {
			r := rand.New(rand.NewPCG(31, 7))
			for i, sh := range quantShapes() {
				if thin(i) {
					continue
				}
				w, err := Quantize(randQuantSource(r, sh.N, sh.K), dt)
				if err != nil {
					t.Fatal(err)
				}
				quants, scales := quantValues(w), append([]uint16(nil), w.Scales...)
				in := randSlice(r, sh.M*sh.K)
				for b := 0; b < len(in)/qBlock; b += 5 { // blocks of very different sizes, and zero ones
					x := in[b*qBlock : (b+1)*qBlock]
					for j := range x {
						x[j] *= []float32{1e-4, 0, 30, 1}[b%4]
					}
				}
				if i%3 == 0 {
					in[r.IntN(len(in))] = float32(math.NaN())
				}
				var bias []float32
				if i%2 == 0 {
					bias = randSlice(r, sh.N)
				}
				want := linearI8Ref(in, sh.M, sh.K, quants, scales, sh.N, bias)
				got := make([]float32, sh.M*sh.N)
				Linear(got, in, w, bias, sh.M)
				what := fmt.Sprintf("M=%d N=%d K=%d", sh.M, sh.N, sh.K)
				sameBits(t, what, got, want)
				clear(got)
				other := make([]float32, sh.M*sh.N)
				LinearMulti(in, sh.M, LinearOp{Out: got, W: w, Bias: bias}, LinearOp{Out: other, W: w})
				sameBits(t, what+" LinearMulti", got, want)
			}
		})
	})
}

// TestLinearInt8RowInvariant: a row's outputs are the same bits whatever
// rows share its call (8-row kernels for groups of 8, 3-row ones, then 2 or
// 1), so sampler and trainer agree.
func TestLinearInt8RowInvariant(t *testing.T) {
	needI8(t)
	withUnit(t, UnitInt8, func(t *testing.T) {
		for _, dt := range []DType{Q8, Q4} { // Q4: one row read in place, more widened to Q8 first
			r := rand.New(rand.NewPCG(5, 8))
			const N, K = 200, 896
			w, err := Quantize(randQuantSource(r, N, K), dt)
			if err != nil {
				t.Fatal(err)
			}
			for _, M := range []int{2, 4, 7, 8, 20, 130} {
				in := randSlice(r, M*K)
				all := make([]float32, M*N)
				Linear(all, in, w, nil, M)
				one := make([]float32, N)
				for m := range M {
					Linear(one, in[m*K:(m+1)*K], w, nil, 1)
					sameBits(t, fmt.Sprintf("%v M=%d row %d", dt, M, m), all[m*N:(m+1)*N], one)
				}
			}
		}
	})
}

// TestLinearInt8Error bounds how far UnitInt8 moves a product from the
// exact Q8 one: activations rounded to 8 bits per block of 32 move an
// output by about 1/254 of the block's largest activation per weight.
func TestLinearInt8Error(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	const M, N, K = 4, 300, 896
	w, err := Quantize(NewMatF32(N, K, randSlice(r, N*K)), Q8)
	if err != nil {
		t.Fatal(err)
	}
	in := randSlice(r, M*K)
	exact, got := make([]float32, M*N), make([]float32, M*N)
	Linear(exact, in, w, nil, M)
	withUnit(t, UnitInt8, func(t *testing.T) { Linear(got, in, w, nil, M) })
	var num, den float64
	for i := range exact {
		num += math.Pow(float64(got[i]-exact[i]), 2)
		den += math.Pow(float64(exact[i]), 2)
	}
	rel := math.Sqrt(num / den)
	t.Logf("relative RMS error of UnitInt8 against exact Q8: %.2e", rel)
	if rel > 1e-2 || rel == 0 {
		t.Fatalf("relative RMS error %.2e, want (0, 1e-2]", rel)
	}
}

// TestQuantizeActBlock: every value within half a step of its rounding,
// the largest at ±127, the correction −128·Σq; zero blocks zero, and a
// block with a NaN or an infinity a NaN scale.
func TestQuantizeActBlock(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	q := make([]int8, qBlock)
	for range 200 {
		x := randSlice(r, qBlock)
		s := float32(math.Pow(10, r.Float64()*8-4))
		for i := range x {
			x[i] *= s
		}
		d, corr := quantizeActBlock(q, x)
		var sum int32
		top := false
		for i, v := range x {
			if math.Abs(float64(v)-float64(q[i])*float64(d)) > 0.5001*float64(d) {
				t.Fatalf("x=%v rounded to %d·%v", v, q[i], d)
			}
			top = top || q[i] == 127 || q[i] == -127
			sum += int32(q[i])
		}
		if !top || corr != -128*sum {
			t.Fatalf("block reaching ±127: %v, correction %d for Σq %d", top, corr, sum)
		}
	}
	if d, corr := quantizeActBlock(q, make([]float32, qBlock)); d != 0 || corr != 0 {
		t.Fatalf("zero block: d %v, correction %d", d, corr)
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		x := randSlice(r, qBlock)
		x[7] = bad
		if d, _ := quantizeActBlock(q, x); !math.IsNaN(float64(d)) {
			t.Fatalf("block with %v: scale %v, want NaN", bad, d)
		}
	}
}

// TestUnitInt8Parse: the name reads back, and SetUnit takes it only where
// the kernels run.
func TestUnitInt8Parse(t *testing.T) {
	u, auto, err := ParseUnit("INT8")
	if err != nil || auto || u != UnitInt8 || u.String() != "int8" {
		t.Fatalf("ParseUnit(INT8) = %v, %v, %v", u, auto, err)
	}
	saved := unit
	defer func() { unit = saved }()
	err = SetUnit(UnitInt8)
	if hasI8() != (err == nil) {
		t.Fatalf("SetUnit(int8) on a CPU with VNNI kernels %v: %v", hasI8(), err)
	}
}

// TestQuantizeActsMatchesGo: rows rounded by quantizeActs (the assembly
// where the CPU has it, resuming after each block it leaves to Go) equal
// quantizeActBlock's block by block, with zero, tiny, denormal, NaN and
// infinite blocks among ordinary ones.
func TestQuantizeActsMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	const M, K = 5, 32 * 23
	src := randSlice(r, M*K)
	for b := 0; b < M*K/qBlock; b++ {
		x := src[b*qBlock : (b+1)*qBlock]
		switch b % 9 {
		case 1:
			clear(x)
		case 2:
			x[r.IntN(qBlock)] = float32(math.NaN())
		case 4:
			x[r.IntN(qBlock)] = float32(math.Inf(1))
		case 5:
			for i := range x {
				x[i] *= 1e-39 // denormals, below tinyAct
			}
		case 6:
			for i := range x {
				x[i] *= 1e-29
			}
		case 7:
			x[r.IntN(qBlock)] = 1e30
		}
	}
	x := getActs(M, K)
	quantizeActs(x, src, M, K, K)
	q := make([]int8, qBlock)
	for b := 0; b < M*K/qBlock; b++ {
		d, corr := quantizeActBlock(q, src[b*qBlock:(b+1)*qBlock])
		if math.Float32bits(d) != math.Float32bits(x.d[b]) || corr != x.corr[b] || string(int8Bytes(q)) != string(int8Bytes(x.q[b*qBlock:(b+1)*qBlock])) {
			t.Fatalf("block %d: d %v corr %d q %v, want %v %d %v", b, x.d[b], x.corr[b], x.q[b*qBlock:(b+1)*qBlock], d, corr, q)
		}
	}
}

func int8Bytes(q []int8) []byte {
	b := make([]byte, len(q))
	for i, v := range q {
		b[i] = byte(v)
	}
	return b
}

// TestPairRowsMatchGo: two rows become bf16 pairs in hardware as in Go
// (denormals, ties, NaNs and random bit patterns).
func TestPairRowsMatchGo(t *testing.T) {
	needDP(t)
	rng := rand.New(rand.NewPCG(3, 1))
	const n = 16*9 + 5
	row := func() []float32 {
		x := make([]float32, n)
		for i := range x {
			switch i % 5 {
			case 0:
				x[i] = math.Float32frombits(rng.Uint32() & 0x807fffff)
			case 1:
				x[i] = math.Float32frombits(rng.Uint32()&0xffff0000 | 0x8000)
			case 2:
				x[i] = float32(math.NaN())
			default:
				x[i] = math.Float32frombits(rng.Uint32())
			}
		}
		return x
	}
	a, b := row(), row()
	got, want := make([]float32, n), make([]float32, n)
	pairRows(got, a, b)
	for j := range want {
		want[j] = bf16Pair(a[j], b[j])
	}
	sameBits(t, "pairRows", got, want)
}

// TestLinearBackwardInputInt8: on UnitInt8 the input gradient of a Q8 or
// Q4 weight is, bit for bit, the bf16 unit's over the dequantized weight
// where the CPU has that unit (else the exact one), on every variant.
func TestLinearBackwardInputInt8(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(12, 3))
		for _, dt := range []DType{Q8, Q4} {
			for _, sh := range []mnk{{1, 64, 32}, {5, 129, 96}, {7, 63, 640}, {130, 200, 288}, {3, 1, 64}} {
				w, err := Quantize(randQuantSource(r, sh.N, sh.K), dt)
				if err != nil {
					t.Fatal(err)
				}
				deq := Dequantize(w)
				dout := randSlice(r, sh.M*sh.N)
				start := randSlice(r, sh.M*sh.K)
				got, want := append([]float32(nil), start...), append([]float32(nil), start...)
				withUnit(t, UnitInt8, func(t *testing.T) { LinearBackwardInput(got, dout, w, sh.M) })
				ref := UnitFP32
				if hasDP() {
					ref = UnitBF16
				}
				withUnit(t, ref, func(t *testing.T) { LinearBackwardInput(want, dout, deq, sh.M) })
				sameBits(t, fmt.Sprintf("%v M=%d N=%d K=%d", dt, sh.M, sh.N, sh.K), got, want)
			}
		}
	})
}

// TestQuantPanelOrders: a Q8 or Q4 weight packed while UnitInt8 is in use
// holds its panels in that unit's order (vnniPos, q4VnniPos), one packed
// under another unit the natural order; a product on the other unit then
// converts a second copy once, and every reader gives the same values and
// bits either way: the products of both units (Q4 on the int8 unit with
// one row, read in place, and with three, widened), LinearBackwardInput,
// Row, At and the blocks read back for export.
func TestQuantPanelOrders(t *testing.T) {
	for _, dt := range []DType{Q8, Q4} {
		t.Run(dt.String(), func(t *testing.T) { testQuantPanelOrders(t, dt) })
	}
}

func testQuantPanelOrders(t *testing.T, dt DType) {
	r := rand.New(rand.NewPCG(17, 4))
	const M, N, K = 3, 130, 192
	src := randQuantSource(r, N, K)
	in, dout := randSlice(r, M*K), randSlice(r, M*N)
	type result struct {
		exact, i8, i8row, dinp, row []float32
		at                          float32
		blocks                      []byte
	}
	run := func(t *testing.T, first Unit) (result, *Mat) {
		w, err := Quantize(src, dt)
		if err != nil {
			t.Fatal(err)
		}
		quants, scales := quantValues(w), append([]uint16(nil), w.Scales...)
		stored := append(append([]byte(nil), w.Nibbles...), int8Bytes(w.Quants)...)
		var res result
		res.exact, res.i8, res.i8row = make([]float32, M*N), make([]float32, M*N), make([]float32, N)
		res.dinp, res.row = make([]float32, M*K), make([]float32, K)
		products := map[Unit]func(t *testing.T){
			UnitFP32: func(t *testing.T) { Linear(res.exact, in, w, nil, M) },
			UnitInt8: func(t *testing.T) {
				Linear(res.i8, in, w, nil, M)
				Linear(res.i8row, in, w, nil, 1)
				LinearBackwardInput(res.dinp, dout, w, M)
			},
		}
		second := UnitFP32
		if first == UnitFP32 {
			second = UnitInt8
		}
		withUnit(t, first, products[first])
		if p := w.pk.Load(); p.vnni != (first == UnitInt8) || w.alt.Load() != nil {
			t.Fatalf("packed under %v: vnni %v, second copy %v", first, p.vnni, w.alt.Load() != nil)
		}
		withUnit(t, second, products[second])
		if w.alt.Load() == nil || w.alt.Load().vnni == w.pk.Load().vnni {
			t.Fatalf("after a product on %v: no second copy in the other order", second)
		}
		want := linearI8Ref(in, M, K, quants, scales, N, nil)
		sameBits(t, "int8 product", res.i8, want)
		sameBits(t, "int8 product of one row", res.i8row, want[:N])
		w.Row(res.row, N-1)
		res.at = w.At(N-2, K-1)
		var back []byte
		var backScales []uint16
		if dt == Q8 {
			var q []int8
			q, backScales = w.Q8Blocks()
			back = int8Bytes(q)
		} else {
			back, backScales = w.Q4Blocks()
		}
		if !slices.Equal(back, stored) || !slices.Equal(backScales, scales) {
			t.Fatalf("packed under %v: the blocks read back differ from the weight's own", first)
		}
		return res, w
	}
	a, wa := run(t, UnitInt8)
	b, _ := run(t, UnitFP32)
	sameBits(t, "exact product", a.exact, b.exact)
	sameBits(t, "input gradient", a.dinp, b.dinp)
	sameBits(t, "Row", a.row, b.row)
	sameBits(t, "At", []float32{a.at}, []float32{b.at})
	if got, want := wa.PackedBytes(), 2*len(wa.pk.Load().q8)+2*len(wa.pk.Load().q4); got < want {
		t.Errorf("PackedBytes %d with both orders, want at least %d", got, want)
	}
}
