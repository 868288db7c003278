package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
)

// TestMain runs the package's tests on exact fp32 (what their oracles
// compute) whatever unit start-up chose; the UnitBF16 tests set it
// themselves (withUnit).
func TestMain(m *testing.M) {
	unitOnce.Do(func() {})
	unit = UnitFP32
	os.Exit(m.Run())
}

// withUnit runs f with the weight products on u.
func withUnit(t *testing.T, u Unit, f func(t *testing.T)) {
	t.Helper()
	saved := unit
	defer func() { unit = saved }()
	unit = u
	f(t)
}

// needDP skips a test of the bf16 dot-product kernels themselves on a CPU
// without them (the Go emulation is tested everywhere).
func needDP(t *testing.T) {
	t.Helper()
	if !hasDP() {
		t.Skip("this CPU has no AVX512_BF16: the VDPBF16PS kernels cannot run here (their Go emulation is tested by the other UnitBF16 tests)")
	}
}

// randPairs returns n bf16 pair words with values of mixed magnitudes
// (so that the order of the roundings shows), some exact zeros, and a few
// bf16 denormals (which the unit reads as zero).
func randPairs(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	half := func() uint16 {
		switch r.IntN(20) {
		case 0:
			return 0
		case 1:
			return uint16(r.IntN(0x7f)+1) | uint16(r.IntN(2))<<15 // denormal
		}
		v := float32((r.Float64()*2 - 1) * math.Pow(2, float64(r.IntN(24)-12)))
		return F32ToBF16(v)
	}
	for i := range s {
		s[i] = math.Float32frombits(uint32(half()) | uint32(half())<<16)
	}
	return s
}

// The AVX-512 dp kernels give the bits of their Go emulation (dpWord:
// Intel's definition of VDPBF16PS) for every row count (8: a decoding
// group's one pass, emulated as 6 + 2 rows), column edge, sum block and
// flag.
func TestDP_KernelsMatchEmulation(t *testing.T) {
	needDP(t)
	saved, savedDebug := active, debugChecks
	defer func() { active, debugChecks = saved, savedDebug }()
	debugChecks = true
	rng := rand.New(rand.NewPCG(3, 4))
	for i, sh := range [][3]int{{1, 1, 64}, {7, 5, 64}, {64, 64, 192}, {113, 77, 130}, {9, 3, 20}} {
		k, kb, ncols := sh[0], sh[1], sh[2]
		np := (ncols + panelW - 1) / panelW
		for _, mr := range []int{1, 2, 3, 4, 5, 6, 8} {
			for _, flags := range []int{flagStore, flagAcc, flagAcc | flagBias} {
				for _, pre := range []int{0, prefetchAhead} {
					if pre > 0 && ncols%panelW != 0 || mr == 8 && pre == 0 {
						continue
					}
					a := randPairs(rng, mr*k)
					b := randPairs(rng, np*k*panelW)
					bias := randSlice(rng, np*panelW)
					c0 := randSlice(rng, mr*ncols)
					tl := tileArgs{mr: mr, k: k, kb: kb, a: a, lda: k, bf: b, ldb: panelW, pstride: k * panelW, np: np, ncols: ncols,
						ldc: ncols, flags: flags, bias: bias, prefetch: pre, dp: true}
					got, want := append([]float32(nil), c0...), append([]float32(nil), c0...)
					tl.c = want
					if mr == 8 {
						six, two := tl, tl
						six.mr, two.mr = 6, 2
						two.aoff, two.coff = 6*k, 6*ncols
						tileGo(&six)
						tileGo(&two)
					} else {
						tileGo(&tl)
					}
					tl.c = got
					active = varAVX512
					tile(&tl)
					for e := range got {
						if math.Float32bits(got[e]) != math.Float32bits(want[e]) {
							t.Fatalf("case %d mr=%d flags=%d prefetch=%d: C[%d] = %v (%#x), emulation %v (%#x)",
								i, mr, flags, pre, e, got[e], math.Float32bits(got[e]), want[e], math.Float32bits(want[e]))
						}
					}
				}
			}
		}
	}
}

// roundedMat is w with every weight rounded to bf16 (kept as F32).
func roundedMat(w *Mat) *Mat {
	v := make([]float32, w.Rows*w.Cols)
	for n := range w.Rows {
		w.Row(v[n*w.Cols:(n+1)*w.Cols], n)
	}
	return NewMatF32(w.Rows, w.Cols, roundBF16(v))
}

func roundBF16(v []float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = BF16ToF32(F32ToBF16(x))
	}
	return out
}

// On UnitBF16, Linear and LinearBackwardInput compute the product of the
// bf16-rounded factors (exact products, fp32 sums: close to the float64
// oracle of the rounded factors), on every path (one row, decoding
// groups, streaming, blocked) and weight dtype, with the exact-fp32 unit
// as far as bf16's rounding takes it.
func TestDP_LinearIsRoundedProduct(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		withUnit(t, UnitBF16, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			for i, sh := range [][3]int{{1, 64, 64}, {8, 896, 130}, {9, 77, 40}, {130, 300, 70}, {200, 513, 129}} {
				if thin(i) {
					continue
				}
				M, K, N := sh[0], sh[1], sh[2]
				for _, dt := range dtypesFor(i) {
					w := randMat(rng, N, K, dt)
					in := randSlice(rng, M*K)
					bias := randSlice(rng, N)
					rw, rin := roundedMat(w), roundBF16(in)
					want, scale := linear64(rin, rw, bias, M)
					got := make([]float32, M*N)
					Linear(got, in, w, bias, M)
					closeTo(t, fmt.Sprintf("Linear M=%d K=%d N=%d %v", M, K, N, dt), got, want, scale)

					dout := randSlice(rng, M*N)
					dinp := randSlice(rng, M*K)
					wantB, scaleB := backwardOracle(dinp, roundBF16(dout), rw, M)
					LinearBackwardInput(dinp, dout, w, M)
					closeTo(t, fmt.Sprintf("LinearBackwardInput M=%d K=%d N=%d %v", M, K, N, dt), dinp, wantB, scaleB)
				}
			}
		})
	})
}

// backwardOracle is dinp + dout·w in float64, with its scale.
func backwardOracle(dinp, dout []float32, w *Mat, M int) (out, scale []float64) {
	N, K := w.Rows, w.Cols
	out, scale = make([]float64, M*K), make([]float64, M*K)
	for m := range M {
		for k := range K {
			s := float64(dinp[m*K+k])
			a := math.Abs(s)
			for n := range N {
				p := float64(dout[m*N+n]) * float64(w.F32[n*K+k])
				s += p
				a += math.Abs(p)
			}
			out[m*K+k], scale[m*K+k] = s, a
		}
	}
	return out, scale
}

// Batch invariance holds on UnitBF16 too: a row has the same bits alone,
// in a decoding group, streamed or blocked, so the sampler's logprobs are
// the trainer's.
func TestDP_RowInvariant(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		withUnit(t, UnitBF16, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			for i, sh := range [][2]int{{64, 192}, {895, 130}, {600, 64}} {
				for _, dt := range dtypesFor(i) {
					linearRowsAlone(t, rng, randMat(rng, sh[1], sh[0], dt), randSlice(rng, sh[1]))
				}
			}
		})
	})
}

// BestUnit picks bf16 only where the CPU has it, and SetUnit refuses a
// unit the CPU lacks.
func TestDP_UnitChoice(t *testing.T) {
	saved, savedWhy := unit, unitWhy
	defer func() { unit, unitWhy = saved, savedWhy }()
	u, why := BestUnit()
	t.Logf("BestUnit: %v (%s)", u, why)
	if u == UnitBF16 && !hasDP() {
		t.Fatalf("BestUnit chose bf16 on a CPU without AVX512_BF16")
	}
	err := SetUnit(UnitBF16)
	if hasDP() {
		if err != nil {
			t.Fatalf("SetUnit(bf16) on a CPU with AVX512_BF16: %v", err)
		}
	} else if err == nil {
		t.Fatalf("SetUnit(bf16) accepted on a CPU without AVX512_BF16")
	}
	if _, _, err := ParseUnit("fp16"); err == nil {
		t.Fatalf("ParseUnit accepted fp16")
	}
}

// The hardware conversion of activations to pairs gives the bits of the
// Go one, denormals, ties, NaN and all.
func TestDP_PairsMatchGo(t *testing.T) {
	needDP(t)
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 32*37 + 7
	src := make([]float32, n)
	for i := range src {
		switch i % 7 {
		case 0:
			src[i] = math.Float32frombits(rng.Uint32() & 0x807fffff) // denormal or zero
		case 1:
			src[i] = math.Float32frombits(rng.Uint32()&0xffff0000 | 0x8000) // a tie
		case 2:
			src[i] = float32(math.NaN())
		default:
			src[i] = math.Float32frombits(rng.Uint32())
		}
	}
	saved := active
	defer func() { active = saved }()
	got := make([]float32, pairs(n))
	active = varAVX512
	toPairs(got, src, 1, n, n)
	want := make([]float32, pairs(n))
	active = varGo
	toPairs(want, src, 1, n, n)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("pair %d of %v, %v: %#x in hardware, %#x in Go", i, src[2*i], src[2*i+1], math.Float32bits(got[i]), math.Float32bits(want[i]))
		}
	}
}

// A BF16 weight packed on UnitBF16 is held once, as its dp panels: its
// bits read back exactly (bf16 denormals too, which the unit reads as
// zero), its products are those of the same weight packed on the exact
// unit first, and asking for the exact unit later builds its 16-bit
// panels from the dp panels, bit for bit.
func TestDP_BF16WeightIsOneCopy(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		const M, N, K = 9, 130, 77 // an odd K: the last pair's high half is padding
		bits := make([]uint16, N*K)
		for i := range bits {
			bits[i] = F32ToBF16(float32(rng.Float64()*2 - 1))
			if i%97 == 0 {
				bits[i] = uint16(rng.IntN(0x7f)+1) | uint16(rng.IntN(2))<<15 // denormal
			}
		}
		newW := func() *Mat { return matOfBits(N, K, bits) }
		in, dout := randSlice(rng, M*K), randSlice(rng, M*N)
		products := func(w *Mat) (out, dinp []float32) {
			out, dinp = make([]float32, M*N), make([]float32, M*K)
			Linear(out, in, w, nil, M)
			LinearBackwardInput(dinp, dout, w, M)
			return out, dinp
		}
		sameStored := func(what string, got []uint16) {
			t.Helper()
			for i := range bits {
				if got[i] != bits[i] {
					t.Fatalf("%s: weight %d reads %#04x, stored %#04x", what, i, got[i], bits[i])
				}
			}
		}
		readBack := func(w *Mat) []uint16 {
			row := make([]float32, K)
			got := make([]uint16, N*K)
			for n := range N {
				w.Row(row, n)
				for k, v := range row {
					got[n*K+k] = F32ToBF16(v)
					if a := F32ToBF16(w.At(n, k)); a != got[n*K+k] {
						t.Fatalf("At(%d, %d) = %#04x, Row %#04x", n, k, a, got[n*K+k])
					}
				}
			}
			return got
		}

		// The exact unit's panels first, then the unit: the dp panels are
		// built from the panels.
		viaPanels := newW()
		withUnit(t, UnitFP32, func(t *testing.T) { viaPanels.Prepack() })
		var wantOut, wantDinp []float32
		withUnit(t, UnitBF16, func(t *testing.T) { wantOut, wantDinp = products(viaPanels) })

		w := newW()
		withUnit(t, UnitBF16, func(t *testing.T) {
			w.Prepack()
			if got, want := w.PackedBytes(), 4*(N+panelW-1)/panelW*panelW*pairs(K); got != want {
				t.Fatalf("packed on UnitBF16: %d bytes, want %d (the dp panels alone)", got, want)
			}
			out, dinp := products(w)
			sameBits(t, "Linear", out, wantOut)
			sameBits(t, "LinearBackwardInput", dinp, wantDinp)
			sameStored("Row/At on the dp panels", readBack(w))
			sameStored("Bits16 on the dp panels", w.Bits16())
		})
		withUnit(t, UnitFP32, func(t *testing.T) {
			exact := newW()
			wantOut, _ := products(exact)
			out, _ := products(w)
			sameBits(t, "Linear on the exact unit after UnitBF16", out, wantOut)
			sameStored("Row/At on panels built from dp panels", readBack(w))
		})
	})
}

// Concurrent first uses of a BF16 weight on UnitBF16 (products, Row,
// Bits16, the exact panels) pack it once and agree (run with -race).
func TestDP_BF16WeightConcurrentFirstUse(t *testing.T) {
	withUnit(t, UnitBF16, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 14))
		const M, N, K = 3, 200, 96
		w := randMat(rng, N, K, BF16)
		bits := append([]uint16(nil), w.U16...)
		in := randSlice(rng, M*K)
		want := make([]float32, M*N)
		Linear(want, in, matOfBits(N, K, bits), nil, M)
		var wg sync.WaitGroup
		errs := make(chan string, 16)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch g % 4 {
				case 0, 1:
					out := make([]float32, M*N)
					Linear(out, in, w, nil, M)
					for i := range out {
						if math.Float32bits(out[i]) != math.Float32bits(want[i]) {
							errs <- fmt.Sprintf("Linear element %d: %g, want %g", i, out[i], want[i])
							return
						}
					}
				case 2:
					row := make([]float32, K)
					w.Row(row, g)
					for k, v := range row {
						if F32ToBF16(v) != bits[g*K+k] {
							errs <- fmt.Sprintf("Row %d column %d: %#04x, want %#04x", g, k, F32ToBF16(v), bits[g*K+k])
							return
						}
					}
				case 3:
					w.panels()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})
}

// matOfBits is a BF16 weight holding a copy of bits.
func matOfBits(N, K int, bits []uint16) *Mat {
	return &Mat{Rows: N, Cols: K, DType: BF16, U16: append([]uint16(nil), bits...)}
}
