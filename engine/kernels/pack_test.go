package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// widen16 returns the fp32 value of the 16-bit pattern h of dtype dt,
// converted without the panels or the f16 table: the tests' reference.
func widen16(h uint16, dt DType) float32 {
	if dt == BF16 {
		return BF16ToF32(h)
	}
	return F16ToF32(h)
}

// TestPackPanelsT16 checks the transposing pack of bf16 and f16 panels
// (LinearBackwardInput's B block) bit for bit against the weight's own
// 16-bit values widened one by one, on every variant: blocks of weight rows
// that start on and off a panel, a bf16 group of 16 and a tile of 8, end
// inside them, and cover 1..64 columns (whole and partial groups of 8, a
// last panel of 11) from columns on and off a panel; the rest of each packed
// row must be zero and nothing outside the block written. The first weight
// holds every 16-bit pattern once, in whole tiles (so on AVX2 every f16
// subnormal, infinity and NaN goes through VCVTPH2PS and must give the bits
// of the Go table, and every bf16 pattern through the shift); the second
// random patterns in a shape with partial panels both ways.
func TestPackPanelsT16(t *testing.T) {
	for _, dt := range []DType{BF16, F16} {
		t.Run(dt.String(), func(t *testing.T) {
			forVariants(t, func(t *testing.T) {
				r := rand.New(rand.NewPCG(41, 42))
				all := make([]uint16, 256*256)
				for i := range all {
					all[i] = uint16(i)
				}
				checkPackPanelsT(t, dt, 256, 256, all, [][2]int{{0, 256}}, []int{64})
				const N, K = 203, 139 // 4 panels of rows (the last 11), 3 of columns (the last 11)
				bits := make([]uint16, N*K)
				for i := range bits {
					bits[i] = uint16(r.Uint32())
				}
				blocks := [][2]int{{0, N}, {0, 8}, {8, 8}, {3, 5}, {5, 30}, {16, 16}, {24, 57}, {56, 16},
					{60, 13}, {64, 136}, {72, 24}, {88, 41}, {136, 64}, {192, 8}, {197, 6}, {128, 75}, {13, 190}}
				checkPackPanelsT(t, dt, N, K, bits, blocks, []int{64, 57, 37, 16, 11, 8, 5, 1})
			})
		})
	}
}

// checkPackPanelsT packs the blocks (first row, rows) of the N×K weight of
// dt with the given bits at each panel of columns and at columns 7.. (off a
// panel), ncols at most each of widths, and fails on the first packed value
// that is not its weight's, widened.
func checkPackPanelsT(t *testing.T, dt DType, N, K int, bits []uint16, blocks [][2]int, widths []int) {
	t.Helper()
	w := &Mat{Rows: N, Cols: K, DType: dt, U16: append([]uint16(nil), bits...)}
	p := w.panels()
	for _, pk := range blocks {
		pc, kc := pk[0], pk[1]
		for _, col0 := range []int{0, 7, 64, 128} {
			for _, width := range widths {
				ncols := min(width, K-col0)
				if ncols <= 0 {
					continue
				}
				what := fmt.Sprintf("%v %d×%d rows [%d,%d) cols %d+%d", dt, N, K, pc, pc+kc, col0, ncols)
				checkPackedBlock(t, what, kc, ncols, func(dst []float32, doff int) { packPanelsT(dst, doff, p, pc, kc, col0, ncols) },
					func(i, j int) float32 { return widen16(bits[(pc+i)*K+col0+j], dt) })
			}
		}
	}
}

// checkPackedBlock runs pack on a NaN-filled destination whose block (kc
// packed rows of 64) starts at an offset, and fails unless packed row i
// holds want(i, j) in its columns j < ncols and zeros after them, bit for
// bit, and nothing outside the block was written.
func checkPackedBlock(t *testing.T, what string, kc, ncols int, pack func(dst []float32, doff int), want func(i, j int) float32) {
	t.Helper()
	const doff = 5
	nan := math.Float32bits(float32(math.NaN()))
	dst := make([]float32, doff+kc*panelW+3)
	for i := range dst {
		dst[i] = math.Float32frombits(nan)
	}
	pack(dst, doff)
	for i := range kc {
		for j := range panelW {
			got, w := dst[doff+i*panelW+j], float32(0)
			if j < ncols {
				w = want(i, j)
			}
			if math.Float32bits(got) != math.Float32bits(w) {
				t.Fatalf("%s: packed (%d, %d) = %#x (%v), want %#x (%v)", what, i, j, math.Float32bits(got), got, math.Float32bits(w), w)
			}
		}
	}
	if math.Float32bits(dst[doff-1]) != nan || math.Float32bits(dst[doff+kc*panelW]) != nan {
		t.Fatalf("%s: wrote outside the block", what)
	}
}

// TestLinearBackwardInput16Exact: dX = dY·W with W in bf16 or f16 has the
// bits of the same product with W's fp32 copy (the same kernels on the
// same values: the transposing pack is exact), on every variant, and is
// within the GEMM tolerance of LinearBackwardInputRef.
func TestLinearBackwardInput16Exact(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(43, 44))
		for i, sh := range []mnk{{1, 5, 7}, {6, 64, 64}, {7, 65, 63}, {13, 129, 127}, {17, 301, 65},
			{40, 300, 520}, {64, 257, 130}, {100, 70, 1100}, {5, 3, 200}, {9, 203, 139}} {
			if thin(i) {
				continue
			}
			for _, dt := range []DType{BF16, F16} {
				w := randMat(r, sh.N, sh.K, dt)
				wide := make([]float32, len(w.U16))
				for j, h := range w.U16 {
					wide[j] = widen16(h, dt)
				}
				checkBackwardInputAsF32(t, r, fmt.Sprintf("%v M=%d N=%d K=%d", dt, sh.M, sh.N, sh.K), w, NewMatF32(sh.N, sh.K, wide), sh.M)
			}
		}
	})
}

// checkBackwardInputAsF32 fails unless LinearBackwardInput with w (16-bit
// or quantized) accumulates into a random dX the bits it does with ref, w's
// exact fp32 copy, and within the GEMM tolerance of LinearBackwardInputRef.
func checkBackwardInputAsF32(t *testing.T, r *rand.Rand, what string, w, ref *Mat, M int) {
	t.Helper()
	N, K := w.Rows, w.Cols
	dout := randSlice(r, M*N)
	got := randSlice(r, M*K)
	want := append([]float32(nil), got...)
	refOut := append([]float32(nil), got...)
	// The accumulated dinp's magnitudes, for the tolerance.
	scale := make([]float64, len(got))
	for m := range M {
		for k := range K {
			a := math.Abs(float64(got[m*K+k]))
			for n := range N {
				a += math.Abs(float64(dout[m*N+n]) * float64(ref.F32[n*K+k]))
			}
			scale[m*K+k] = a
		}
	}
	LinearBackwardInput(got, dout, w, M)
	LinearBackwardInput(want, dout, ref, M)
	sameBits(t, what, got, want)
	LinearBackwardInputRef(refOut, dout, ref, M)
	refWant := make([]float64, len(refOut))
	for i, v := range refOut {
		refWant[i] = float64(v)
	}
	closeTo(t, what+" vs LinearBackwardInputRef", got, refWant, scale)
}

// TestPackDPT checks the transposing pack of dp panels (LinearBackwardInput's
// B block on UnitBF16) against its definition, bit for bit, on every
// variant: runs of pair-rows that start on and off a panel and of 4, 8 and
// other lengths, whole and partial column groups (the AVX-512 tiles take 8
// pair-rows × 16 columns, the AVX2 ones 4 × 8, the rest is Go), with every
// row past ncols zero and nothing outside the block written.
func TestPackDPT(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const N, K = 200, 150 // weight rows (pairs along them), columns
	bits := make([]uint16, N*K)
	for i := range bits {
		bits[i] = F32ToBF16(float32(rng.Float64()*2 - 1))
	}
	w := matOfBits(N, K, bits)
	var d []float32
	withUnit(t, UnitBF16, func(t *testing.T) { d = w.dpPanels() })
	word := func(r, c int) uint16 { // the weight's bits, zero past its last row
		if r >= N {
			return 0
		}
		return bits[r*K+c]
	}
	forVariants(t, func(t *testing.T) {
		for _, c := range []struct{ pc, kc, col0, ncols int }{
			{0, 32, 0, 64}, {0, 8, 0, 64}, {8, 24, 64, 64}, {4, 12, 0, 64}, {0, 32, 128, 22},
			{16, 40, 0, 48}, {2, 7, 64, 16}, {30, 70, 0, 64}, {96, 4, 128, 8}, {0, 100, 64, 63},
		} {
			const pad = 64
			dst := make([]float32, pad+c.kc*panelW+pad)
			for i := range dst {
				dst[i] = math.Float32frombits(0xdeadbeef)
			}
			packDPT(dst, pad, d, pairs(K), c.pc, c.kc, c.col0, c.ncols)
			for i := range dst {
				got := math.Float32bits(dst[i])
				want := uint32(0xdeadbeef)
				if i >= pad && i < pad+c.kc*panelW {
					r, j := (i-pad)/panelW, (i-pad)%panelW
					want = 0
					if j < c.ncols {
						n := 2 * (c.pc + r)
						want = uint32(word(n, c.col0+j)) | uint32(word(n+1, c.col0+j))<<16
					}
				}
				if got != want {
					t.Fatalf("pc=%d kc=%d col0=%d ncols=%d: word %d is %#08x, want %#08x", c.pc, c.kc, c.col0, c.ncols, i-pad, got, want)
				}
			}
		}
	})
}
