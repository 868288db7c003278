// Package native hosts one trainable model on this project's CPU engine
// (the host.Model implementation): the base model folder, a LoRA adapter per
// checkpoint step, generation that returns the exact sampled token ids and
// logprobs, and training that turns trajectory groups into the next
// checkpoint. It knows nothing about HTTP.
//
// During a training step inference keeps serving the previous steps: the
// trainer works on its own copy of the adapter and the new step appears
// once its checkpoint is on disk.
package native

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/artgo/art"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/hfmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/host"
	"github.com/artgo/art/internal/turn"
	"github.com/artgo/art/store"
)

// Options configure Open.
type Options struct {
	BaseModel string // Hugging Face model folder (config, weights, tokenizer files)
	Name      string // served as Name@step
	Project   string
	Path      string         // store root; "" means ".art"
	LoRA      art.LoRAConfig // used when the model has no checkpoint yet
	Seed      uint64         // initialises a new adapter
	// MaxConcurrent bounds the sequences generated at once, all decoded in
	// shared forward passes (0: DefaultMaxConcurrent).
	MaxConcurrent int
	// PrefixCache bounds the bytes of finished answers' keys and values
	// kept so that later prompts starting with one (the next turn of an
	// agent's conversation, another rollout of the same scenario) reuse
	// them instead of prefilling them again (0: DefaultPrefixCache; < 0:
	// none). Prompts of requests running at the same time share their
	// common start whatever this is. Reuse gives the same bits as a fresh
	// prefill; usage.prompt_tokens_details.cached_tokens counts it.
	PrefixCache int64
	// RecomputeActivations trades about a third more training compute for
	// far less activation memory (see train.Trainer.RecomputeActivations).
	RecomputeActivations bool
	// AnswerMemory bounds the sampled ids of recent answers kept to prompt
	// later turns with exactly (0: DefaultAnswerMemory).
	AnswerMemory int
	// Quantize stores the frozen base weights quantized: "q8" (blockwise
	// 8-bit, as GGML's Q8_0), "q4" (blockwise 4-bit, as GGML's Q4_0), or
	// "" / "none" to keep the checkpoint's dtype. Sampling and training
	// read the same quantized weights, so training stays exactly
	// on-policy. Each checkpoint records the setting it was trained with
	// (train.InfoFile); resuming it with another one works but logs a
	// warning: the adapter was fitted to other base weights, so it is
	// slightly off-policy.
	Quantize string
	Logger   *slog.Logger
}

// Host is one trainable model served by the native engine. Its methods
// are safe for concurrent use.
type Host struct {
	opt     Options
	quant   model.Quantization // how the base is stored (Options.Quantize)
	log     *slog.Logger
	folder  *hfmodel.Folder
	model   *model.Model
	tok     *tokenizer.Tokenizer
	prompts *train.Tokenizer // builds chat prompts as the trainer splices histories
	answers *answers         // recent answers' sampled ids, for later turns' prompts
	dir     *store.ModelDir
	slots   chan struct{} // sequences in flight
	admit   chan struct{} // held by the one request gathering its slots
	batcher *generate.Batcher

	mu       sync.Mutex // guards adapters, latest and loraConfig
	adapters map[int]*lora.Adapter
	latest   int
	// loraConfig is the trainer's adapter's, for Info: Info reads it
	// while a restore may replace the trainer's adapter.
	loraConfig lora.Config

	// training is held by the one training step (or restore, or deletion)
	// at a time and guards trainer. A channel, not a mutex: a call queued
	// behind a step that may run for minutes gives up when its context ends.
	training turn.Turn
	trainer  *train.Trainer
	skips    skipWarnings

	structured structured // structured outputs: the grammar vocabulary and compiled schemas
}

var _ host.Model = (*Host)(nil)

// Open loads the base model and resumes the latest checkpoint of
// Project/Name, creating step 0 (the untrained adapter) if there is none.
func Open(ctx context.Context, opt Options) (*Host, error) {
	if err := store.ValidateName(opt.Name); err != nil {
		return nil, fmt.Errorf("native: model name: %w", err)
	}
	if err := store.ValidateName(opt.Project); err != nil {
		return nil, fmt.Errorf("native: project: %w", err)
	}
	if err := opt.LoRA.Validate(); err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	if opt.MaxConcurrent < 0 || opt.MaxConcurrent > MaxConcurrentLimit {
		return nil, fmt.Errorf("native: MaxConcurrent = %d: must be in [0, %d] (0 means %d)", opt.MaxConcurrent, MaxConcurrentLimit, DefaultMaxConcurrent)
	}
	if opt.AnswerMemory < 0 {
		return nil, fmt.Errorf("native: AnswerMemory = %d: must be >= 0 (0 means %d)", opt.AnswerMemory, DefaultAnswerMemory)
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	quant, err := model.ParseQuantization(opt.Quantize)
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	h := &Host{opt: opt, quant: quant, log: log, adapters: map[int]*lora.Adapter{}}
	if h.folder, err = hfmodel.OpenWith(ctx, opt.BaseModel, model.LoadOptions{Quantize: quant}); err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	h.model, h.tok = h.folder.Model, h.folder.Tokenizer
	// Loading cannot be stopped inside; a caller that gave up meanwhile
	// (art serve at Ctrl-C) gets nothing written for it.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("native: load %s: %w", opt.BaseModel, err)
	}
	if quant != model.NoQuantization {
		log.Info("native: base weights quantized", "quantize", string(quant), "base_model", opt.BaseModel)
	}
	unit, why := kernels.ActiveUnit()
	level := slog.LevelInfo
	if env := os.Getenv(kernels.UnitEnv); env != "" {
		if asked, auto, err := kernels.ParseUnit(env); err != nil || !auto && asked != unit {
			level = slog.LevelWarn // $ART_MATMUL_UNIT asked for what cannot run here
		}
	}
	log.Log(ctx, level, "native: weight products", "matmul_unit", unit.String(), "chosen", why)
	h.prompts = h.folder.TrainTokenizer()
	memory := opt.AnswerMemory
	if memory <= 0 {
		memory = DefaultAnswerMemory
	}
	h.answers = newAnswers(memory)
	// Pack the weights now, layer by layer, so the stored copies are gone
	// before KV caches and training activations are allocated.
	h.model.W.Prepack()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("native: load %s: %w", opt.BaseModel, err)
	}
	n := opt.MaxConcurrent
	if n <= 0 {
		n = DefaultMaxConcurrent
	}
	h.slots, h.admit = make(chan struct{}, n), make(chan struct{}, 1)
	h.training = turn.New()
	if h.dir, err = store.New(opt.Path, opt.Project, opt.Name); err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	if err := h.resume(ctx); err != nil {
		return nil, err
	}
	keep := opt.PrefixCache
	if keep == 0 {
		keep = DefaultPrefixCache
	}
	// Each step's adapter is an immutable copy (h.adapters), so kept keys
	// and values are matched to the adapter that computed them.
	h.batcher = generate.NewBatcher(h.model, generate.BatcherOptions{MaxSequences: n, KeepPrefixes: max(keep, 0)})
	return h, nil
}

// DefaultMaxConcurrent is the number of sequences generated at once when
// Options.MaxConcurrent is 0; they share forward passes.
const DefaultMaxConcurrent = 64

// MaxConcurrentLimit bounds Options.MaxConcurrent: each sequence decoding
// holds a KV cache, and a forward pass over more rows than this is past
// what one machine's cores turn into speed.
const MaxConcurrentLimit = 4096

// DefaultPrefixCache is the memory kept for finished answers' keys and
// values when Options.PrefixCache is 0: some 21,000 positions of a
// Qwen2.5-0.5B, 4,600 of a 7B.
const DefaultPrefixCache = 512 << 20

// Close stops the generation loop; requests in flight fail.
func (h *Host) Close() error {
	h.batcher.Close()
	return nil
}

// resume loads the latest checkpoint into the trainer, creating step 0.
func (h *Host) resume(ctx context.Context) error {
	if err := os.MkdirAll(h.dir.Path(), 0o755); err != nil {
		return fmt.Errorf("native: %w", err)
	}
	// A process killed while saving or deleting a checkpoint leaves hidden
	// folders behind; this host is the model's only trainer.
	if removed, err := h.dir.RemoveLeftovers(); err != nil {
		return fmt.Errorf("native: %w", err)
	} else if len(removed) > 0 {
		h.log.Warn("native: removed what an interrupted checkpoint write left behind", "model", h.opt.Name, "removed", removed)
	}
	steps, err := h.dir.ListCheckpoints()
	if err != nil {
		return fmt.Errorf("native: %w", err)
	}
	var a *lora.Adapter
	var opt *train.AdamW
	if len(steps) == 0 {
		if a, err = lora.New(h.model.Config, loraConfig(h.opt.LoRA), h.opt.Seed); err != nil {
			return fmt.Errorf("native: %w", err)
		}
		opt = train.NewAdamW(len(a.Params()))
		if err := train.SaveCheckpoint(h.dir.CheckpointDir(0), a, opt, h.checkpointInfo()); err != nil {
			return fmt.Errorf("native: create step 0: %w", err)
		}
		h.log.Info("native: created the untrained adapter as step 0", "model", h.opt.Name,
			"lora_params", len(a.Params()), "lora_mib", len(a.Params())*4>>20)
	} else {
		h.latest = steps[len(steps)-1]
		if a, opt, err = train.LoadCheckpoint(h.dir.CheckpointDir(h.latest), h.model.Config); err != nil {
			return fmt.Errorf("native: resume step %d: %w", h.latest, err)
		}
		if err := h.checkQuantization(h.latest); err != nil {
			return err
		}
		h.log.Info("native: resumed", "model", h.opt.Name, "step", h.latest)
	}
	h.adapters[h.latest] = a.Clone()
	h.loraConfig = a.Config
	h.trainer = &train.Trainer{Model: h.model, Adapter: a, Opt: opt, Log: h.log,
		Tokenizer: h.folder.TrainTokenizer(), RecomputeActivations: h.opt.RecomputeActivations}
	return nil
}

// checkpointInfo is what this host's checkpoints record.
func (h *Host) checkpointInfo() train.CheckpointInfo {
	return train.CheckpointInfo{BaseModel: h.opt.BaseModel, Quantization: h.quant}
}

// checkQuantization warns when the checkpoint at step was trained on a
// base stored otherwise than this host's (say q8, now q4): allowed, but
// the adapter was fitted to slightly different base weights.
func (h *Host) checkQuantization(step int) error {
	trained, recorded, err := train.ReadCheckpointInfo(h.dir.CheckpointDir(step))
	if err != nil {
		return fmt.Errorf("native: step %d: %w", step, err)
	}
	if recorded && trained != h.quant {
		h.log.Warn("native: this checkpoint was trained on the base quantized otherwise; sampling and training it now are slightly off-policy (the adapter was fitted to other base weights). Load the base with the quantization it was trained with to stay exactly on-policy",
			"model", h.opt.Name, "step", step, "trained_quantize", quantName(trained), "quantize", quantName(h.quant))
	}
	return nil
}

// quantName is q as --quantize spells it, "none" for none.
func quantName(q model.Quantization) string {
	if q == model.NoQuantization {
		return "none"
	}
	return string(q)
}

// Info describes the hosted model; LoRA is the adapter's own configuration
// (a resumed checkpoint keeps the one it was created with).
func (h *Host) Info() host.Info {
	h.mu.Lock()
	cfg := h.loraConfig
	h.mu.Unlock()
	return host.Info{Name: h.opt.Name, Project: h.opt.Project, BaseModel: h.opt.BaseModel, Path: h.opt.Path,
		MaxModelLen: h.model.Config.MaxPositions, LoRA: sdkLoRAConfig(cfg),
		ToolFormat: toolFormat(h.folder.ToolFormat)}
}

// Load returns the sequences being generated and the most generated at once.
func (h *Host) Load() (running, capacity int) { return len(h.slots), cap(h.slots) }

// PrefixCacheBytes is the memory of finished answers' keys and values kept
// for later prompts (Options.PrefixCache).
func (h *Host) PrefixCacheBytes() int64 { return h.batcher.KeptPrefixBytes() }

// Step returns the latest checkpoint step.
func (h *Host) Step() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest
}

// Checkpoints lists the steps with a checkpoint on disk, oldest first.
func (h *Host) Checkpoints() ([]int, error) {
	steps, err := h.dir.ListCheckpoints()
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	return steps, nil
}

// Resolve maps a requested model id to a checkpoint step. "name@N" is step
// N; a bare "name" means the latest step. Anything else, or a step with no
// checkpoint, wraps host.ErrUnknownModel with the list of what is served.
func (h *Host) Resolve(id string) (int, error) {
	name, stepStr, hasStep := strings.Cut(id, "@")
	if name != h.opt.Name {
		return 0, h.unknown(id)
	}
	if !hasStep {
		return h.Step(), nil
	}
	step, err := strconv.Atoi(stepStr)
	if err != nil || step < 0 {
		return 0, h.unknown(id)
	}
	if _, err := os.Stat(h.dir.CheckpointDir(step)); err != nil {
		return 0, h.unknown(id)
	}
	return step, nil
}

func (h *Host) unknown(id string) error {
	served, _ := host.ModelIDs(h)
	return fmt.Errorf("%w %q; served: %s (a bare %q means the latest step)", host.ErrUnknownModel, id, strings.Join(served, ", "), h.opt.Name)
}

// adapter returns the adapter of step, loading it from its checkpoint.
func (h *Host) adapter(step int) (*lora.Adapter, error) {
	h.mu.Lock()
	a, ok := h.adapters[step]
	h.mu.Unlock()
	if ok {
		return a, nil
	}
	a, err := lora.Load(h.dir.CheckpointDir(step), h.model.Config)
	if err != nil {
		return nil, fmt.Errorf("native: load step %d: %w", step, err)
	}
	h.mu.Lock()
	if b, ok := h.adapters[step]; ok {
		h.mu.Unlock()
		return b, nil
	}
	h.adapters[step] = a
	evicted := h.evictLocked()
	h.mu.Unlock()
	h.forget(evicted)
	return a, nil
}

// maxCachedAdapters bounds the adapters kept in memory; the latest is
// always kept, older ones are reloaded from disk on demand.
const maxCachedAdapters = 8

// evictLocked drops the oldest adapters beyond maxCachedAdapters and
// returns them; the caller passes them to forget once h.mu is unlocked.
func (h *Host) evictLocked() (evicted []*lora.Adapter) {
	if len(h.adapters) <= maxCachedAdapters {
		return nil
	}
	var steps []int
	for st := range h.adapters {
		if st != h.latest {
			steps = append(steps, st)
		}
	}
	sort.Ints(steps)
	for _, st := range steps[:len(h.adapters)-maxCachedAdapters] {
		evicted = append(evicted, h.adapters[st])
		delete(h.adapters, st)
	}
	return evicted
}

// forget drops the batcher's kept keys and values of adapters no longer
// held: they would keep the adapters in memory.
func (h *Host) forget(adapters []*lora.Adapter) {
	for _, a := range adapters {
		h.batcher.ForgetPrefixes(a)
	}
}

// DeleteCheckpoints removes every checkpoint not in keep, except the latest.
func (h *Host) DeleteCheckpoints(keep []int) error {
	// No context here: the wait is bounded by the step in progress.
	unlock, _ := h.lockTraining(context.Background())
	defer unlock()
	latest := h.Step()
	if !slices.Contains(keep, latest) {
		keep = append(slices.Clone(keep), latest)
	}
	if err := h.dir.DeleteCheckpoints(keep); err != nil {
		return fmt.Errorf("native: %w", err)
	}
	h.mu.Lock()
	var dropped []*lora.Adapter
	for st, a := range h.adapters {
		if !slices.Contains(keep, st) {
			dropped = append(dropped, a)
			delete(h.adapters, st)
		}
	}
	h.mu.Unlock()
	h.forget(dropped)
	return nil
}

// lockTraining waits for the turn to train (or restore or delete
// checkpoints), or for ctx to end, and returns the function that gives the
// turn back.
func (h *Host) lockTraining(ctx context.Context) (unlock func(), err error) {
	unlock, err = h.training.Take(ctx)
	if err != nil {
		return nil, fmt.Errorf("waiting for the training step in progress: %w", err)
	}
	return unlock, nil
}

// CheckpointPath returns the folder of a step's checkpoint.
func (h *Host) CheckpointPath(step int) string { return filepath.Clean(h.dir.CheckpointDir(step)) }
