// Command train is the side-by-side benchmark of one LoRA training step on
// the engine against the same model and step in PyTorch on the CPU.
//
// A step is the forward and backward pass of ART's CISPO loss over one
// sequence (default 512 tokens, every token after the first scored) with a
// LoRA adapter (default r = 8, alpha 16) on all seven projections of every
// layer: TrainForward, LMHeadBackward, TrainBackward here; autograd in the
// peer. The optimizer update is not timed (it touches only the adapter).
//
// The model is a random Qwen2.5-0.5B-shaped one with bf16 weights. With
// -quantize q8 (q4) the engine stores its base in 8 (4) bits, quantized at
// load from those bf16 weights as `art serve --quantize` does; a list
// (-quantize none,q8,q4) runs one engine per storage, in the same rounds as
// the other sides, and reports each quantized one against the bf16 one
// (issue 18: no slower). The peers always load the bf16 weights. This
// program saves them, the adapter (B random, so the update is not a no-op)
// and the tokens into a scratch folder, and each peer (torch_peer.py, in
// fp32 on OpenBLAS or in bf16 under autocast) loads exactly those. The sides
// run in separate processes that take turns: one step each per round (the
// order rotates), so all see the same machine load. The first steps of each
// side (-warmup) are not timed. The losses are compared as a check that the
// sides compute the same thing, and the engine's ratio is taken against the
// faster peer: PyTorch at its best on this CPU.
//
// The machine is shared, so besides the medians over all rounds the report
// gives the other processes' load during each side's steps (from
// /proc/stat, minus the stepping process's own CPU time) and the medians
// over the clean rounds only, those in which other processes kept less
// than 0.1 core busy during both steps.
//
//	train [-rounds 5] [-warmup 1] [-T 512] [-rank 8] [-shape qwen2.5-0.5b]
//	      [-quantize none|q8|q4|LIST] [-peer 'CMD ARGS...' ...] [-dir DIR] [-cpuprofile FILE] [-memprofile FILE] [-recompute]
//
// run.sh builds it and passes the peer commands (with OPENBLAS_CORETYPE set
// on them alone). The report is a markdown table on stdout;
// progress and warnings go to stderr.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/artgo/art/bench/internal/fmapeak"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/procstat"
)

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 5, "timed steps per side, interleaved")
	flag.IntVar(&o.warmup, "warmup", 1, "untimed steps per side first")
	flag.IntVar(&o.T, "T", 512, "tokens in the sequence")
	flag.IntVar(&o.rank, "rank", 8, "LoRA rank (alpha = 2·rank)")
	flag.StringVar(&o.shape, "shape", "qwen2.5-0.5b", "model.Preset shape (qwen2 architecture)")
	quantize := flag.String("quantize", "none", "storage of the engine's base weights: none (bf16), q8 or q4, quantized from the bf16 at load; a comma list (none,q8,q4) runs one engine per storage, interleaved")
	units := flag.String("unit", "auto", "arithmetic of the engine's weight products: auto (what the kernels chose at start-up: "+kernels.UnitEnv+", else measured), fp32, bf16, or a comma list (fp32,bf16) running one engine per unit, interleaved")
	flag.Var(&o.peers, "peer", "PyTorch peer command, repeatable (omit it to time the engine alone)")
	flag.StringVar(&o.dir, "dir", "", "scratch folder for the shared model (default: a temp dir, removed)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the timed steps (warm-up excluded) to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile (alloc_space) of the run to this file")
	flag.BoolVar(&o.recompute, "recompute", false, "recompute activations in the backward pass (less memory, more compute)")
	flag.Parse()
	var err error
	if o.quant, err = parseQuantizations(*quantize); err != nil {
		fmt.Fprintln(os.Stderr, "train: -quantize:", err)
		os.Exit(2)
	}
	if o.units, err = parseUnits(*units); err != nil {
		fmt.Fprintln(os.Stderr, "train: -unit:", err)
		os.Exit(2)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "train:", err)
			os.Exit(1)
		}
		profile = f
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
	if *memprofile != "" {
		runtime.GC() // the profile shows allocations up to the last completed GC
		f, err := os.Create(*memprofile)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "train: memprofile:", err)
			os.Exit(1)
		}
	}
}

// options are the command line's settings.
type options struct {
	rounds, warmup, T, rank int
	shape                   string
	quant                   []model.Quantization // one engine each
	units                   []kernels.Unit       // one engine each (× quant)
	peers                   peerFlags
	dir                     string
	recompute               bool
}

// parseQuantizations reads -quantize: storages separated by commas, each
// at most once.
func parseQuantizations(s string) ([]model.Quantization, error) {
	var out []model.Quantization
	for _, f := range strings.Split(s, ",") {
		q, err := model.ParseQuantization(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, q) {
			return nil, fmt.Errorf("%q is listed twice", storageName(q))
		}
		out = append(out, q)
	}
	return out, nil
}

// parseUnits reads -unit: auto, or units separated by commas, each at most
// once and each one this CPU has.
func parseUnits(s string) ([]kernels.Unit, error) {
	var out []kernels.Unit
	for _, f := range strings.Split(s, ",") {
		u, auto, err := kernels.ParseUnit(f)
		if err != nil {
			return nil, err
		}
		if auto {
			u, _ = kernels.ActiveUnit()
		}
		if slices.Contains(out, u) {
			return nil, fmt.Errorf("%v is listed twice", u)
		}
		if err := kernels.SetUnit(u); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// storageName names a base storage: bf16 (the checkpoint's), q8 or q4.
func storageName(q model.Quantization) string {
	if q == model.NoQuantization {
		return "bf16"
	}
	return string(q)
}

// profile, when set, receives a CPU profile of the engine's steps (the
// process is idle while the peer runs).
var profile *os.File

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// peerFlags collects the repeated -peer flags.
type peerFlags []string

func (p *peerFlags) String() string     { return strings.Join(*p, "; ") }
func (p *peerFlags) Set(v string) error { *p = append(*p, v); return nil }

// engineSide is one engine of the run: the same random bf16 model, its
// base stored as q.
type engineSide struct {
	q    model.Quantization
	unit kernels.Unit // its weight products' arithmetic
	m    *model.Model
	name string // in the progress lines
}

// products is the arithmetic e's forward weight products actually run on:
// its unit, except that quantized weights keep the exact fp32 path but on
// the int8 unit (engine/kernels), which runs unquantized ones on bf16 (or
// fp32 without it).
func (e *engineSide) products() kernels.Unit {
	switch {
	case e.q != model.NoQuantization && e.unit == kernels.UnitInt8:
		return kernels.UnitInt8
	case e.q != model.NoQuantization:
		return kernels.UnitFP32
	case e.unit == kernels.UnitInt8 && slices.Contains(kernels.Units(), kernels.UnitBF16):
		return kernels.UnitBF16
	case e.unit == kernels.UnitInt8:
		return kernels.UnitFP32
	}
	return e.unit
}

// newEngine builds the random bf16 model (the same weights every time: a
// fixed seed) and stores its base as q.
func newEngine(cfg model.Config, q model.Quantization, single bool) (*engineSide, error) {
	m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: 1, DType: kernels.BF16}))
	if err != nil {
		return nil, err
	}
	if err := m.W.Quantize(q); err != nil {
		return nil, err
	}
	e := &engineSide{q: q, m: m, name: "go"}
	if !single {
		e.name = "go-" + storageName(q)
	}
	return e, nil
}

func run(o options) error {
	rounds, warmup, T, rank, shape := o.rounds, o.warmup, o.T, o.rank, o.shape
	loadBefore := idleCheck()
	// The peak of each unit the engines use, before and after the rounds
	// (the best of both): what the step's products are set against.
	var pk peaks
	pk.measure()

	// 1. The models, the adapter and the sequence.
	cfg, err := model.Preset("qwen2", shape, 151665) // Qwen2.5's tokenizer size
	if err != nil {
		return err
	}
	var engines []*engineSide
	for _, q := range o.quant {
		t0 := time.Now()
		e, err := newEngine(cfg, q, len(o.quant) == 1)
		if err != nil {
			return err
		}
		logf("engine: random %s (%.1f M params, bf16), base stored as %s, in %.1f s", shape, float64(cfg.NumParams())/1e6, storageName(q), time.Since(t0).Seconds())
		// One engine per unit, on the same model.
		for _, u := range o.units {
			eu := *e
			eu.unit = u
			if len(o.units) > 1 {
				eu.name += "-" + u.String()
			}
			engines = append(engines, &eu)
		}
	}
	ad, err := lora.New(cfg, lora.Config{Rank: rank, Alpha: float64(2 * rank)}, 1)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(2, 3))
	for i, v := range ad.Params() {
		if v == 0 { // B: random instead of PEFT's zero
			ad.Params()[i] = float32(0.01 * rng.NormFloat64())
		}
	}
	tokens := make([]int, T)
	for i := range tokens {
		tokens[i] = rng.IntN(151665)
	}

	// 2. The peers load the same files (the bf16 weights).
	var peers []*peerProc
	if len(o.peers) > 0 {
		dir := o.dir
		if dir == "" {
			d, err := os.MkdirTemp("", "bench-train-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			dir = d
		}
		t0 := time.Now()
		saved := engines[0].m
		if engines[0].q != model.NoQuantization {
			// No bf16 engine: draw the bf16 model again to save it.
			e, err := newEngine(cfg, model.NoQuantization, true)
			if err != nil {
				return err
			}
			saved = e.m
		}
		if err := saved.Save(filepath.Join(dir, "model")); err != nil {
			return err
		}
		if err := ad.Save(filepath.Join(dir, "adapter"), shape); err != nil {
			return err
		}
		b, _ := json.Marshal(map[string]any{"tokens": tokens})
		if err := os.WriteFile(filepath.Join(dir, "tokens.json"), b, 0o644); err != nil {
			return err
		}
		logf("saved model, adapter and tokens to %s in %.1f s; starting the peers", dir, time.Since(t0).Seconds())
		for _, c := range o.peers {
			p, err := startPeer(c, dir)
			if err != nil {
				return err
			}
			defer p.close()
			logf("peer: %s", p.info)
			peers = append(peers, p)
		}
	}

	// 3. Interleaved steps. The engines share one set of activation
	// buffers (they depend on the shape alone).
	for _, e := range engines {
		if err := kernels.SetUnit(e.unit); err != nil {
			return err
		}
		e.m.W.Prepack()
	}
	acts := engines[0].m.NewActs(T)
	if o.recompute {
		acts = engines[0].m.NewRecomputeActs(T)
	}
	// Sides 0..len(engines)-1 are the engines, side len(engines)+j is
	// peers[j]; steps[s][i] is side s's timed step of round i.
	nEng := len(engines)
	nSides := nEng + len(peers)
	steps := make([][]sample, nSides)
	losses := make([]float64, nSides)
	for i := 0; i < warmup+rounds; i++ {
		timed := i >= warmup
		if i == warmup && profile != nil {
			// Only the timed steps: the warm-up's first touches of the
			// activations (~600,000 page faults) would be charged to
			// whichever operation writes each buffer first.
			if err := pprof.StartCPUProfile(profile); err != nil {
				return err
			}
		}
		for k := range nSides {
			side := (i + k) % nSides // the order rotates every round
			busy0 := machineBusySeconds()
			var st sample
			var loss float64
			var name string
			if side < nEng {
				e := engines[side]
				name = e.name
				if err := kernels.SetUnit(e.unit); err != nil { // between steps: no product runs
					return err
				}
				c0 := cpuSeconds()
				if st.wall, loss, err = goStep(e.m, ad, acts, tokens); err != nil {
					return err
				}
				st.cpu = cpuSeconds() - c0
			} else {
				p := peers[side-nEng]
				name = "torch-" + p.precision
				if st.wall, loss, st.cpu, err = p.step(); err != nil {
					return err
				}
			}
			losses[side] = loss
			// Whatever else the machine did meanwhile (the other sides are
			// blocked on pipes) is other processes' load.
			st.other = max(0, machineBusySeconds()-busy0-st.cpu) / st.wall
			logf("step %d %-11s %6.2f s (%5.1f tok/s, %5.2f CPU s, other load %.2f cores) loss %.6f",
				i, name, st.wall, float64(T)/st.wall, st.cpu, st.other, loss)
			if timed {
				steps[side] = append(steps[side], st)
			}
		}
	}
	if profile != nil {
		pprof.StopCPUProfile() // before the peaks are measured
	}
	goRSS := procstat.Bytes("VmHWM") // the steps', not the replay's buffers
	// The step's weight products alone, each engine's in turn, round after
	// round (the host's bandwidth and clocks drift by the minute).
	alone := make([][]float64, nEng)
	replays := make([]*productsReplay, nEng)
	for range max(3, rounds) {
		for s, e := range engines {
			if e.products() == kernels.UnitInt8 {
				continue // no one peak to set it against (below)
			}
			if err := kernels.SetUnit(e.unit); err != nil {
				return err
			}
			if replays[s] == nil {
				replays[s] = newProductsReplay(e.m, T)
			}
			alone[s] = append(alone[s], replays[s].seconds())
		}
	}
	pk.measure()
	peerRSS := make([]int64, len(peers))
	for j, p := range peers {
		if peerRSS[j], err = p.quit(); err != nil {
			return err
		}
	}
	loadAfter := loadavg()

	// 4. Report.
	fmt.Printf("LoRA training step (forward + backward of the CISPO loss, one %d-token sequence, every token after the first scored; LoRA r=%d, alpha=%d on q,k,v,o,gate,up,down of all %d layers), %s shape (%.1f M params, random weights), %s, %s, %d CPUs.\n",
		T, rank, 2*rank, cfg.NumLayers, shape, float64(cfg.NumParams())/1e6, time.Now().UTC().Format("2006-01-02T15:04Z"), cpuModel(), runtime.NumCPU())
	fmt.Printf("%d interleaved rounds after %d warm-up step(s) per side; medians [min–max]. Load average before %s, after %s%s.\n\n",
		rounds, warmup, loadBefore, loadAfter, noisyNote(loadBefore, loadAfter))
	fmt.Println("| engine | tokens/s | step (s) | vs PyTorch at its best | CPU s per step | peak RSS |")
	fmt.Println("|---|---|---|---|---|---|")
	best := -1 // the faster peer
	for j := range peers {
		if best < 0 || median(walls(steps[nEng+j])) < median(walls(steps[nEng+best])) {
			best = j
		}
	}
	rss := mib(goRSS)
	if nEng > 1 {
		rss = "—"
	}
	for s, e := range engines {
		goMed := median(walls(steps[s]))
		ratio := "—"
		if best >= 0 {
			ratio = fmt.Sprintf("**%.2f×**", median(walls(steps[nEng+best]))/goMed)
		}
		fmt.Printf("| ART Go engine: %s, %s, GOMAXPROCS=%d, kernels %s | %.1f | %s | %s | %.1f | %s |\n",
			storageLabel(e.q), e.unitLabel(), runtime.GOMAXPROCS(0), kernelVariant(), float64(T)/goMed, spread(walls(steps[s])), ratio, median(cpus(steps[s])), rss)
	}
	for j, p := range peers {
		ps := steps[nEng+j]
		pMed := median(walls(ps))
		mark := fmt.Sprintf("%.2f×", median(walls(steps[nEng+best]))/pMed)
		if j == best {
			mark = "1.00× (the faster peer)"
		}
		fmt.Printf("| PyTorch %s CPU: %s, autograd, %s | %.1f | %s | %s | %.1f | %s |\n",
			p.version, p.label(), p.setup, float64(T)/pMed, spread(walls(ps)), mark, median(cpus(ps)), mib(peerRSS[j]))
	}
	if nEng > 1 {
		fmt.Printf("\nThe engines share one process: its peak RSS (VmHWM, all %d models and one set of activations) was %s.\n", nEng, mib(goRSS))
	}
	// Rounds in which other processes used little CPU during every step.
	var clean []int
	for i := range steps[0] {
		ok := true
		for s := range nSides {
			ok = ok && steps[s][i].other < cleanLoad
		}
		if ok {
			clean = append(clean, i)
		}
	}
	if nEng > 1 {
		reportVsBF16(engines, steps, clean)
	}
	if best >= 0 {
		bestSteps := steps[nEng+best]
		fmt.Printf("\nOther processes' load during the steps (cores, median): engine steps %.2f, PyTorch steps %.2f. ",
			median(others(steps[0])), median(others(bestSteps)))
		if len(clean) == 0 {
			fmt.Printf("No round was clean (other load < %.1f core during every step): **the machine was never idle, so the ratio above mixes engine speed with how each side copes with contention**.\n", cleanLoad)
		} else {
			fmt.Printf("Clean rounds (other load < %.1f core during every step): %d of %d.", cleanLoad, len(clean), len(steps[0]))
			for s, e := range engines {
				goClean, ptClean := pickRounds(walls(steps[s]), clean), pickRounds(walls(bestSteps), clean)
				fmt.Printf(" Their medians, %s engine: %.1f tok/s, faster peer %.1f tok/s, **ratio %.2f×**.",
					storageName(e.q), float64(T)/median(goClean), float64(T)/median(ptClean), median(ptClean)/median(goClean))
			}
			fmt.Println()
		}
		fmt.Println()
		for s, e := range engines {
			for j, p := range peers {
				rel := math.Abs(losses[s]-losses[nEng+j]) / math.Max(1, math.Abs(losses[nEng+j]))
				fmt.Printf("Same model and step: loss engine (%s, %v unit) %.6f, PyTorch %s %.6f (relative difference %.1e).", storageName(e.q), e.unit, losses[s], p.precision, losses[nEng+j], rel)
				if e.q != model.NoQuantization {
					fmt.Print(" The engine's base is quantized and the peer's is not: the difference includes the quantization error, so it is not checked.")
				} else if rel > lossTolerance(p, e) {
					fmt.Print(" **The losses differ: the two sides do not compute the same step.**")
				}
				fmt.Println()
			}
		}
	}
	flops := weightProductFlops(cfg, T)
	fmt.Println()
	for s, e := range engines {
		rate := flops / median(walls(steps[s])) / 1e9
		if e.products() == kernels.UnitInt8 {
			fmt.Printf("Weight products (%s, %v): %.3g TFLOP a step, %.1f GFLOP/s over the engine's whole median step; int8 forward and bf16 (or fp32) backward have different peaks, so no share of one is given.\n",
				storageName(e.q), e.products(), flops/1e12, rate)
			continue
		}
		peak := pk.of(e.products())
		own := replayFlops(cfg, T) / median(alone[s]) / 1e9
		fmt.Printf("Weight products (%s, %v): %.3g TFLOP a step (forward and input gradient of every projection and the LM head, 4·T·weights; attention and the LoRA deltas not counted). The same calls alone (replayed after the steps on the engine's packed weights, median of %d): %.3f s, %.1f GFLOP/s, **%.0f %% of the peak** of its unit, %.1f GFLOP/s measured in this run (%s, %d threads, a register-only loop). Over the engine's whole median step, where everything else it does counts against them, %.1f GFLOP/s, %.0f %% of the peak.\n",
			storageName(e.q), e.products(), flops/1e12, len(alone[s]), median(alone[s]), own, 100*own/peak.GFLOPS, peak.GFLOPS, peak.Unit, peak.Threads, rate, 100*rate/peak.GFLOPS)
	}
	if b, ok := pk.bf16, pk.hasBF16; ok {
		_, why := kernels.BestUnit()
		fmt.Printf("Units of this CPU, one register-only loop each on %d threads: fp32 FMA %.1f GFLOP/s, bf16 dot products %.1f GFLOP/s (%.2f×). What the kernels choose by themselves (auto): %s.\n",
			b.Threads, pk.fp32.GFLOPS, b.GFLOPS, b.GFLOPS/pk.fp32.GFLOPS, why)
	}
	if len(peers) > 0 {
		fmt.Println("\nTarget (issue 23): engine ≥ 1.5× PyTorch at its best (ratio of median step times against the faster peer).")
	}
	fmt.Println("CPU s per step is user+sys time of the whole process (PyTorch's OpenMP threads spin while waiting, which counts). Peak RSS is VmHWM (engine) and ru_maxrss (PyTorch), loading included.")
	return nil
}

// storageLabel says how an engine stores its base, for the table.
func storageLabel(q model.Quantization) string {
	if q == model.NoQuantization {
		return "bf16 weights"
	}
	return fmt.Sprintf("%s base (quantized at load from the bf16 weights)", q)
}

// reportVsBF16 prints each quantized engine's step against the bf16
// engine's of the same rounds (issue 18's target: no slower), when the run
// has one.
func reportVsBF16(engines []*engineSide, steps [][]sample, clean []int) {
	fmt.Println()
	for s, e := range engines {
		// The reference: the bf16 storage on the fp32 unit, or on e's
		// unit for a quantized engine.
		ref := slices.IndexFunc(engines, func(r *engineSide) bool {
			return r.q == model.NoQuantization && (e.q == model.NoQuantization && r.unit == kernels.UnitFP32 || e.q != model.NoQuantization && r.unit == e.unit)
		})
		if ref < 0 || s == ref {
			continue
		}
		// Per-round ratios: the two steps of a round ran back to back, so
		// they saw about the same load.
		var wr, cr []float64
		for i := range steps[s] {
			wr = append(wr, steps[s][i].wall/steps[ref][i].wall)
			cr = append(cr, steps[s][i].cpu/steps[ref][i].cpu)
		}
		fmt.Printf("%s vs %s, same rounds (median of the per-round ratios): step time %.3f×, CPU s per step %.3f×",
			engines[s].name, engines[ref].name, median(wr), median(cr))
		if len(clean) > 0 {
			fmt.Printf("; clean rounds only: step time %.3f×", median(pickRounds(wr, clean)))
		}
		if e.q != model.NoQuantization {
			fmt.Print(". Target (issue 18): ≤ 1")
		}
		fmt.Println(".")
	}
}

// peaks are the units' peaks measured in the run.
type peaks struct {
	fp32, bf16 fmapeak.Result
	hasBF16    bool
}

// measure measures every unit this CPU has, keeping the best of this
// and earlier calls.
func (p *peaks) measure() {
	n := runtime.GOMAXPROCS(0)
	if r := fmapeak.Measure(n, 300*time.Millisecond, 3); r.GFLOPS > p.fp32.GFLOPS {
		p.fp32 = r
	}
	if r, ok := fmapeak.MeasureBF16(n, 300*time.Millisecond, 3); ok && r.GFLOPS > p.bf16.GFLOPS {
		p.bf16, p.hasBF16 = r, true
	}
}

// of is the peak of unit u.
func (p *peaks) of(u kernels.Unit) fmapeak.Result {
	if u == kernels.UnitBF16 {
		return p.bf16
	}
	return p.fp32
}

// unitLabel says how an engine computes its weight products, for the table.
func (e *engineSide) unitLabel() string {
	bf16 := slices.Contains(kernels.Units(), kernels.UnitBF16)
	switch {
	case e.unit == kernels.UnitInt8 && e.q != model.NoQuantization && bf16:
		return "int8 products with int32 block sums (VPDPBUSD) forward, bf16 (VDPBF16PS) backward"
	case e.unit == kernels.UnitInt8 && e.q != model.NoQuantization:
		return "int8 products with int32 block sums (VPDPBUSD) forward, fp32 backward"
	case e.products() == kernels.UnitBF16:
		return "bf16 products with fp32 sums (VDPBF16PS)"
	}
	return "fp32 compute"
}

// lossTolerance is how far the engine's loss may be from the peer's for
// the two to compute the same step: the peer's own, or bf16's when the
// engine's products round to bf16.
func lossTolerance(p *peerProc, e *engineSide) float64 {
	if e.products() == kernels.UnitBF16 {
		return max(p.lossTolerance(), 2e-2)
	}
	return p.lossTolerance()
}

// pickRounds returns the values of the given rounds.
func pickRounds(v []float64, rounds []int) []float64 {
	out := make([]float64, len(rounds))
	for i, r := range rounds {
		out[i] = v[r]
	}
	return out
}

// weightProductFlops is the flops of a LoRA step's products with the
// frozen weights over T tokens: each weight is used once forward and once
// for the input gradient (LoRA trains no base weight, so no weight
// gradient), two flops a use.
func weightProductFlops(cfg model.Config, T int) float64 {
	C, F, V := float64(cfg.HiddenSize), float64(cfg.IntermediateSize), float64(cfg.VocabSize)
	Q, KV := float64(cfg.QDim()), float64(cfg.KVDim())
	layer := C*Q + 2*C*KV + Q*C + 3*C*F
	return 4 * float64(T) * (float64(cfg.NumLayers)*layer + V*C)
}

// goStep runs one timed training step and returns its seconds and loss.
func goStep(m *model.Model, ad *lora.Adapter, acts *model.Acts, tokens []int) (float64, float64, error) {
	T := len(tokens)
	rows, targets := make([]int, T-1), make([]int, T-1)
	for i := range rows {
		rows[i], targets[i] = i, tokens[i+1]
	}
	ad.ZeroGrad()
	start := time.Now()
	if _, err := m.TrainForward(acts, tokens, ad); err != nil {
		return 0, 0, err
	}
	// CISPO, on-policy (no rollout logprobs: ratio 1, IS weight 1),
	// advantage 1 and weight 1: L = -logπ per token, mean over the row.
	n := float64(len(rows))
	var loss float64
	_, dh := m.LMHeadBackward(acts, rows, targets, func(_ int, lp, _ float64) (float64, float64) {
		const adv, w, isWeight = 1.0, 1.0, 1.0
		loss += -isWeight * adv * lp * w / n
		return -isWeight * adv * w / n, 0
	})
	m.TrainBackward(acts, dh, ad)
	return time.Since(start).Seconds(), loss, nil
}

// peerProc is the PyTorch peer, driven by lines on stdin/stdout:
// it prints "ready <json>" once loaded, answers "step" with
// "step <seconds> <loss> <CPU seconds>" and "quit" with "rss <bytes>".
type peerProc struct {
	cmd       *exec.Cmd
	in        io.WriteCloser
	out       *bufio.Scanner
	info      string
	version   string
	setup     string
	precision string // "fp32" or "bf16" (autocast)
}

// label says how the peer computes.
func (p *peerProc) label() string {
	if p.precision == "bf16" {
		return "bf16 weights + autocast (oneDNN where the CPU has bf16 instructions)"
	}
	return "fp32 (OpenBLAS)"
}

// lossTolerance is the relative loss difference from the engine (fp32
// compute on the same bf16 weights) beyond which the peer is not computing
// the same step: bf16 products round every activation to 8 bits of
// mantissa.
func (p *peerProc) lossTolerance() float64 {
	if p.precision == "bf16" {
		return 2e-2
	}
	return 1e-3
}

func startPeer(command, dir string) (*peerProc, error) {
	args := strings.Fields(command)
	cmd := exec.Command(args[0], append(args[1:], dir)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start peer: %w", err)
	}
	p := &peerProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	line, err := p.read("ready")
	if err != nil {
		return nil, err
	}
	var ready struct {
		Torch      string  `json:"torch"`
		Threads    int     `json:"threads"`
		Core       string  `json:"openblas_coretype"`
		Precision  string  `json:"precision"`
		Capability string  `json:"cpu_capability"`
		LoadS      float64 `json:"load_s"`
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil {
		return nil, fmt.Errorf("peer ready line %q: %w", line, err)
	}
	p.info = line
	p.version = ready.Torch
	core := ready.Core
	if core == "" {
		core = "unset (OpenBLAS auto-detects)"
	}
	p.precision = ready.Precision
	p.setup = fmt.Sprintf("%d threads, ATen CPU capability %s", ready.Threads, ready.Capability)
	if p.precision == "fp32" {
		p.setup += ", OPENBLAS_CORETYPE=" + core
	}
	return p, nil
}

// read returns the rest of the next line that starts with word.
func (p *peerProc) read(word string) (string, error) {
	for p.out.Scan() {
		line := p.out.Text()
		if rest, ok := strings.CutPrefix(line, word+" "); ok {
			return rest, nil
		}
		fmt.Fprintln(os.Stderr, "peer:", line)
	}
	if err := p.out.Err(); err != nil {
		return "", fmt.Errorf("peer: %w", err)
	}
	return "", fmt.Errorf("peer exited before %q", word)
}

func (p *peerProc) step() (sec, loss, cpu float64, err error) {
	if _, err := io.WriteString(p.in, "step\n"); err != nil {
		return 0, 0, 0, fmt.Errorf("peer: %w", err)
	}
	line, err := p.read("step")
	if err != nil {
		return 0, 0, 0, err
	}
	if _, err := fmt.Sscan(line, &sec, &loss, &cpu); err != nil {
		return 0, 0, 0, fmt.Errorf("peer step line %q: %w", line, err)
	}
	return sec, loss, cpu, nil
}

func (p *peerProc) quit() (int64, error) {
	if _, err := io.WriteString(p.in, "quit\n"); err != nil {
		return 0, fmt.Errorf("peer: %w", err)
	}
	line, err := p.read("rss")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(line), 10, 64)
}

func (p *peerProc) close() {
	p.in.Close()
	p.cmd.Wait()
}

// idleCheck warns when the machine looks busy before the run and returns
// the load average it read.
func idleCheck() string {
	la := loadavg()
	busy := busyPercent(2 * time.Second)
	if f, _ := strconv.ParseFloat(strings.Fields(la + " 0")[0], 64); f >= 0.5 || busy >= 20 {
		logf("warning: the machine is busy (load average %s, %d%% of CPU time busy over 2 s); results will be noisy", la, busy)
	} else {
		logf("idle check: load average %s, %d%% busy over 2 s", la, busy)
	}
	return la
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func noisyNote(before, after string) string {
	for _, s := range []string{before, after} {
		if f, err := strconv.ParseFloat(strings.Fields(s + " x")[0], 64); err == nil && f >= 0.5 {
			return " (the machine was shared: other processes ran, so absolute numbers are low and noisy; the ratio is the result)"
		}
	}
	return ""
}

// busyPercent is the busy share of all CPUs over d, from /proc/stat.
func busyPercent(d time.Duration) int {
	read := func() (busy, total int64) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0
		}
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		for i, s := range f[1:] {
			v, _ := strconv.ParseInt(s, 10, 64)
			total += v
			if i != 3 && i != 4 { // idle, iowait
				busy += v
			}
		}
		return busy, total
	}
	b1, t1 := read()
	time.Sleep(d)
	b2, t2 := read()
	if t2 <= t1 {
		return 0
	}
	return int(100 * (b2 - b1) / (t2 - t1))
}

// sample is one timed step: wall and CPU seconds of the stepping process,
// and the average number of cores other processes kept busy meanwhile.
type sample struct{ wall, cpu, other float64 }

// cleanLoad is the other processes' load (cores) below which a step
// counts as undisturbed.
const cleanLoad = 0.1

func walls(s []sample) []float64  { return pick(s, func(x sample) float64 { return x.wall }) }
func cpus(s []sample) []float64   { return pick(s, func(x sample) float64 { return x.cpu }) }
func others(s []sample) []float64 { return pick(s, func(x sample) float64 { return x.other }) }

func pick(s []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}

// machineBusySeconds is the CPU time all processes have used so far
// (user, nice, system, irq, softirq and steal from /proc/stat, in
// USER_HZ = 100 ticks per second).
func machineBusySeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	var busy int64
	for i, s := range f[1:] {
		v, _ := strconv.ParseInt(s, 10, 64)
		switch i {
		case 0, 1, 2, 5, 6, 7: // user nice system irq softirq steal
			busy += v
		}
	}
	return float64(busy) / 100
}

// cpuSeconds is the user+sys CPU time of this process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return runtime.GOARCH
}

// kernelVariant names the matmul implementation that ran. engine/kernels
// does not export its choice, so it is inferred from its dispatch rule
// (AVX-512 F+BW, else AVX2+FMA, else Go) and the build.
func kernelVariant() string {
	if pureGo {
		return "go (purego build)"
	}
	b, _ := os.ReadFile("/proc/cpuinfo")
	flags := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "flags"); ok {
			for _, f := range strings.Fields(strings.TrimPrefix(strings.TrimSpace(rest), ":")) {
				flags[f] = true
			}
			break
		}
	}
	switch {
	case flags["avx512f"] && flags["avx512bw"]:
		return "avx512 (inferred from CPU flags)"
	case flags["avx2"] && flags["fma"]:
		return "avx2 (inferred from CPU flags)"
	}
	return "go (inferred from CPU flags)"
}

func median(s []float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	s = slices.Clone(s)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func spread(s []float64) string {
	if len(s) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f [%.2f–%.2f]", median(s), slices.Min(s), slices.Max(s))
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
