package kernels

import (
	"cmp"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/artgo/art/internal/parallel"
)

// Blocking of the large-M path (kernels.md §5): a KC×NC block of B stays in
// L2 while 6-row micro-panels of A (6×KC, 6 KiB) sit in L1 and sweep across
// it. blockK is KC; NC is blockPanels 64-column panels.
const blockK = 256

// blockPanels is NC in panels, sized to the core's L2: a block fills at
// most half of it (1 MiB of fp32, 16 panels, on the 2 MiB L2 of the Intel
// hosts, where KC·NC·4 ≥ 2 MiB measured 10–40 % slower; 4 panels on Zen 3's
// 512 KiB, where the 16-panel block spilled to L3 and the training-shaped
// products ran 10–18 % slower than with 4–8). Read once at start-up.
var blockPanels = blockPanelsFor(l2Bytes())

// blockPanelsFor is the number of blockK-deep fp32 panels in half of an L2
// of l2 bytes, between 2 and 16; 16 when the size is unknown.
func blockPanelsFor(l2 int) int {
	if l2 <= 0 {
		return 16
	}
	return min(16, max(2, l2/2/(blockK*panelW*4)))
}

// Small-M streaming (kernels.md §3–4): with few rows there is little reuse of
// B, so the kernels read B in place (no packing pass) and the weights stream
// from memory once, overlapped with the compute by software prefetch. For
// pre-packed weights this in-place path measured as fast as the blocked one
// up to M = 512 (140–150 GFLOP/s on one core) and much faster below M = 64,
// most of all for bf16, which it widens in registers; streamMaxPanelsM rows
// take it. Raw row-major B (Gemm) is read in place only up to streamMaxM rows.
const (
	streamMaxPanelsM = 128
	streamMaxM       = 24
)

// streamL2 bounds the panels one row chunk sweeps before the next chunk
// reuses them, so that they are still in L2. It also bounds one assembly
// call (a K block of those panels, well under a millisecond) so the Go
// scheduler is never held off for long; maxCallElems bounds a call that
// streams whole panels (K·panels·64 weights, about 0.1–1 ms).
const (
	streamL2     = 512 << 10
	maxCallElems = 1 << 20
)

// parallelMinNs is the estimated single-thread time below which a call
// stays on the caller's goroutine: starting and joining a goroutine costs a
// few microseconds.
const parallelMinNs = 25_000

// useM8 enables the 8-row AVX-512 kernel (k512*m8) for groups of 8 rows on
// 16-bit panels: one pass over the weights for all 8 rows, in 8×32 half
// passes over L1-sized chunks. It is off: on the project's machine (2
// cores shared with other jobs, 2026-11-22) it measured 5 % slower than
// 6 + 2 rows for bf16 and 10 % faster for f16 with the weights in cache,
// and 5–15 % slower for both streaming them from DRAM, which is what
// decoding does. The tests keep it correct; flip it after a quiet A/B.
var useM8 = false

// useDPM8 enables k512dpm8 for decoding groups of 8 on UnitBF16 (see m8);
// benchmarks flip it for an A/B against 6 + 2 rows in one process.
var useDPM8 = true

// m8 reports whether the job's streamed panels run 8 rows at a time: 16-bit
// ones on the AVX-512 kernel when useM8 says so, a decoding group's 8 rows
// on UnitBF16's dp panels (k512dpm8: one pass over the weights, where 6 + 2
// rows measured 15-25 % slower), quantized ones wherever they stream in
// place (the AVX2 k256{q8,q4}m8; see kernel256qm8 in _asm). Each is called
// over whole panels like a decoding row.
func (j *job) m8() bool {
	switch j.kind {
	case bPanelsF32:
		return active == varAVX512 && j.dp && j.M == 8 && useDPM8
	case bPanelsBF16, bPanelsF16:
		return active == varAVX512 && useM8
	case bPanelsQ8, bPanelsQ4:
		return hasQuantKernels()
	}
	return false
}

// bKind says where B comes from and how a block of it becomes panels.
type bKind uint8

const (
	bPanelsF32  bKind = iota // pre-packed fp32 panels (Linear): read in place
	bPanelsBF16              // pre-packed bf16 panels (Linear): in place, or widened per block
	bPanelsF16               // pre-packed f16 panels (Linear): in place, or widened per block
	bRowsF32                 // row-major K×N fp32 with stride ldb: packed, or read in place
	bRowsU16                 // row-major K×N bf16/f16 (dt) with stride ldb: widened while packing
	bColsF32                 // N×K fp32 with stride ldb (transposed B): transposed while packing
	bPanelsT                 // B = w (K = w.Rows) read from w's 16-bit Linear panels tp: transposed and widened while packing
	bPanelsDPT               // B = w as bf16 pairs (UnitBF16) read from w's dp panels bf: transposed while packing
	bPanelsQ8                // pre-packed Q8 panels tp (Linear): in place where the variant has quantized kernels, else widened per block
	bPanelsQ4                // pre-packed Q4 panels tp (Linear): as bPanelsQ8
	bPanelsI8                // pre-packed Q8 or Q4 panels tp times A rounded to Q8_0 blocks qa (UnitInt8, int8.go)
	bPanelsQDPT              // B = w as bf16 pairs (UnitInt8's input gradient) from w's Q8 or Q4 panels tp: dequantized, transposed and rounded while packing
)

// job is one product C[M×N] (+)= A[M×K]·B[K×N] for the driver.
type job struct {
	M, N, K int

	a   []float32 // A is M×K with row stride lda
	lda int

	kind bKind
	bf   []float32 // raw B (bRows*, bCols*) or fp32 panels
	bh   []uint16  // raw bf16/f16 B or bf16 panels
	dt   DType     // element type of bh for bRowsU16
	tp   *panels   // the panels of bPanelsT, bPanelsQ8 and bPanelsQ4
	ldb  int
	// pstride is, for bPanelsF32, the elements from one panel to the
	// next; 0 means K·64 (contiguous panels, as Linear packs them).
	pstride int

	c   []float32
	ldc int

	first int       // tile flags for the first K block (flagStore or flagAcc, | flagBias)
	bias  []float32 // length ≥ N when first has flagBias
	beta  float32   // if scale: C *= beta before accumulating
	scale bool

	// dp: A and B are bf16 pairs and K counts pairs (UnitBF16, dp.go);
	// abuf is A's pooled buffer if the job made it, released by done; src
	// and srcLda are the fp32 A it was made from.
	dp     bool
	abuf   *[]float32
	src    *float32
	srcLda int

	// qa: A rounded to Q8_0 blocks (bPanelsI8), pooled if qaOwn (made by
	// this job, released by done), else an earlier job's.
	qa    *q8Acts
	qaOwn bool

	serial bool // run on the caller's goroutine alone (GemmSerial)

	// kb, if > 0, is the sum block in place of sumBlockK(K) (GemmKBlocks).
	kb int
}

// sumBlock is the length of the job's sum blocks.
func (j *job) sumBlock() int {
	if j.kb > 0 {
		return j.kb
	}
	return sumBlockK(j.K)
}

// done releases what the job borrowed, once it has run.
func (j *job) done() {
	if j.abuf != nil {
		pairPool.Put(j.abuf)
		j.abuf = nil
	}
	if j.qaOwn {
		actsPool.Put(j.qa)
		j.qa, j.qaOwn = nil, false
	}
}

func (j *job) panels() int { return (j.N + panelW - 1) / panelW }

// stream reports whether the small-M path applies: few rows, and B can be
// read in place.
func (j *job) stream() bool {
	switch j.kind {
	case bPanelsF32, bPanelsBF16, bPanelsF16, bPanelsQ8, bPanelsQ4, bPanelsI8:
		return j.M <= streamMaxPanelsM
	case bRowsF32:
		return j.M <= streamMaxM
	}
	return false
}

// estimateNs is a rough single-thread time: compute at ~100 GFLOP/s or
// reading B at ~10 GB/s, whichever is larger.
func (j *job) estimateNs() float64 {
	flops := 2 * float64(j.M) * float64(j.N) * float64(j.K)
	bytes := float64(j.N) * float64(j.K) * 4
	switch j.kind {
	case bPanelsBF16, bPanelsF16, bRowsU16, bPanelsT:
		bytes /= 2
	case bPanelsQ8:
		bytes /= 4
	case bPanelsQ4:
		bytes /= 8
	case bPanelsI8:
		bytes /= 4
		flops /= 4
	}
	return max(flops/100, bytes/10)
}

// run computes the job, split over up to GOMAXPROCS goroutines (see
// runJobs).
func (j *job) run() {
	if j.M == 0 || j.panels() == 0 {
		return
	}
	t := runtime.GOMAXPROCS(0)
	if t <= 1 || j.serial || j.estimateNs() < parallelMinNs {
		j.part(0, j.M, 0, j.panels())
		return
	}
	runJobs(t, []job{*j})
}

// plan is how one job of runJobs is cut into units.
type plan struct {
	units       int
	splitN      bool
	base, extra int
}

// decodeChunks is the number of chunks per goroutine of a decoding
// product (a variable for benchmarks). Each goroutine streams its own
// chunks in order (runOwned), so more of them cost no stream restarts and
// shorten the tail one goroutine can leave the other: over a cold single
// sequence's step (BenchmarkDecodeStepChunks, Zen 5, three runs) 32 a
// goroutine took 0.4-5 % less time than 8 (bf16 1.3-1.6 %, q8 0.6-3.7 %,
// q4 0.4-5 %), 16 in between; a group of 8 was even.
var decodeChunks = 32

// plan cuts j into chunks of 64-column panels (or of rows, when there are
// few panels), two to decodeChunks per goroutine for t goroutines.
func (j *job) plan(t int) plan {
	np := j.panels()
	mp := (j.M + 5) / 6 // row micro-panels
	splitN := np >= 2*t || np >= mp
	n := mp // units to split: panels or row micro-panels
	if splitN {
		n = np
	}
	// Chunks per goroutine: two for the blocked path (each chunk re-reads
	// A), four when streaming, decodeChunks when decoding (A is a few
	// rows; another goroutine steals a chunk at a time); a blocked chunk
	// holds at most one N block.
	per := 2
	switch {
	case j.stream() && j.M <= 8:
		per = decodeChunks
	case j.stream():
		per = 4
	}
	units := per * t
	if splitN && !j.stream() {
		units = max(units, (np+blockPanels-1)/blockPanels)
	}
	units = min((units+t-1)/t*t, n)
	// Balanced chunks, the larger ones first, so that the goroutines taking
	// them in turn finish together: 14 panels in 4 chunks run as 4, 4, 3, 3.
	return plan{units: units, splitN: splitN, base: n / units, extra: n % units}
}

// do computes units [u0, u1) of j's plan p.
func (j *job) do(p *plan, u0, u1 int) {
	start := func(u int) int { return u*p.base + min(u, p.extra) }
	if p.splitN {
		j.part(0, j.M, start(u0), start(u1))
	} else {
		j.part(start(u0)*6, min(start(u1)*6, j.M), 0, j.panels())
	}
}

// runJobs computes the jobs (none empty) on t goroutines. The work is cut
// into chunks (job.plan), which the goroutines take in turn from a shared
// counter, job after job: on a shared machine a descheduled goroutine then
// delays the call by one chunk, not by its whole static share, and several
// small products (the q, k and v projections of a decoding step) share one
// fork and join. Each chunk writes a disjoint part of one job's C. js is
// shared by the goroutines, so the caller passes a heap copy.
func runJobs(t int, js []job) {
	plans := make([]plan, len(js))
	total := 0
	decoding := true
	for i := range js {
		plans[i] = js[i].plan(t)
		total += plans[i].units
		decoding = decoding && js[i].stream() && js[i].M <= 8
	}
	t = min(t, total)
	// do computes units [u0, u1) of the jobs' units taken in order, job
	// by job.
	do := func(u0, u1 int) {
		i := 0
		for u0 >= plans[i].units {
			u0 -= plans[i].units
			u1 -= plans[i].units
			i++
		}
		for ; u1 > 0; i++ {
			js[i].do(&plans[i], u0, min(u1, plans[i].units))
			u0, u1 = 0, u1-plans[i].units
		}
	}
	if decoding && ownedRanges {
		runOwned(t, total, do)
		return
	}
	var next atomic.Int64
	parallel.Run(t, func() {
		for {
			u := int(next.Add(1) - 1)
			if u >= total {
				return
			}
			do(u, u+1)
		}
	})
}

// ownedRanges makes decoding products run on runOwned (a variable for
// benchmarks).
var ownedRanges = true

// runOwned computes units [0, total) with do on t goroutines, each owning
// a contiguous range of them: it takes its own from the front, in order,
// a share of what is left at a time (ownedBatch), so the weights it
// streams are one run of memory in few calls, and when its range is done
// it takes the last unit left of another range, one at a time, so a
// goroutine that is descheduled, or joins late, delays the call by little
// more than what it holds. With the units dealt from one counter instead,
// each goroutine's stream jumped over the other's units at every unit.
func runOwned(t, total int, do func(u0, u1 int)) {
	// Each range is one word: its next unit (front) in the high half, its
	// end (back, exclusive) in the low half, so that the owner taking from
	// the front and a thief taking from the back agree with one CAS.
	ranges := make([]atomic.Uint64, t)
	for r := range ranges {
		ranges[r].Store(uint64(r*total/t)<<32 | uint64((r+1)*total/t))
	}
	var joined atomic.Int64
	parallel.Run(t, func() {
		own := int(joined.Add(1)-1) % t
		for {
			u0, u1, ok := take(&ranges[own], false)
			for r := 1; !ok && r < t; r++ {
				u0, u1, ok = take(&ranges[(own+r)%t], true)
			}
			if !ok {
				return
			}
			do(u0, u1)
		}
	})
}

// ownedBatch sets the share of what is left of its range an owner takes
// at once: 1/ownedBatch, at least one unit (0: one unit at a time; a
// variable for benchmarks). Half: a goroutine's 32 units of a decoding
// product run as ~6 calls, 16, 8, 4, 2, 1, 1, while a thief still finds
// the last ones. A cold single sequence's step over Qwen2.5-0.5B's shapes
// (BenchmarkDecodeStepChunks, Zen 5, four runs) against one unit at a time:
// bf16 3.2-5.3 % less time, q8 -1.4 to +0.5 %, q4 0.1-1.1 % less; a
// group of 8, bf16 1.3-2.4 % less, q8 even.
var ownedBatch = 2

// take takes units [u0, u1) of range w: from its front (its owner),
// ownedBatch's share of what is left, or the last unit from its back
// (another goroutine, done with its own).
func take(w *atomic.Uint64, fromBack bool) (u0, u1 int, ok bool) {
	for {
		v := w.Load()
		front, back := v>>32, v&(1<<32-1)
		if front >= back {
			return 0, 0, false
		}
		lo, hi, next := back-1, back, front<<32|(back-1)
		if !fromBack {
			n := uint64(1)
			if ownedBatch > 0 {
				n = max(1, (back-front)/uint64(ownedBatch))
			}
			lo, hi, next = front, front+n, (front+n)<<32|back
		}
		if w.CompareAndSwap(v, next) {
			return int(lo), int(hi), true
		}
	}
}

// Pooled scratch buffers: per-goroutine B blocks and transposed A blocks.
var bufPool sync.Pool

func getBuf(n int) *[]float32 {
	if b, ok := bufPool.Get().(*[]float32); ok {
		if cap(*b) >= n {
			*b = (*b)[:n]
			return b
		}
		bufPool.Put(b)
	}
	s := make([]float32, n, max(n, blockK*blockPanels*panelW))
	return &s
}

func putBuf(b *[]float32) { bufPool.Put(b) }

// bblock is one run of panels of a B block as the kernels see it.
type bblock struct {
	bf                 []float32
	bh                 []uint16
	f16                bool // bh is f16 in natural order (else interleaved bf16)
	boff, ldb, pstride int
	p0, np, ncols      int // first panel (relative to the block), panels, valid columns
	// prefetch: pre-packed panels read in place, use the prefetching
	// kernels. They prefetch a fixed distance ahead in B, right for
	// contiguous panels and, when streaming, still useful for panels a
	// stride apart (a KV cache's key blocks: a decoding step's scores over
	// a cold cache at context 640 took 8.6 µs a kv head instead of 12.4),
	// where a panel's last lines prefetch bytes between panels.
	prefetch bool
	q        qArgs
}

// prefetchAhead is how far ahead (bytes) the first pass over a block of
// contiguous panels prefetches while it streams them from memory.
const prefetchAhead = 4096

// prefetchDecodeDP is prefetchAhead for a few decoding rows streaming
// UnitBF16's dp panels (k512dpm1q and the p kernels up to 6 rows; the
// 8-row kernel keeps its own distance). A single sequence's step over
// Qwen2.5-0.5B's shapes (BenchmarkDecodeStepPrefetch, alternated in one
// process, Zen 5, 2026-11-29): with the host's memory fast (15-17 ms a
// step) 128 bytes ahead took 6-10 % less time than 4 KiB, 64 as 128, 256
// 2-4 % more than 128; with it slow (23-29 ms) 4 KiB was 1-2 % faster. The
// hardware prefetchers stream the panels; reaching far ahead only competes
// with them. (k512dpm1q's prefetches are non-temporal since 2026-11-30;
// the distance was measured with PREFETCHT0.)
var prefetchDecodeDP = 128

// part computes rows [m0, m1) and panels [p0, p1) of the job.
func (j *job) part(m0, m1, p0, p1 int) {
	if j.scale {
		c1 := min(p1*panelW, j.N)
		for i := m0; i < m1; i++ {
			Scale(j.beta, j.c[i*j.ldc+p0*panelW:i*j.ldc+c1])
		}
	}
	if j.kind == bPanelsI8 {
		j.partI8(m0, m1, p0, p1)
		return
	}
	var buf *[]float32
	defer func() {
		if buf != nil {
			putBuf(buf)
		}
	}()
	kb := j.sumBlock()
	if !j.stream() {
		// Blocked GEMM (BLIS order): K blocks, then N blocks packed to L2,
		// then 6-row micro-panels of A across the block.
		for pc := 0; pc < j.K; pc += kb {
			kc := min(kb, j.K-pc)
			// Blocks of equal size (14 panels run as 5+5+4, not 6+6+2).
			nb := (p1 - p0 + blockPanels - 1) / blockPanels
			for b := range nb {
				jp, next := p0+b*(p1-p0)/nb, p0+(b+1)*(p1-p0)/nb
				j.block(&buf, m0, m1, pc, kc, jp, next-jp, false)
			}
		}
		return
	}
	// Streaming: B is read in place, panel group by panel group, so it
	// streams from memory once, each panel in the same K blocks as the
	// blocked path (one summation order at any M).
	if m1-m0 <= 6 || m1-m0 == 8 && j.m8() {
		// One row micro-panel (a decoding row, up to 6 rows, or a group of
		// 8 on an 8-row kernel): each call streams whole panels, all of K,
		// and the kernels add each K block's sums to C as the blocked path
		// does (tileArgs.kb; the AVX-512 8-row kernels are called per
		// block, panel by panel: m8call). So the weights stream through in
		// one sequential pass, with few calls.
		ncp := max(1, min(p1-p0, maxCallElems/(j.K*panelW)))
		for jp := p0; jp < p1; jp += ncp {
			j.block(&buf, m0, m1, 0, j.K, jp, min(ncp, p1-jp), true)
		}
		return
	}
	// With more rows, later row chunks re-read a group's K block from L2,
	// so the group is sized to fit; up to 8 rows (a decoding group) take
	// streamPairPanels panels at a time, so the memory streams stay few
	// and long: with a whole group per K block, decoding jumped from panel
	// to panel every K block and measured 7 % slower.
	bytesPerK := panelW * 4
	switch j.kind {
	case bPanelsBF16, bPanelsF16:
		bytesPerK /= 2
	case bPanelsQ8:
		bytesPerK /= 4
	case bPanelsQ4:
		bytesPerK /= 8
	}
	ncp := max(1, min(p1-p0, streamL2/(kb*bytesPerK)))
	if m1-m0 <= 8 {
		ncp = min(p1-p0, streamPairPanels)
	}
	for jp := p0; jp < p1; jp += ncp {
		for pc := 0; pc < j.K; pc += kb {
			j.block(&buf, m0, m1, pc, min(kb, j.K-pc), jp, min(ncp, p1-jp), true)
		}
	}
}

// streamPairPanels is how many panels a decoding group's row chunks
// stream at a time, K block by K block.
const streamPairPanels = 2

// block runs the micro-panels of rows [m0, m1) over k-rows [pc, pc+kc) and
// panels [jp, jp+np), summing in the job's K blocks (pc a multiple of
// sumBlockK; kc one block, or the rest of K when streaming). buf is the
// caller's scratch buffer.
func (j *job) block(buf **[]float32, m0, m1, pc, kc, jp, np int, stream bool) {
	flags := flagAcc
	if pc == 0 {
		flags = j.first
	}
	a, aoff, lda := j.a, m0*j.lda+pc, j.lda
	ncols := min(np*panelW, j.N-jp*panelW)
	var blocks [2]bblock
	nb := j.blockB(blocks[:0], buf, pc, kc, jp, np, ncols, stream)
	// Eight rows (a group of decoding sequences) take one pass over
	// streamed panels where the variant has an 8-row kernel (tileArgs.mr).
	m8 := j.m8()
	for _, b := range nb {
		m8 = m8 && b.prefetch
	}
	// One tileArgs for the whole block, its per-tile fields set in the
	// loop: built afresh for every micro-panel (~250 bytes) it was ~1 % of
	// a training step's CPU time.
	t := tileArgs{
		k: kc, kb: j.sumBlock(),
		a: a, lda: lda,
		c: j.c, ldc: j.ldc,
		flags: flags, dp: j.dp,
	}
	if flags&flagBias != 0 {
		t.bias = j.bias
	}
	for ir := m0; ir < m1; {
		t.mr = min(6, m1-ir)
		if m8 && m1-ir >= 8 {
			t.mr = 8
		}
		t.aoff = aoff + (ir-m0)*lda
		for _, b := range nb {
			t.bf, t.bh, t.f16, t.boff, t.ldb, t.pstride = b.bf, b.bh, b.f16, b.boff, b.ldb, b.pstride
			t.np, t.ncols, t.q = b.np, b.ncols, b.q
			t.prefetch = 0
			switch {
			case b.prefetch && stream && j.dp && j.M <= 8:
				t.prefetch = prefetchDecodeDP
			case b.prefetch:
				t.prefetch = prefetchAhead
			}
			col := (jp + b.p0) * panelW
			t.coff = ir*j.ldc + col
			t.biasoff = col
			tile(&t)
		}
		ir += t.mr
	}
}

// blockB makes the B block for k-rows [pc, pc+kc) and panels [jp, jp+np)
// (ncols valid columns) ready for the kernels, packing into *buf if needed.
func (j *job) blockB(out []bblock, buf **[]float32, pc, kc, jp, np, ncols int, stream bool) []bblock {
	K := j.K
	need := func(n int) []float32 {
		if *buf == nil || cap(**buf) < n {
			if *buf != nil {
				putBuf(*buf)
			}
			*buf = getBuf(n)
		}
		return (**buf)[:n]
	}
	switch {
	case j.kind == bPanelsF32:
		ps := cmp.Or(j.pstride, K*panelW)
		return append(out, bblock{bf: j.bf, boff: jp*ps + pc*panelW, ldb: panelW, pstride: ps, np: np, ncols: ncols, prefetch: ps == K*panelW || stream})
	case (j.kind == bPanelsBF16 || j.kind == bPanelsF16) && stream:
		return append(out, bblock{bh: j.bh, f16: j.kind == bPanelsF16, boff: jp*K*panelW + pc*panelW, ldb: panelW, pstride: K * panelW, np: np, ncols: ncols, prefetch: true})
	case j.kind == bPanelsBF16:
		d := need(np * kc * panelW)
		for q := range np {
			widenPanel(d, q*kc*panelW, j.bh, (jp+q)*K*panelW+pc*panelW, kc)
		}
	case j.kind == bPanelsF16:
		d := need(np * kc * panelW)
		for q := range np {
			packRowsU16(d, q*kc*panelW, j.bh, (jp+q)*K*panelW+pc*panelW, panelW, kc, panelW, F16)
		}
	case (j.kind == bPanelsQ8 || j.kind == bPanelsQ4) && stream && hasQuantKernels():
		G := K / qBlock
		return append(out, bblock{boff: jp*K*panelW + pc*panelW, ldb: panelW, pstride: K * panelW, np: np, ncols: ncols, prefetch: true,
			q: qArgs{q8: j.tp.q8, q4: j.tp.q4, s: j.tp.qs, soff: jp*G*panelW + pc/qBlock*panelW, sstride: G * panelW, k0: pc % qBlock}})
	case j.kind == bPanelsQ8 || j.kind == bPanelsQ4:
		d := need(np * kc * panelW)
		for q := range np {
			widenQuant(d, q*kc*panelW, j.tp, jp+q, pc, kc)
		}
	case j.kind == bPanelsT:
		d := need(np * kc * panelW)
		for q := range np {
			packPanelsT(d, q*kc*panelW, j.tp, pc, kc, (jp+q)*panelW, min(panelW, ncols-q*panelW))
		}
	case j.kind == bPanelsDPT:
		d := need(np * kc * panelW)
		for q := range np {
			packDPT(d, q*kc*panelW, j.bf, pairs(j.N), pc, kc, (jp+q)*panelW, min(panelW, ncols-q*panelW))
		}
	case j.kind == bPanelsQDPT:
		d := need((np + 2) * kc * panelW) // the block, then room for 2·kc dequantized rows
		for q := range np {
			packQDPT(d, q*kc*panelW, j.tp, d[np*kc*panelW:], pc, kc, (jp+q)*panelW, min(panelW, ncols-q*panelW))
		}
	case j.kind == bRowsF32 && stream:
		full := ncols / panelW
		if full > 0 {
			out = append(out, bblock{bf: j.bf, boff: pc*j.ldb + jp*panelW, ldb: j.ldb, pstride: panelW, np: full, ncols: full * panelW})
		}
		if rem := ncols - full*panelW; rem > 0 {
			// The partial last panel would read past the row ends: pack it.
			d := need(kc * panelW)
			packRowsF32(d, 0, j.bf, pc*j.ldb+(jp+full)*panelW, j.ldb, kc, rem)
			out = append(out, bblock{bf: d, ldb: panelW, pstride: kc * panelW, p0: full, np: 1, ncols: rem})
		}
		return out
	case j.kind == bRowsF32 && j.ldb == panelW && ncols == panelW:
		// Rows of one whole panel's width, back to back, are that panel
		// already (decoding attention's values): packing would copy them
		// as they are.
		return append(out, bblock{bf: j.bf, boff: pc * panelW, ldb: panelW, pstride: kc * panelW, np: 1, ncols: panelW})
	case j.kind == bRowsF32:
		d := need(np * kc * panelW)
		for q := range np {
			packRowsF32(d, q*kc*panelW, j.bf, pc*j.ldb+(jp+q)*panelW, j.ldb, kc, min(panelW, ncols-q*panelW))
		}
	case j.kind == bRowsU16:
		d := need(np * kc * panelW)
		for q := range np {
			packRowsU16(d, q*kc*panelW, j.bh, pc*j.ldb+(jp+q)*panelW, j.ldb, kc, min(panelW, ncols-q*panelW), j.dt)
		}
	case j.kind == bColsF32:
		d := need(np * kc * panelW)
		for q := range np {
			packColsF32(d, q*kc*panelW, j.bf, (jp+q)*panelW*j.ldb+pc, j.ldb, kc, min(panelW, ncols-q*panelW))
		}
	}
	return append(out, bblock{bf: (**buf)[:np*kc*panelW], ldb: panelW, pstride: kc * panelW, np: np, ncols: ncols})
}

// sumBlockK is the length of the K blocks every product of inner size K
// sums in (the last may be shorter): the blocks' sums are added to C in
// order, so the bits of a product depend on K and the values, never on the
// number of rows or the path that computed it.
func sumBlockK(K int) int { return balancedK(K, blockK) }

// balancedK splits K into the fewest blocks of at most kmax and returns
// their common length (a multiple of 8), so no block is much shorter than
// the others: K = 896 runs as 4×224 instead of 3×256 + 128.
func balancedK(K, kmax int) int {
	nb := (K + kmax - 1) / kmax
	return min(kmax, ((K+nb-1)/nb+7)&^7)
}
