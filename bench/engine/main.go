// Command engine is the side-by-side benchmark of the native engine against
// llama.cpp (node-llama-cpp@3.22.1) on the same weights: a random
// Qwen2.5-0.5B-shaped model (initmodel, real Qwen tokenizer) stored as f16,
// and its f16 GGUF export for llama.cpp. run.sh installs the peer and calls
// it; it can also be run directly once the assets are present:
//
//	go run ./bench/engine [-rounds 3] [-threads 2] [-dtype f16] [-quantize q8|q4] [-out FILE]
//
// With -quantize q8 (q4) our engine loads the folder quantized (blockwise
// 8-bit, 4-bit) and llama.cpp runs its Q8_0 (Q4_0) GGUF export: the same
// bytes. -shape names another model.Preset (qwen3-30b-a3b: a mixture of
// experts) and -layers keeps the first layers of it, so a slice of a large
// real shape fits the machine; per-token bytes and flops then count the
// experts a token reaches (k of E).
//
// It measures, interleaving our engine and llama.cpp in rounds (the order
// alternates between rounds) on GOMAXPROCS = llama.cpp threads:
//
//   - prefill: a 512-token prompt evaluated in one batch, up to the first
//     sampled token (tok/s);
//   - decode: 128 greedy single-sequence decode steps after that prompt
//     (tok/s);
//   - group: our Batcher generating n = 8 samples × 128 tokens of one prompt
//     (shared prefill), aggregate tok/s, against llama.cpp single-sequence
//     decode (the target); llama.cpp decoding 8 sequences of one
//     context is shown too, for information;
//   - peak RSS of a fresh subprocess (this binary, "rss" mode) while the
//     Batcher decodes 8 sequences to 1024-token contexts (VmHWM, reset after
//     loading through /proc/self/clear_refs).
//
// Before the rounds and before each round it checks that the machine is idle
// (/proc/stat) and waits a little if not; every measurement records the CPU
// share other processes took meanwhile, and one that other processes
// disturbed (≥ -retry-others %) is repeated once after waiting for quiet,
// keeping the cleaner run. Decode phases stop after -phase-timeout (the rate
// is taken over the tokens done: llama.cpp can fall below 1 tok/s when the
// CPUs are oversubscribed), and no round starts past -max-time. It prints a
// markdown table with the medians over rounds, the ratios ours/llama.cpp,
// the others' CPU share behind each median (rows above the retry threshold
// are marked †), and a greedy-parity guard (our first 16 greedy tokens
// against llama.cpp's on the f16 export).
//
// Other modes (used by run.sh and for profiling):
//
//	engine setup [-dtype f16]                           create the model folder and GGUF only
//	engine rss -model DIR [-quantize q8|q4] [-ctx 1024] [-n 8] [-new 64]  the RSS child
//	engine profile -model DIR [-quantize q8|q4] -kind single|group|prefill [-n 8] [-prompt 512] [-tokens 64] -o cpu.pprof
//	engine schema [-dtype bf16] [-rounds 5] [-tokens 128]      decode with vs without a JSON schema (structured outputs)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/artgo/art/bench/internal/fmapeak"
	"github.com/artgo/art/bench/internal/membw"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/gguf"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/internal/procstat"
)

// benchShape is the benchmark model: a model.Preset shape, or its first
// Layers layers (a slice of a real shape, every layer as the full model's).
type benchShape struct {
	Name   string
	Layers int // 0: the preset's
}

func (s benchShape) String() string {
	if s.Layers > 0 {
		return fmt.Sprintf("%s (first %d layers)", s.Name, s.Layers)
	}
	return s.Name
}

// defaultShape is the dense shape every table of BENCHMARKS.md's
// inference section was measured on.
var defaultShape = benchShape{Name: "qwen2.5-0.5b"}

// shapeFlags registers -shape and -layers on fs.
func shapeFlags(fs *flag.FlagSet) *benchShape {
	s := defaultShape
	fs.StringVar(&s.Name, "shape", s.Name, "model.Preset shape of the random benchmark model (e.g. qwen3-30b-a3b, a mixture of experts)")
	fs.IntVar(&s.Layers, "layers", 0, "keep only this many of the shape's layers (0: all)")
	return &s
}

// Issue 4's targets.
const (
	targetPrefill = 2.0
	targetDecode  = 1.0
	targetGroup   = 8.0
	// targetStream is the share of the measured read bandwidth that
	// single-sequence decode should stream its weights at (issue #23).
	targetStream = 0.85
	targetRSSMB  = 1600.0
)

func main() {
	log := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench/engine: "+format+"\n", a...) }
	mode := ""
	args := os.Args[1:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	var err error
	switch mode {
	case "":
		err = runBench(args, log)
	case "setup":
		err = runSetup(args, log)
	case "rss":
		err = runRSS(args)
	case "profile":
		err = runProfile(args, log)
	case "schema":
		err = runSchema(args, log)
	case "prefix":
		err = runPrefix(args, log)
	default:
		err = fmt.Errorf("unknown mode %q (want setup, rss, profile, schema, prefix or none)", mode)
	}
	if err != nil {
		log("error: %v", err)
		os.Exit(1)
	}
}

// ---------------------------------------------------------------- assets

// repoRoot walks up from the working directory to go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory; run from the repository")
		}
		dir = parent
	}
}

func parseDType(s string) (kernels.DType, error) {
	switch strings.ToLower(s) {
	case "f16":
		return kernels.F16, nil
	case "bf16":
		return kernels.BF16, nil
	}
	return 0, fmt.Errorf("dtype %q: want f16 or bf16", s)
}

// benchAssets parses dtype and quantize and finds the repository and the
// benchmark model's folder and GGUF export for them.
func benchAssets(shape benchShape, dtype, quantize, dir string) (dt kernels.DType, q model.Quantization, root, modelDir, ggufPath string, err error) {
	if dt, err = parseDType(dtype); err != nil {
		return
	}
	if q, err = model.ParseQuantization(quantize); err != nil {
		return
	}
	if root, err = repoRoot(); err != nil {
		return
	}
	modelDir, ggufPath = assetPaths(shape, root, dir, dtype)
	if gt := ggufType(q, dt); gt != gguf.F16 {
		ggufPath = strings.TrimSuffix(ggufPath, "-f16.gguf") + "-" + strings.ToLower(gt.String()) + ".gguf"
	}
	return
}

// assetPaths returns the cached model folder and f16 GGUF for a dtype.

func assetPaths(shape benchShape, root, dir, dtype string) (modelDir, ggufPath string) {
	if dir == "" {
		dir = filepath.Join(root, ".assets", "bench")
	}
	name := shape.Name
	if shape.Layers > 0 {
		name += fmt.Sprintf("-%dl", shape.Layers)
	}
	name = fmt.Sprintf("%s-%s-seed1", name, strings.ToLower(dtype))
	return filepath.Join(dir, name), filepath.Join(dir, name+"-f16.gguf")
}

// ggufType is the GGUF export llama.cpp runs against our model of dtype dt
// loaded as q: the quantized type holding our very blocks, else our 16-bit
// type (bf16 or f16: the same bits).
func ggufType(q model.Quantization, dt kernels.DType) gguf.Type {
	switch {
	case q == model.Q8:
		return gguf.Q8_0
	case q == model.Q4:
		return gguf.Q4_0
	case dt == kernels.BF16:
		return gguf.BF16
	}
	return gguf.F16
}

// ensureAssets creates the model folder (once) and its f16 GGUF export
// (once; Q8_0 or Q4_0 when q is Q8 or Q4), and returns the model loaded as
// q says.
func ensureAssets(shape benchShape, root, modelDir, ggufPath string, dt kernels.DType, q model.Quantization, log func(string, ...any)) (*model.Model, error) {
	if _, err := os.Stat(filepath.Join(modelDir, "model.safetensors")); err != nil {
		tokDir := filepath.Join(root, ".assets", "qwen3")
		if _, err := os.Stat(filepath.Join(tokDir, "tokenizer.json")); err != nil {
			return nil, fmt.Errorf("tokenizer %s missing: run scripts/fetch-assets.sh qwen3", tokDir)
		}
		if err := os.MkdirAll(filepath.Dir(modelDir), 0o755); err != nil {
			return nil, err
		}
		tmp, err := os.MkdirTemp(filepath.Dir(modelDir), ".tmp-model-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		log("writing random %s %v model to %s ...", shape, dt, modelDir)
		t0 := time.Now()
		arch, err := model.PresetArch(shape.Name)
		if err != nil {
			return nil, err
		}
		if _, err := initmodel.Write(tmp, initmodel.Options{Arch: arch, Shape: shape.Name, Layers: shape.Layers, Tokenizer: tokDir, DType: dt, Seed: 1}); err != nil {
			return nil, err
		}
		os.Chmod(tmp, 0o755)
		os.RemoveAll(modelDir)
		if err := os.Rename(tmp, modelDir); err != nil {
			return nil, err
		}
		log("model written in %.1fs", time.Since(t0).Seconds())
		os.Remove(ggufPath) // stale export of an older folder
		runtime.GC()
	}
	t0 := time.Now()
	m, err := model.LoadWith(context.Background(), modelDir, model.LoadOptions{Quantize: q})
	if err != nil {
		return nil, err
	}
	log("model loaded in %.1fs (%s, %d params, %v)", time.Since(t0).Seconds(), shape, m.Config.NumParams(), m.W.Layers[0].Q.DType)
	if st, err := os.Stat(ggufPath); err != nil || st.Size() == 0 {
		gt := ggufType(q, m.W.Layers[0].Q.DType) // quantized: the engine's own blocks
		log("exporting %v GGUF to %s ...", gt, ggufPath)
		t0 := time.Now()
		if err := gguf.ExportFile(ggufPath, m, modelDir, gguf.Options{DType: gt}); err != nil {
			return nil, err
		}
		log("GGUF exported in %.1fs", time.Since(t0).Seconds())
	}
	return m, nil
}

func runSetup(args []string, log func(string, ...any)) error {
	fs := flag.NewFlagSet("setup", flag.ExitOnError)
	dtype := fs.String("dtype", "f16", "weight storage of our model folder: f16 or bf16")
	quantize := fs.String("quantize", "", "load our weights quantized (q8 or q4) and export Q8_0 or Q4_0 for llama.cpp")
	dir := fs.String("dir", "", "asset cache directory (default <repo>/.assets/bench)")
	shape := shapeFlags(fs)
	fs.Parse(args)
	dt, q, root, md, gp, err := benchAssets(*shape, *dtype, *quantize, *dir)
	if err != nil {
		return err
	}
	_, e1 := os.Stat(filepath.Join(md, "model.safetensors"))
	st, e2 := os.Stat(gp)
	if e1 != nil || e2 != nil || st.Size() == 0 {
		_, err = ensureAssets(*shape, root, md, gp, dt, q, log)
	}
	if err == nil {
		fmt.Println(md)
		fmt.Println(gp)
	}
	return err
}

// benchText is deterministic English-like filler; random weights do not care
// what the prompt says, but a real tokenizer should see real words.
func benchText() string {
	words := strings.Fields(`the agent reads the board and chooses a move that blocks the opponent while
keeping its own line open reinforcement learning rewards each trajectory by the outcome of the game and
the trainer compares samples of one prompt to compute advantages which then weight the log probabilities
of the sampled tokens during the policy update`)
	var b strings.Builder
	x := uint32(12345)
	for i := 0; b.Len() < 40000; i++ {
		x = x*1664525 + 1013904223
		if i%17 == 0 {
			fmt.Fprintf(&b, "\nStep %d: ", i/17+1)
		}
		b.WriteString(words[(x>>8)%uint32(len(words))])
		if x%11 == 0 {
			b.WriteString(",")
		}
		b.WriteByte(' ')
	}
	return b.String()
}

func promptTokens(modelDir string, n int) ([]int, error) {
	tok, err := tokenizer.LoadDir(modelDir)
	if err != nil {
		return nil, err
	}
	ids := tok.Encode(benchText())
	if len(ids) < n {
		return nil, fmt.Errorf("bench text has %d tokens, need %d", len(ids), n)
	}
	return ids[:n], nil
}

// ---------------------------------------------------------------- CPU load

// cpuTimes reads the machine's busy and total jiffies from /proc/stat.
func cpuTimes() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, s := range f[1:] {
		v, _ := strconv.ParseUint(s, 10, 64)
		if i >= 8 { // guest, guest_nice are already in user, nice
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// procTicks returns utime+stime of a process (all its threads), in jiffies.
func procTicks(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return u + st
}

// loadMeter measures the share of all CPUs that processes other than the
// benchmark's own (this process and the llama.cpp worker) used between
// start and stop, and what the benchmark process that was not being
// measured used meanwhile (it should idle).
type loadMeter struct {
	pids        []int // measured process first
	busy, total uint64
	ticks       []uint64
}

func startLoad(pids ...int) loadMeter {
	b, t := cpuTimes()
	l := loadMeter{pids: pids, busy: b, total: t}
	for _, p := range pids {
		l.ticks = append(l.ticks, procTicks(p))
	}
	return l
}

// stop returns the percentages of machine CPU time used by processes outside
// the benchmark and by the benchmark's other (idle) side.
func (l loadMeter) stop() (others, idleSide float64) {
	b, t := cpuTimes()
	dt := float64(t - l.total)
	if dt <= 0 {
		return 0, 0
	}
	o := float64(b - l.busy)
	for i, p := range l.pids {
		d := float64(procTicks(p) - l.ticks[i])
		o -= d
		if i > 0 {
			idleSide += 100 * d / dt
		}
	}
	return max(0, 100*o/dt), idleSide
}

// busyPct samples the machine's busy share over d.
func busyPct(d time.Duration) float64 {
	b1, t1 := cpuTimes()
	time.Sleep(d)
	b2, t2 := cpuTimes()
	if t2 <= t1 {
		return 0
	}
	return 100 * float64(b2-b1) / float64(t2-t1)
}

// waitIdle waits up to max for the machine to be under 20% busy and returns
// the last busy share seen.
func waitIdle(max time.Duration, log func(string, ...any)) float64 {
	deadline := time.Now().Add(max)
	p := busyPct(2 * time.Second)
	for p >= 20 && time.Now().Before(deadline) {
		p = busyPct(2 * time.Second)
	}
	return p
}

// ---------------------------------------------------------------- the peer

type llamaWorker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startLlama(root, script string, threads int) (*llamaWorker, error) {
	entry := filepath.Join(root, ".assets", "node-llama-cpp", "node_modules", "node-llama-cpp", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		return nil, fmt.Errorf("node-llama-cpp missing: run scripts/install-llamacpp.sh")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node not found")
	}
	cmd := exec.Command(node, script)
	cmd.Env = append(os.Environ(), "LLAMA_MODULE="+(&url.URL{Scheme: "file", Path: entry}).String())
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
		return nil, err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	return &llamaWorker{cmd: cmd, in: in, out: sc}, nil
}

func (w *llamaWorker) call(req map[string]any, resp any) error {
	b, _ := json.Marshal(req)
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("llama worker: %w", err)
	}
	if !w.out.Scan() {
		return fmt.Errorf("llama worker exited (%v)", w.out.Err())
	}
	line := w.out.Bytes()
	var st struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(line, &st); err != nil {
		return fmt.Errorf("llama worker: bad reply %q", line)
	}
	if !st.OK {
		return fmt.Errorf("llama worker: %s", st.Error)
	}
	if resp != nil {
		return json.Unmarshal(line, resp)
	}
	return nil
}

func (w *llamaWorker) close() {
	w.call(map[string]any{"cmd": "quit"}, nil)
	w.in.Close()
	done := make(chan struct{})
	go func() { w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		w.cmd.Process.Kill()
	}
}

type singleResult struct {
	PrefillMs float64 `json:"prefillMs"`
	DecodeMs  float64 `json:"decodeMs"`
	Decoded   int     `json:"decoded"` // decode steps timed by DecodeMs
	Tokens    []int   `json:"tokens"`
}

type groupResult struct {
	PrefillMs float64 `json:"prefillMs"`
	DecodeMs  float64 `json:"decodeMs"`
	TotalMs   float64 `json:"totalMs"`
	Tokens    int     `json:"tokens"`  // all tokens generated
	Decoded   int     `json:"decoded"` // tokens generated in DecodeMs
}

// ---------------------------------------------------------------- our side

// errPhaseTimeout stops a measurement that runs past its time limit (a
// heavily loaded machine); the rate is then taken over the tokens done.
var errPhaseTimeout = errors.New("phase time limit")

// oursSingle runs greedy generation of decode+1 tokens after prompt and
// times the prefill (to the first token) and the decode steps after it,
// stopping the decode early once it has run for limit.
func oursSingle(m *model.Model, prompt []int, decode int, limit time.Duration) (singleResult, error) {
	stamps := make([]time.Time, 0, decode+1)
	t0 := time.Now()
	res, err := generate.Generate(context.Background(), m, generate.Request{
		Prompt: prompt, MaxTokens: decode + 1,
		Sampling: generate.SamplingParams{Temperature: 0},
		OnToken: func(generate.Sample) error {
			now := time.Now()
			stamps = append(stamps, now)
			if limit > 0 && now.Sub(stamps[0]) > limit {
				return errPhaseTimeout
			}
			return nil
		},
	})
	if err != nil && !errors.Is(err, errPhaseTimeout) {
		return singleResult{}, err
	}
	if len(stamps) < 2 {
		return singleResult{}, fmt.Errorf("generated %d tokens", len(stamps))
	}
	last := len(stamps) - 1
	return singleResult{
		PrefillMs: ms(stamps[0].Sub(t0)),
		DecodeMs:  ms(stamps[last].Sub(stamps[0])),
		Decoded:   last,
		Tokens:    res.IDs(),
	}, nil
}

// oursGroup has the Batcher generate n samples of newTok tokens of prompt,
// stopping early once the decode has run for limit.
func oursGroup(b *generate.Batcher, prompt []int, n, newTok int, temp float64, limit time.Duration) (groupResult, error) {
	var first, last time.Time
	count := 0
	t0 := time.Now()
	_, err := b.Generate(context.Background(), generate.Request{
		Prompt: prompt, MaxTokens: newTok, Seed: 1,
		Sampling: generate.SamplingParams{Temperature: temp},
	}, n, func(i int, s generate.Sample) error {
		now := time.Now()
		if count == 0 {
			first = now
		}
		last = now
		count++
		if limit > 0 && now.Sub(first) > limit {
			return errPhaseTimeout
		}
		return nil
	})
	if err != nil && !errors.Is(err, errPhaseTimeout) {
		return groupResult{}, err
	}
	if err == nil && count != n*newTok {
		return groupResult{}, fmt.Errorf("group generated %d tokens, want %d", count, n*newTok)
	}
	// The first n tokens come from the shared prefill's logits.
	return groupResult{PrefillMs: ms(first.Sub(t0)), DecodeMs: ms(last.Sub(first)), TotalMs: ms(last.Sub(t0)),
		Tokens: count, Decoded: count - n}, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// kernelVariant says which kernels engine/kernels should pick here, and
// the unit of its weight products. The package does not export its
// variant, so this repeats its rule (dispatch: AVX-512 F+BW, else
// AVX2+FMA, else Go).
func kernelVariant() string {
	u, why := kernels.ActiveUnit()
	units := fmt.Sprintf("; weight products on the %v unit (%s)", u, why)
	switch {
	case runtime.GOARCH != "amd64":
		return "go (not amd64)" + units
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW:
		return "avx512 (by CPU flags; engine/kernels does not export its choice)" + units
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return "avx2 (by CPU flags; engine/kernels does not export its choice)" + units
	}
	return "go (by CPU flags)" + units
}

// setUnit applies -unit (empty: keep the kernels' start-up choice) and
// hands it to the subprocesses (the RSS phase) through the environment.
func setUnit(s string) error {
	if s == "" {
		return nil
	}
	u, err := kernels.UseUnit(s)
	if err != nil {
		return err
	}
	return os.Setenv(kernels.UnitEnv, u.String())
}

// unitPeak measures the peak of the unit our weight products run on: a
// quantized model's on the int8 unit are int8 dot products, else exact
// fp32; 16-bit ones bf16 on the bf16 and int8 units.
func unitPeak(threads int, quantize string) fmapeak.Result {
	u, _ := kernels.ActiveUnit()
	if u == kernels.UnitInt8 && quantize != "" {
		if r, ok := fmapeak.MeasureInt8(threads, 300*time.Millisecond, 3); ok {
			return r
		}
	}
	if quantize == "" && (u == kernels.UnitBF16 || u == kernels.UnitInt8) {
		if r, ok := fmapeak.MeasureBF16(threads, 300*time.Millisecond, 3); ok {
			return r
		}
	}
	return fmapeak.Measure(threads, 300*time.Millisecond, 3)
}

// ---------------------------------------------------------------- the run

type sample struct {
	v      float64 // the measured value (tok/s)
	others float64 // % of machine CPU used by other processes meanwhile
}

func runBench(args []string, log func(string, ...any)) error {
	fs := flag.NewFlagSet("engine", flag.ExitOnError)
	rounds := fs.Int("rounds", 3, "interleaved rounds (medians are reported)")
	threads := fs.Int("threads", 2, "GOMAXPROCS for our engine and llama.cpp threads")
	dtype := fs.String("dtype", "f16", "weight storage of our model folder: f16 (same bits as the GGUF) or bf16")
	quantize := fs.String("quantize", "", "load our weights quantized (q8 or q4) and give llama.cpp their Q8_0 or Q4_0 export (the same bytes)")
	dir := fs.String("dir", "", "asset cache directory (default <repo>/.assets/bench)")
	promptLen := fs.Int("prompt", 512, "prefill prompt tokens")
	decode := fs.Int("decode", 128, "single-sequence decode steps")
	groupN := fs.Int("n", 8, "group size")
	groupTok := fs.Int("group-tokens", 128, "new tokens per group sample")
	groupPrompt := fs.Int("group-prompt", 128, "group prompt tokens")
	groupTemp := fs.Float64("group-temp", 1.0, "group sampling temperature (GRPO samples at 1)")
	llamaGroup := fs.Bool("llama-group", true, "also time llama.cpp decoding n sequences in one context (informational)")
	llamaGroupTok := fs.Int("llama-group-tokens", 32, "tokens per sequence in llama.cpp's group run (it cannot share the prefill, so it is kept short)")
	maxTime := fs.Duration("max-time", 9*time.Minute, "start no new round once the run would exceed this (at least one round runs)")
	phaseTimeout := fs.Duration("phase-timeout", 60*time.Second, "stop a decode measurement after this long (rate over the tokens done)")
	retryOthers := fs.Float64("retry-others", 25, "re-measure once when other processes took at least this % of the CPUs")
	rssCtx := fs.Int("rss-ctx", 1024, "context length of the RSS phase")
	rssNew := fs.Int("rss-new", 64, "tokens decoded in the RSS phase (prompt = rss-ctx - rss-new)")
	idleWait := fs.Duration("wait-idle", 30*time.Second, "wait up to this long before each round for the machine to be < 20% busy")
	parityN := fs.Int("parity", 16, "greedy tokens compared with llama.cpp")
	out := fs.String("out", "", "also write the report to this file")
	unitFlag := fs.String("unit", "", "arithmetic of our weight products: fp32, bf16, int8 or auto (default: $"+kernels.UnitEnv+", else auto)")
	nativeBench := fs.String("llama-bench", os.Getenv("LLAMA_BENCH"), "the llama-bench of a llama.cpp built for this CPU (or of a fork with the same tool): each round also times it on the same GGUF (its decode both from an empty context and after the prompt, as ours runs), the peer at its best (default: $LLAMA_BENCH)")
	nativeArgs := fs.String("llama-bench-args", "-fa 1", "extra flags for -llama-bench, space-separated (e.g. \"-fa 1 -rtr 1\" for ik_llama.cpp's row repacking)")
	shape := shapeFlags(fs)
	fs.Parse(args)
	runtime.GOMAXPROCS(*threads)
	if err := setUnit(*unitFlag); err != nil {
		return err
	}
	dt, quant, root, modelDir, ggufPath, err := benchAssets(*shape, *dtype, *quantize, *dir)
	if err != nil {
		return err
	}
	start := time.Now()
	log("kernels variant: %s", kernelVariant())

	pct0 := busyPct(2 * time.Second)
	load0 := readLoadavg()
	if pct0 >= 20 {
		log("warning: machine is %.0f%% busy before the run (loadavg %s); results will be noisy", pct0, load0)
	} else {
		log("idle check: %.0f%% busy (loadavg %s)", pct0, load0)
	}

	m, err := ensureAssets(*shape, root, modelDir, ggufPath, dt, quant, log)
	if err != nil {
		return err
	}
	prompt, err := promptTokens(modelDir, max(*promptLen, *groupPrompt))
	if err != nil {
		return err
	}
	gprompt := prompt[:*groupPrompt]
	prompt = prompt[:*promptLen]

	// The peer.
	script := filepath.Join(root, "bench", "engine", "llama_worker.mjs")
	lw, err := startLlama(root, script, *threads)
	if err != nil {
		return err
	}
	defer lw.close()
	var info struct {
		LoadMs         float64 `json:"loadMs"`
		Release        string  `json:"release"`
		FlashAttention any     `json:"flashAttention"`
		ContextSize    int     `json:"contextSize"`
		BatchSize      int     `json:"batchSize"`
	}
	ctxSize := 1024
	if need := *promptLen + *decode + 1; need > ctxSize {
		ctxSize = (need + 255) / 256 * 256
	}
	lg := 0
	if *llamaGroup {
		lg = *groupN
	}
	if err := lw.call(map[string]any{"cmd": "load", "model": ggufPath, "threads": *threads,
		"contextSize": ctxSize, "batchSize": 512, "groupN": lg,
		"groupContextSize": (*groupPrompt + *groupTok + 255) / 256 * 256}, &info); err != nil {
		return err
	}
	log("llama.cpp %s loaded in %.0f ms (context %d, batch %d, flash attention %v, %d threads)",
		info.Release, info.LoadMs, info.ContextSize, info.BatchSize, info.FlashAttention, *threads)

	// Warm-up both sides; our weights are packed first, timed.
	t0 := time.Now()
	wBytes, pBytes, perToken := prepack(m)
	packSec := time.Since(t0).Seconds()
	log("weight packing %.1fs (%.0f MB stored → %.0f MB packed panels)", packSec, float64(wBytes)/(1<<20), float64(pBytes)/(1<<20))
	if _, err := oursSingle(m, prompt[:32], 4, 0); err != nil {
		return err
	}
	var warm singleResult
	if err := lw.call(map[string]any{"cmd": "single", "prompt": prompt[:32], "decode": 4}, &warm); err != nil {
		return err
	}
	batcher := generate.NewBatcher(m, generate.BatcherOptions{})
	defer batcher.Close()
	if _, err := oursGroup(batcher, gprompt[:16], 2, 2, *groupTemp, 0); err != nil {
		return err
	}

	self, lpid := os.Getpid(), lw.cmd.Process.Pid
	checkIdle := func(pct float64, who string) {
		if pct >= 5 {
			log("  warning: the %s used %.0f%% of the CPUs while the other side was measured", who, pct)
		}
	}
	res := map[string][]sample{}
	add := func(k string, v, others float64) { res[k] = append(res[k], sample{v, others}) }
	var ourTokens, llamaTokens []int
	// measure runs one side's measurement; when other processes took more
	// than retryOthers of the CPUs meanwhile, and the time budget allows,
	// it waits for the machine to go quiet and measures once more, keeping
	// the cleaner of the two.
	measure := func(f func() (map[string]float64, float64, error)) error {
		vals, o, err := f()
		if err != nil {
			return err
		}
		if o >= *retryOthers && time.Since(start) < *maxTime/2 {
			log("  (other processes took %.0f%% of the CPUs: waiting for the machine to go quiet and measuring again)", o)
			waitIdle(*idleWait, log)
			v2, o2, err := f()
			if err != nil {
				return err
			}
			if o2 < o {
				vals, o = v2, o2
			}
		}
		for k, v := range vals {
			add(k, v, o)
		}
		return nil
	}
	trunc := func(done, want int) string {
		if done < want {
			return fmt.Sprintf(" [stopped by -phase-timeout after %d of %d steps]", done, want)
		}
		return ""
	}
	// Decoding one sequence reads every weight once per token: the
	// machine's read bandwidth is its limit. The probe measures it each
	// round (the best of the rounds is the limit at its best), and just
	// before and just after each single-sequence decode, ours and the
	// native peer's: this host's bandwidth has moved by 2× within minutes,
	// so a decode is also set beside what the memory delivered around it.
	probe := membw.NewProbe()
	var ggufBytes int64
	if st, err := os.Stat(ggufPath); err == nil {
		ggufBytes = st.Size()
	}
	// nativeBytes is what llama.cpp reads per token: its file scaled as
	// ours are (the same weights; its file also holds the embedding and
	// the norms).
	nativeBytes := float64(ggufBytes) * perToken.bytes / float64(pBytes)
	// besideProbe runs decode between two probes (the best of 2 passes
	// each) and returns the higher of them.
	besideProbe := func(decode func() error) (float64, error) {
		before := probe.Read(*threads, 2)
		if err := decode(); err != nil {
			return 0, err
		}
		after := probe.Read(*threads, 2)
		log("  read bandwidth around it %.1f, %.1f GB/s", before, after)
		return max(before, after), nil
	}
	oursSingleM := func() (map[string]float64, float64, error) {
		var s singleResult
		var o, idle float64
		bw, err := besideProbe(func() error {
			lm := startLoad(self, lpid)
			var err error
			s, err = oursSingle(m, prompt, *decode, *phaseTimeout)
			o, idle = lm.stop()
			return err
		})
		if err != nil {
			return nil, 0, err
		}
		checkIdle(idle, "llama.cpp worker")
		ourTokens = s.Tokens
		pf, dc := float64(len(prompt))/(s.PrefillMs/1e3), float64(s.Decoded)/(s.DecodeMs/1e3)
		log("  ours   prefill %6.1f tok/s  decode %5.2f tok/s  (others %.0f%%)%s", pf, dc, o, trunc(s.Decoded, *decode))
		runtime.GC()
		return map[string]float64{"ours.prefill": pf, "ours.decode": dc, "ours.decodebw": perToken.bytes * dc / 1e9 / bw}, o, nil
	}
	oursGroupM := func() (map[string]float64, float64, error) {
		lm := startLoad(self, lpid)
		g, err := oursGroup(batcher, gprompt, *groupN, *groupTok, *groupTemp, *phaseTimeout)
		if err != nil {
			return nil, 0, err
		}
		o, idle := lm.stop()
		checkIdle(idle, "llama.cpp worker")
		e2e, dec := float64(g.Tokens)/(g.TotalMs/1e3), float64(g.Decoded)/(g.DecodeMs/1e3)
		log("  ours   group %d×%d: %.1f tok/s end to end, %.1f tok/s decode phase (prefill %.0f ms)  (others %.0f%%)%s",
			*groupN, *groupTok, e2e, dec, g.PrefillMs, o, trunc(g.Tokens, *groupN**groupTok))
		runtime.GC()
		return map[string]float64{"ours.group": e2e, "ours.groupdecode": dec}, o, nil
	}
	nativeM := func() (map[string]float64, float64, error) {
		var r nativeRates
		var o float64
		bw, err := besideProbe(func() error {
			lm := startLoad(self, lpid)
			t0 := time.Now()
			var err error
			r, err = runLlamaBench(context.Background(), *nativeBench, ggufPath, *threads, *promptLen, *decode, strings.Fields(*nativeArgs), 2**phaseTimeout+time.Minute)
			o, _ = lm.stop()
			// The meter counts the child's CPU time among the others': take it out.
			o = max(0, o-100*r.CPU.Seconds()/(time.Since(t0).Seconds()*float64(runtime.NumCPU())))
			return err
		})
		if err != nil {
			return nil, 0, err
		}
		log("  native prefill %6.1f tok/s  decode %5.2f tok/s, after the prompt %5.2f tok/s  (llama-bench; others %.0f%%)", r.Prefill, r.Decode, r.DecodeAfterPrompt, o)
		v := map[string]float64{"native.prefill": r.Prefill, "native.decode": r.Decode}
		// Its share of the bandwidth at our decode's context where
		// llama-bench measured it there, as the rows set them side by side.
		shareOf := r.Decode
		if r.DecodeAfterPrompt > 0 {
			v["native.decodeafter"] = r.DecodeAfterPrompt
			shareOf = r.DecodeAfterPrompt
		}
		v["native.decodebw"] = nativeBytes * shareOf / 1e9 / bw
		return v, o, nil
	}
	llamaSingleM := func() (map[string]float64, float64, error) {
		lm := startLoad(lpid, self)
		var s singleResult
		if err := lw.call(map[string]any{"cmd": "single", "prompt": prompt, "decode": *decode, "maxMs": ms(*phaseTimeout)}, &s); err != nil {
			return nil, 0, err
		}
		o, idle := lm.stop()
		checkIdle(idle, "our process")
		llamaTokens = s.Tokens
		pf, dc := float64(len(prompt))/(s.PrefillMs/1e3), float64(s.Decoded)/(s.DecodeMs/1e3)
		log("  llama  prefill %6.1f tok/s  decode %5.2f tok/s  (others %.0f%%)%s", pf, dc, o, trunc(s.Decoded, *decode))
		return map[string]float64{"llama.prefill": pf, "llama.decode": dc}, o, nil
	}
	llamaGroupM := func() (map[string]float64, float64, error) {
		lm := startLoad(lpid, self)
		var g groupResult
		if err := lw.call(map[string]any{"cmd": "group", "prompt": gprompt, "n": *groupN, "tokens": *llamaGroupTok, "maxMs": ms(*phaseTimeout)}, &g); err != nil {
			return nil, 0, err
		}
		o, idle := lm.stop()
		checkIdle(idle, "our process")
		dec := float64(g.Decoded) / (g.DecodeMs / 1e3)
		log("  llama  group %d×%d: %.1f tok/s decode phase (prefill of %d copies %.0f ms)  (others %.0f%%)%s",
			*groupN, *llamaGroupTok, dec, *groupN, g.PrefillMs, o, trunc(g.Decoded, *groupN*(*llamaGroupTok-1)))
		return map[string]float64{"llama.groupdecode": dec}, o, nil
	}
	// A decoding group is compute-bound: the FMA peak of the kernels' unit,
	// measured each round too, is its limit.
	peakUnit := ""
	noisy, done := 0, 0
	var lastRound time.Duration
	for r := 1; r <= *rounds; r++ {
		if r > 1 && time.Since(start)+lastRound > *maxTime {
			log("warning: stopping after %d of %d rounds to stay within -max-time %v", r-1, *rounds, *maxTime)
			break
		}
		roundStart := time.Now()
		p := waitIdle(*idleWait, log)
		if p >= 20 {
			noisy++
			log("round %d/%d: machine %.0f%% busy; running anyway", r, *rounds, p)
		} else {
			log("round %d/%d: machine %.0f%% busy", r, *rounds, p)
		}
		lm := startLoad(self, lpid)
		gbs := probe.Read(*threads, 3)
		o, _ := lm.stop()
		add("bw", gbs, o)
		log("  read bandwidth %.1f GB/s (%d threads, kernels.Dot over 2×256 MiB)", gbs, *threads)
		lm = startLoad(self, lpid)
		pk := unitPeak(*threads, *quantize)
		o, _ = lm.stop()
		add("peak", pk.GFLOPS, o)
		peakUnit = pk.Unit
		log("  peak %.1f GFLOP/s (%s, %d threads, register-only loop)", pk.GFLOPS, pk.Unit, *threads)
		ours := []func() (map[string]float64, float64, error){oursSingleM, oursGroupM}
		theirs := []func() (map[string]float64, float64, error){llamaSingleM}
		if *llamaGroup {
			theirs = append(theirs, llamaGroupM)
		}
		if *nativeBench != "" {
			theirs = append(theirs, nativeM)
		}
		// Alternate who goes first, and interleave single and group phases.
		a, b := ours, theirs
		if r%2 == 0 {
			a, b = theirs, ours
		}
		for i := range max(len(a), len(b)) {
			for _, side := range [][]func() (map[string]float64, float64, error){a, b} {
				if i < len(side) {
					if err := measure(side[i]); err != nil {
						return err
					}
				}
			}
		}
		done++
		lastRound = time.Since(roundStart)
	}
	lw.close()
	batcher.Close()
	probe = nil

	// Peak RSS in a fresh process, with this process's model released first.
	cfg := m.Config
	m = nil
	runtime.GC()
	debug.FreeOSMemory()
	log("RSS phase: fresh process decoding %d sequences to %d-token contexts ...", *groupN, *rssCtx)
	rss, err := childRSS(modelDir, quant, *threads, *rssCtx, *rssNew, *groupN)
	if err != nil {
		log("RSS phase failed: %v", err)
	}
	pct1 := busyPct(2 * time.Second)

	// Report.
	var b strings.Builder
	med := func(k string) float64 { return median(res[k], func(s sample) float64 { return s.v }) }
	// best is a limit's reading at its best over the rounds (bandwidth, peak).
	best := func(k string) float64 {
		v := 0.0
		for _, s := range res[k] {
			v = max(v, s.v)
		}
		return v
	}
	oth := func(k string) float64 { return median(res[k], func(s sample) float64 { return s.others }) }
	oursLabel, ggufLabel := strings.ToUpper(*dtype), strings.ToLower(ggufType(quant, dt).String())
	if quant != model.NoQuantization {
		oursLabel, ggufLabel = strings.ToUpper(string(quant))+" (quantized at load from "+oursLabel+")", "its "+ggufType(quant, dt).String()
	}
	cpuName := cpuModel()
	fmt.Fprintf(&b, "Engine vs llama.cpp (node-llama-cpp@3.22.1, llama.cpp %s), %s, %s, %d CPUs, %d threads both, "+
		"random %s shape (%s weights ours, %s GGUF export for llama.cpp), kernels: %s. "+
		"Median of %d interleaved rounds (%d asked); machine %.0f%% busy before / %.0f%% after (loadavg before %s), %d of %d rounds started busy; "+
		"other processes took a median %.0f–%.0f%% of the CPUs during the measurements. "+
		"Our weights: %.0f MB stored, %.0f MB packed panels, packed in %.1fs after loading; llama.cpp flash attention %v.\n\n",
		info.Release, time.Now().UTC().Format("2006-01-02T15:04Z"), cpuName, runtime.NumCPU(), *threads,
		shape, oursLabel, ggufLabel, kernelVariant(), done, *rounds, pct0, pct1, load0, noisy, done,
		minOthers(res), maxOthers(res), float64(wBytes)/(1<<20), float64(pBytes)/(1<<20), packSec, info.FlashAttention)
	if *nativeBench != "" {
		fmt.Fprintf(&b, "Native peer: `%s %s` (llama-bench, one repetition a round, on the same GGUF), in the rows that name it; the other rows are node-llama-cpp's prebuilt build.\n\n", *nativeBench, *nativeArgs)
	}
	b.WriteString("| metric | ours | llama.cpp | ratio | target | met? | others' CPU share (ours / llama.cpp runs) |\n|---|---|---|---|---|---|---|\n")
	noisyRows := 0
	row := func(name, unit, ko, kl string, target float64) {
		o, l := med(ko), med(kl)
		ratio := o / l
		met := "yes"
		if ratio < target {
			met = "**no**"
		}
		if target == 0 {
			met = "—"
		}
		if oth(ko) >= *retryOthers || oth(kl) >= *retryOthers {
			met += " †"
			noisyRows++
		}
		tgt := "—"
		if target > 0 {
			tgt = fmt.Sprintf("≥ %.1f×", target)
		}
		fmt.Fprintf(&b, "| %s | %.1f %s | %.1f %s | %.2f× | %s | %s | %.0f%% / %.0f%% |\n", name, o, unit, l, unit, ratio, tgt, met, oth(ko), oth(kl))
	}
	row(fmt.Sprintf("prefill, %d-token prompt", *promptLen), "tok/s", "ours.prefill", "llama.prefill", targetPrefill)
	row(fmt.Sprintf("decode, 1 sequence, %d tokens after the prompt", *decode), "tok/s", "ours.decode", "llama.decode", targetDecode)
	row(fmt.Sprintf("group n=%d × %d tokens (%d-token prompt, T=%g), aggregate incl. shared prefill, vs llama.cpp 1-sequence decode", *groupN, *groupTok, *groupPrompt, *groupTemp),
		"tok/s", "ours.group", "llama.decode", targetGroup)
	row(fmt.Sprintf("group n=%d, decode phase only, vs llama.cpp 1-sequence decode", *groupN), "tok/s", "ours.groupdecode", "llama.decode", targetGroup)
	if *llamaGroup {
		row(fmt.Sprintf("(info) group n=%d decode phase vs llama.cpp decoding %d sequences in one context (%d tokens each, prefill excluded)", *groupN, *groupN, *llamaGroupTok),
			"tok/s", "ours.groupdecode", "llama.groupdecode", 0)
	}
	if len(res["native.decode"]) > 0 {
		row(fmt.Sprintf("prefill, %d-token prompt, vs the native llama-bench", *promptLen), "tok/s", "ours.prefill", "native.prefill", targetPrefill)
		if len(res["native.decodeafter"]) > 0 {
			row(fmt.Sprintf("decode, 1 sequence, %d tokens after the %d-token prompt, vs the native llama-bench at the same context", *decode, *promptLen), "tok/s", "ours.decode", "native.decodeafter", targetDecode)
			row(fmt.Sprintf("(info) decode, 1 sequence, vs the native llama-bench from an empty context (ours after the %d-token prompt)", *promptLen), "tok/s", "ours.decode", "native.decode", 0)
		} else {
			row(fmt.Sprintf("decode, 1 sequence, %d tokens, vs the native llama-bench (from an empty context: this llama-bench has neither -gp nor --n-depth)", *decode), "tok/s", "ours.decode", "native.decode", targetDecode)
		}
		row(fmt.Sprintf("group n=%d, decode phase only, vs the native llama-bench's 1-sequence decode", *groupN), "tok/s", "ours.groupdecode", "native.decode", targetGroup)
	}
	if bw := best("bw"); bw > 0 {
		// Weights only: the KV cache read per token (~1 % here) is left out.
		ours := perToken.bytes * med("ours.decode") / 1e9
		theirs := nativeBytes * med("llama.decode") / 1e9
		met := "yes"
		if ours < targetStream*bw {
			met = "**no**"
		}
		fmt.Fprintf(&b, "| decode, 1 sequence: weights streamed (bytes per token × tok/s) against the read bandwidth, best of the rounds, %.1f GB/s | %.1f GB/s = %.0f %% | %.1f GB/s = %.0f %% | %.2f× | ours ≥ %.0f %% | %s | %.0f%% (bandwidth runs) |\n",
			bw, ours, 100*ours/bw, theirs, 100*theirs/bw, ours/theirs, 100*targetStream, met, oth("bw"))
	}
	if len(res["ours.decodebw"]) > 0 {
		o := med("ours.decodebw")
		met := "yes"
		if o < targetStream {
			met = "**no**"
		}
		theirs, ratio := "—", "—"
		if len(res["native.decodebw"]) > 0 {
			n, at := med("native.decodebw"), "at the same context"
			if len(res["native.decodeafter"]) == 0 {
				at = "from an empty context"
			}
			theirs, ratio = fmt.Sprintf("%.0f %% (native, %s)", 100*n, at), fmt.Sprintf("%.2f×", o/n)
		}
		fmt.Fprintf(&b, "| decode, 1 sequence: weights streamed against the read bandwidth measured just before and just after it (the higher of the two, each the best of 2 passes), median of the rounds | %.0f %% | %s | %s | ours ≥ %.0f %% | %s | — |\n",
			100*o, theirs, ratio, 100*targetStream, met)
	}
	if pk := best("peak"); pk > 0 {
		// Two flops per weight per token; attention (~2 % at these
		// lengths) is left out.
		gf := 2 * perToken.params * med("ours.groupdecode") / 1e9
		// The limit beside it: the weight products the group target asks
		// for, as a share of the same peak (above 100 %, no fp32 FMA
		// kernel can reach it on this machine).
		need := 2 * perToken.params * targetGroup * med("llama.decode") / 1e9
		limit := fmt.Sprintf("%.0f× llama.cpp needs %.0f GFLOP/s = %.0f %% of the peak", targetGroup, need, 100*need/pk)
		if need > pk {
			limit += ": beyond it"
		}
		fmt.Fprintf(&b, "| group n=%d decode phase: weight products (2 flops per weight per token) against the unit's peak, %.1f GFLOP/s (%s, best of the rounds) | %.1f GFLOP/s = %.0f %% | — | — | %s | — | %.0f%% (peak runs) |\n",
			*groupN, pk, peakUnit, gf, 100*gf/pk, limit, oth("peak"))
	}
	if pk := best("peak"); pk > 0 && len(res["native.prefill"]) > 0 {
		// A prompt token's products: every weight but the LM head's (only
		// the last token's logits are computed), and causal attention's
		// scores and weighted values, 2·Q·(i+1) flops each for the token
		// at position i, per layer.
		T := float64(*promptLen)
		perTok := 2*(perToken.params-perToken.headParams) + 2*perToken.headParams/T +
			4*float64(cfg.QDim())*(T+1)/2*float64(cfg.NumLayers)
		gf := perTok * med("ours.prefill") / 1e9
		need := perTok * targetPrefill * med("native.prefill") / 1e9
		limit := fmt.Sprintf("%.0f× the native build needs %.0f GFLOP/s = %.0f %% of the peak", targetPrefill, need, 100*need/pk)
		if need > pk {
			limit += ": beyond it"
		}
		fmt.Fprintf(&b, "| prefill, %d-token prompt: weight and attention products against the unit's peak, %.1f GFLOP/s (%s, best of the rounds) | %.1f GFLOP/s = %.0f %% | — | — | %s | — | %.0f%% (peak runs) |\n",
			*promptLen, pk, peakUnit, gf, 100*gf/pk, limit, oth("peak"))
	}
	if rss != nil {
		// The target is the default shape's.
		met, tgt := "yes", fmt.Sprintf("≤ %.0f MB", targetRSSMB)
		if rss.PeakDecodeMB > targetRSSMB {
			met = "**no**"
		}
		if *shape != defaultShape {
			met, tgt = "—", "—"
		}
		fmt.Fprintf(&b, "| peak RSS decoding %d sequences to %d-token contexts (VmHWM, fresh process) | %.0f MB | — | — | %s | %s | — |\n",
			*groupN, *rssCtx, rss.PeakDecodeMB, tgt, met)
	} else {
		b.WriteString("| peak RSS | failed | — | — | ≤ 1600 MB | ? | — |\n")
	}
	if noisyRows > 0 {
		fmt.Fprintf(&b, "\n† Other processes took ≥ %.0f%% of the CPUs during the median run of one side: not a clean comparison (llama.cpp's spinning threads collapse under oversubscription far more than Go's). Rerun on an idle machine.\n", *retryOthers)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "Per-round values (tok/s, bw in GB/s, peak in GFLOP/s; others' CPU share):\n\n")
	for _, k := range []string{"ours.prefill", "llama.prefill", "native.prefill", "ours.decode", "llama.decode", "native.decode", "native.decodeafter", "ours.group", "ours.groupdecode", "llama.groupdecode", "bw", "peak"} {
		if len(res[k]) == 0 {
			continue
		}
		var parts []string
		for _, s := range res[k] {
			parts = append(parts, fmt.Sprintf("%.1f (%.0f%%)", s.v, s.others))
		}
		fmt.Fprintf(&b, "- %s: %s; median others %.0f%%\n", k, strings.Join(parts, ", "), oth(k))
	}
	if rss != nil {
		fmt.Fprintf(&b, "\nRSS phase: after load %.0f MB (weights as stored %.0f MB, packed panels %.0f MB, KV caches %.0f MB for %d×%d tokens, the samples sharing the prompt's first %d), peak while decoding %.0f MB, peak over the process incl. loading %.0f MB%s.\n",
			rss.AfterLoadMB, rss.WeightsMB, rss.PackedMB, rss.KVMB, *groupN, *rssCtx, rss.KVShared, rss.PeakDecodeMB, rss.PeakLifeMB, rss.Note)
	}
	// Greedy parity guard.
	n := min(*parityN, len(ourTokens), len(llamaTokens))
	match := 0
	for match < n && ourTokens[match] == llamaTokens[match] {
		match++
	}
	if match == n {
		fmt.Fprintf(&b, "\nGreedy parity: our first %d greedy tokens after the %d-token prompt equal llama.cpp's on the %s export.\n", n, *promptLen, ggufLabel)
	} else {
		msg := fmt.Sprintf("warning: greedy tokens diverge from llama.cpp at step %d of %d (ours %v…, llama.cpp %v…); llama.cpp rounds activations to f16 before f16 matmuls and keeps an f16 KV cache, so near-ties on random weights can flip; f32 parity is tested in engine/gguf", match, n, ourTokens[:n], llamaTokens[:n])
		log("%s", msg)
		fmt.Fprintf(&b, "\nGreedy parity: %s.\n", msg)
	}
	flags := ""
	if quant != model.NoQuantization {
		flags = " -quantize " + string(quant)
	}
	if *shape != defaultShape {
		flags += " -shape " + shape.Name
		if shape.Layers > 0 {
			flags += fmt.Sprintf(" -layers %d", shape.Layers)
		}
	}
	fmt.Fprintf(&b, "\nReproduce: `bench/engine/run.sh` (or `go run ./bench/engine -rounds %d -threads %d -dtype %s%s` once the assets exist). Total run time %.0fs.\n",
		*rounds, *threads, *dtype, flags, time.Since(start).Seconds())

	fmt.Print("\n" + b.String())
	if *out != "" {
		if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func median[T any](xs []T, f func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func minOthers(res map[string][]sample) float64 {
	m := 100.0
	for _, ss := range res {
		m = min(m, median(ss, func(s sample) float64 { return s.others }))
	}
	return m
}

func maxOthers(res map[string][]sample) float64 {
	m := 0.0
	for _, ss := range res {
		m = max(m, median(ss, func(s sample) float64 { return s.others }))
	}
	return m
}

func readLoadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// ---------------------------------------------------------------- RSS child

type rssResult struct {
	AfterLoadMB  float64 `json:"afterLoadMB"`
	PeakDecodeMB float64 `json:"peakDecodeMB"`
	PeakLifeMB   float64 `json:"peakLifeMB"`
	WeightsMB    float64 `json:"weightsMB"`
	PackedMB     float64 `json:"packedMB"`
	KVMB         float64 `json:"kvMB"`
	KVShared     int     `json:"kvShared"` // the prompt's positions the samples share
	Note         string  `json:"note"`
}

func childRSS(modelDir string, q model.Quantization, threads, ctx, newTok, n int) (*rssResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "rss", "-model", modelDir, "-quantize", string(q), "-ctx", strconv.Itoa(ctx), "-new", strconv.Itoa(newTok), "-n", strconv.Itoa(n))
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(threads))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var r rssResult
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("rss child: %q: %w", out, err)
	}
	return &r, nil
}

// mb converts bytes to MiB (the tables' "MB").
func mb(b int64) float64 { return float64(b) / (1 << 20) }

// loadModel loads the model folder dir, quantized as quantize says.
func loadModel(dir, quantize string) (*model.Model, error) {
	q, err := model.ParseQuantization(quantize)
	if err != nil {
		return nil, err
	}
	return model.LoadWith(context.Background(), dir, model.LoadOptions{Quantize: q})
}

func runRSS(args []string) error {
	fs := flag.NewFlagSet("rss", flag.ExitOnError)
	dir := fs.String("model", "", "model folder")
	quantize := fs.String("quantize", "", "load the weights quantized (q8 or q4)")
	ctx := fs.Int("ctx", 1024, "context length reached by every sequence")
	newTok := fs.Int("new", 64, "tokens to decode")
	n := fs.Int("n", 8, "sequences")
	fs.Parse(args)
	m, err := loadModel(*dir, *quantize)
	if err != nil {
		return err
	}
	prompt, err := promptTokens(*dir, *ctx-*newTok)
	if err != nil {
		return err
	}
	// Pack every weight now, as the first forward pass would, so the
	// packing's transient garbage is not counted against decoding.
	weights, packed, _ := prepack(m)
	runtime.GC()
	debug.FreeOSMemory()
	r := rssResult{AfterLoadMB: mb(procstat.Bytes("VmRSS")), WeightsMB: float64(weights) / (1 << 20), PackedMB: float64(packed) / (1 << 20)}
	// The first sample's cache holds every position; the others share the
	// prompt's whole blocks with it (KVCache.Fork) and hold the rest.
	shared := len(prompt) / model.ForkBlock * model.ForkBlock
	rows := *ctx + (*n-1)*(*ctx-shared) // the positions the group's caches hold
	r.KVShared = shared
	r.KVMB = float64(rows*m.Config.NumLayers*2*m.Config.KVDim()*4) / (1 << 20)
	r.PeakLifeMB = mb(procstat.Bytes("VmHWM"))
	// Reset the high-water mark to the current RSS (Linux ≥ 4.0), so the
	// peak below is the decoding's.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		r.Note = " (could not reset VmHWM: " + err.Error() + "; the decode peak includes loading)"
	}
	b := generate.NewBatcher(m, generate.BatcherOptions{})
	defer b.Close()
	res, err := b.Generate(context.Background(), generate.Request{
		Prompt: prompt, MaxTokens: *newTok, Seed: 1,
		Sampling: generate.SamplingParams{Temperature: 1},
	}, *n, nil)
	if err != nil {
		return err
	}
	for _, x := range res {
		if len(x.Tokens) != *newTok {
			return fmt.Errorf("sequence finished after %d tokens", len(x.Tokens))
		}
	}
	r.PeakDecodeMB = mb(procstat.Bytes("VmHWM"))
	r.PeakLifeMB = max(r.PeakLifeMB, r.PeakDecodeMB)
	return json.NewEncoder(os.Stdout).Encode(r)
}

// prepack builds the packed copy of every weight matrix (what the first
// forward pass does lazily) and returns the bytes of the stored weights and
// of the packed copies.
func prepack(m *model.Model) (weights, packed int, read readPerToken) {
	// Each matrix with the fraction of it one token's decoding reads: all
	// of it, or an expert's k/E (routing spreads tokens over the experts).
	type matShare struct {
		w     *kernels.Mat
		share float64
	}
	var mats []matShare
	add := func(share float64, ws ...*kernels.Mat) {
		for _, w := range ws {
			if w != nil {
				mats = append(mats, matShare{w, share})
			}
		}
	}
	add(1, m.W.LMHead)
	cfg := m.Config
	for i := range m.W.Layers {
		l := &m.W.Layers[i]
		add(1, l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down, l.Router)
		for _, e := range l.Experts {
			add(float64(cfg.NumExpertsPerTok)/float64(cfg.NumExperts), e.Gate, e.Up, e.Down)
		}
	}
	if m.W.Embed != m.W.LMHead {
		add(0, m.W.Embed) // one row a token
	}
	for _, ms := range mats {
		w := ms.w
		size := 2 // bf16/f16: packing releases the stored copy (U16)
		if w.DType == kernels.F32 {
			size = 4
		}
		weights += size * w.Rows * w.Cols
		w.Prepack()
		packed += w.PackedBytes()
		read.bytes += ms.share * float64(w.LinearBytes())
		read.params += ms.share * float64(w.Rows*w.Cols)
	}
	read.headParams = float64(m.W.LMHead.Rows * m.W.LMHead.Cols)
	return weights, packed, read
}

// readPerToken is what decoding one token reads of the weights (packed
// bytes) and multiplies (weights, two flops each): all of a dense model's
// but the embedding, k/E of a mixture's experts.
type readPerToken struct {
	bytes, params float64
	// headParams are the LM head's: a prompt's tokens but its last need
	// no logits, so prefill multiplies by the rest.
	headParams float64
}

// ---------------------------------------------------------------- profile

func runProfile(args []string, log func(string, ...any)) error {
	fs := flag.NewFlagSet("profile", flag.ExitOnError)
	dir := fs.String("model", "", "model folder")
	kind := fs.String("kind", "single", "single (1-sequence decode steps), generate (one greedy generate.Generate request: sampling and logprobs included, as the benchmark's decode row), group (n sequences' decode steps), batcher (the Batcher generating n samples: sampling included) or prefill (prompt forward passes)")
	tokens := fs.Int("tokens", 64, "decode steps")
	promptLen := fs.Int("prompt", 512, "prompt tokens")
	n := fs.Int("n", 8, "group size")
	outPath := fs.String("o", "cpu.pprof", "CPU profile output")
	quantize := fs.String("quantize", "", "load the weights quantized (q8 or q4)")
	fs.Parse(args)
	m, err := loadModel(*dir, *quantize)
	if err != nil {
		return err
	}
	prompt, err := promptTokens(*dir, *promptLen)
	if err != nil {
		return err
	}
	if _, err := oursSingle(m, prompt[:16], 2, 0); err != nil { // pack weights
		return err
	}
	var ws model.Workspace
	if *kind == "generate" {
		f, err := os.Create(*outPath)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		s, err := oursSingle(m, prompt, *tokens, 0)
		pprof.StopCPUProfile()
		if err != nil {
			return err
		}
		log("generate: prefill %.1f tok/s, decode %d tokens at %.2f tok/s", float64(len(prompt))/(s.PrefillMs/1e3),
			s.Decoded, float64(s.Decoded)/(s.DecodeMs/1e3))
		return nil
	}
	if *kind == "batcher" {
		f, err := os.Create(*outPath)
		if err != nil {
			return err
		}
		defer f.Close()
		b := generate.NewBatcher(m, generate.BatcherOptions{})
		pprof.StartCPUProfile(f)
		r, err := oursGroup(b, prompt, *n, *tokens, 1, 0)
		pprof.StopCPUProfile()
		if err != nil {
			return err
		}
		log("batcher: %d × %d tokens: %.2f tok/s aggregate, decode phase %.2f tok/s", *n, *tokens,
			float64(r.Tokens)/r.TotalMs*1e3, float64(r.Decoded)/r.DecodeMs*1e3)
		return nil
	}
	if *kind == "prefill" {
		f, err := os.Create(*outPath)
		if err != nil {
			return err
		}
		defer f.Close()
		cache := m.NewKVCache(len(prompt))
		pprof.StartCPUProfile(f)
		t0 := time.Now()
		for range *tokens {
			cache.Truncate(0)
			if _, err := m.Forward(&ws, prompt, []model.Segment{{Cache: cache, N: len(prompt)}}); err != nil {
				return err
			}
		}
		el := time.Since(t0)
		pprof.StopCPUProfile()
		log("prefill: %d × %d tokens in %.2fs: %.1f tok/s", *tokens, len(prompt), el.Seconds(), float64(*tokens*len(prompt))/el.Seconds())
		return nil
	}
	// Prefill outside the profile, then profile the decode steps only.
	cache := m.NewKVCache(len(prompt) + *tokens + 1)
	caches := []*model.KVCache{cache}
	if _, err := m.Forward(&ws, prompt, []model.Segment{{Cache: cache, N: len(prompt)}}); err != nil {
		return err
	}
	if *kind == "group" {
		for i := 1; i < *n; i++ {
			c, err := cache.Fork(cache.Len, cache.Cap)
			if err != nil {
				return err
			}
			caches = append(caches, c)
		}
	}
	f, err := os.Create(*outPath)
	if err != nil {
		return err
	}
	defer f.Close()
	V, C := m.Config.VocabSize, m.Config.HiddenSize
	logits := make([]float32, len(caches)*V)
	toks := make([]int, len(caches))
	segs := make([]model.Segment, len(caches))
	var fwd, head time.Duration
	pprof.StartCPUProfile(f)
	t0 := time.Now()
	for s := 0; s < *tokens; s++ {
		for i, c := range caches {
			segs[i] = model.Segment{Cache: c, N: 1}
			toks[i] = (toks[i]*31 + 7 + s) % 1000
		}
		ta := time.Now()
		h, err := m.Forward(&ws, toks, segs)
		if err != nil {
			return err
		}
		tb := time.Now()
		m.Logits(logits, h[:len(caches)*C], len(caches))
		fwd += tb.Sub(ta)
		head += time.Since(tb)
	}
	el := time.Since(t0)
	pprof.StopCPUProfile()
	log("%s: %d steps × %d sequences in %.2fs: %.2f tok/s; forward %.1f ms/step, LM head %.1f ms/step",
		*kind, *tokens, len(caches), el.Seconds(), float64(*tokens*len(caches))/el.Seconds(),
		ms(fwd)/float64(*tokens), ms(head)/float64(*tokens))
	return nil
}
