// Package external serves a trainable model's inference from an external
// engine — vLLM, SGLang or llama.cpp's llama-server — while another
// host.Model (host/native on this machine) trains it and keeps its
// checkpoints. It is a host.Model, so the server and the backends use it
// unchanged:
//
//	trainer, _ := native.Open(ctx, native.Options{...})
//	m, _ := external.Open(ctx, trainer, external.Options{Dialect: external.VLLM, URL: "http://gpu-box:8000"})
//	srv := server.New(server.Config{}, m)
//
// Every chat request is forwarded in the engine's dialect with logprobs and
// sampled token ids switched on, so every choice stays trainable with the
// exact ids the engine sampled; an answer without them is an error, never a
// choice re-tokenised from text. Checkpoints reach the engine as LoRA
// adapters named "name@step": vLLM and SGLang load them at run time (after
// each training step, and on the first request for an older step) and
// unload them when their checkpoints are deleted. llama-server cannot load
// an adapter at run time: it serves the one it was started with (--lora),
// each new step is also written as a GGUF LoRA beside its checkpoint, and a
// request for another step fails saying how to restart llama-server.
//
// Every call to the engine is bounded (Options.RequestTimeout,
// Options.AdapterTimeout), and its failures are told apart: the engine
// cannot be reached (ErrEngineUnavailable), is out of memory (ErrEngineOOM),
// rejects an adapter (ErrAdapterRejected), or answers without token ids
// (ErrNoTokenIDs). A request the engine finds invalid is a
// *host.RequestError carrying the engine's message.
package external

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/engine/gguf"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/host"
	"github.com/artgo/art/internal/httpurl"
	"github.com/artgo/art/internal/turn"
)

// Dialect is the API an engine speaks beyond OpenAI's chat completions.
type Dialect int

const (
	// VLLM: "logprobs" + "return_token_ids" (choices carry token_ids, the
	// response prompt_token_ids); adapters through POST
	// /v1/load_lora_adapter and /v1/unload_lora_adapter (the server needs
	// --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True).
	VLLM Dialect = iota + 1
	// SGLang: "logprobs" + "return_prompt_token_ids", sampled ids as each
	// logprobs entry's token_id; adapters through POST /load_lora_adapter
	// and /unload_lora_adapter, chosen per request by "lora_path".
	SGLang
	// LlamaCpp: llama.cpp's llama-server; sampled ids as each logprobs
	// entry's "id"; one adapter, given at start-up with --lora.
	LlamaCpp
)

// ParseDialect maps "vllm", "sglang" or "llamacpp" to a Dialect.
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(s) {
	case "vllm":
		return VLLM, nil
	case "sglang":
		return SGLang, nil
	case "llamacpp", "llama.cpp", "llama-server":
		return LlamaCpp, nil
	}
	return 0, fmt.Errorf("external: unknown inference engine %q (want vllm, sglang or llamacpp)", s)
}

func (d Dialect) String() string {
	switch d {
	case VLLM:
		return "vLLM"
	case SGLang:
		return "SGLang"
	case LlamaCpp:
		return "llama.cpp"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// Errors the engine's failures wrap.
var (
	ErrEngineUnavailable = errors.New("inference engine unavailable")
	ErrEngineOOM         = errors.New("inference engine out of memory")
	ErrAdapterRejected   = errors.New("inference engine rejected the adapter")
	ErrNoTokenIDs        = errors.New("inference engine returned no sampled token ids")
	ErrStepNotServed     = errors.New("step not served by the inference engine")
)

// Defaults of Options.
const (
	DefaultRequestTimeout = 10 * time.Minute
	DefaultAdapterTimeout = 2 * time.Minute
	DefaultMaxConcurrent  = 256
)

// Options configure Open.
type Options struct {
	Dialect Dialect
	// URL is the engine's base URL, without /v1 (e.g. http://gpu:8000).
	URL    string
	APIKey string // sent as "Authorization: Bearer KEY" if set
	// RequestTimeout bounds each chat request to the engine (0:
	// DefaultRequestTimeout); AdapterTimeout bounds each adapter load or
	// unload and the start-up check (0: DefaultAdapterTimeout).
	RequestTimeout, AdapterTimeout time.Duration
	// MaxConcurrent bounds the requests in flight to the engine (0:
	// DefaultMaxConcurrent); the rest wait.
	MaxConcurrent int
	// EngineDataDir is where the engine sees the trainer's store root (a
	// shared volume mounted elsewhere); "" means the same path as here.
	EngineDataDir string
	// LlamaCppStep is the step whose adapter llama-server was started with
	// (--lora FILE); 0, the untrained adapter, needs no --lora.
	LlamaCppStep int
	// HTTPClient sends the requests (nil: a client with no overall timeout;
	// every request has its own deadline).
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Host serves inference from the engine and trains with the trainer it
// wraps. Its methods are safe for concurrent use.
type Host struct {
	host.Model // the trainer: training, checkpoints, Resolve, Info
	opt        Options
	log        *slog.Logger
	client     *http.Client
	slots      chan struct{}

	mu     sync.Mutex // guards loaded
	loaded map[int]bool
	// loading is held by the one adapter load or unload at a time. It is
	// a channel, not a mutex, so that a request waiting for another's load
	// (which may take AdapterTimeout, and others may be queued) gives up
	// when its own context ends.
	loading turn.Turn
}

var _ host.Model = (*Host)(nil)

// Open checks that the engine answers and, for vLLM and SGLang, loads the
// trainer's latest checkpoint into it. It does not close trainer on error.
func Open(ctx context.Context, trainer host.Model, opt Options) (*Host, error) {
	if opt.Dialect < VLLM || opt.Dialect > LlamaCpp {
		return nil, fmt.Errorf("external: no engine dialect set (want VLLM, SGLang or LlamaCpp)")
	}
	if opt.URL == "" {
		return nil, fmt.Errorf("external: %s needs the engine's URL", opt.Dialect)
	}
	base, err := httpurl.Base(opt.URL, "http://gpu-box:8000")
	if err != nil {
		return nil, fmt.Errorf("external: the %s engine's %w", opt.Dialect, err)
	}
	opt.URL = base
	if opt.RequestTimeout <= 0 {
		opt.RequestTimeout = DefaultRequestTimeout
	}
	if opt.AdapterTimeout <= 0 {
		opt.AdapterTimeout = DefaultAdapterTimeout
	}
	if opt.MaxConcurrent <= 0 {
		opt.MaxConcurrent = DefaultMaxConcurrent
	}
	h := &Host{Model: trainer, opt: opt, log: opt.Logger, client: opt.HTTPClient,
		slots: make(chan struct{}, opt.MaxConcurrent), loaded: map[int]bool{}, loading: turn.New()}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.client == nil {
		h.client = &http.Client{}
	}
	if err := h.ping(ctx); err != nil {
		return nil, err
	}
	if opt.Dialect == LlamaCpp {
		if _, err := trainer.Resolve(trainer.Info().ModelID(opt.LlamaCppStep)); err != nil {
			return nil, fmt.Errorf("external: llama-server's adapter is step %d: %w", opt.LlamaCppStep, err)
		}
		return h, nil
	}
	if err := h.ensureLoaded(ctx, trainer.Step()); err != nil {
		return nil, err
	}
	return h, nil
}

// Load returns the requests in flight to the engine and the most sent at
// once.
func (h *Host) Load() (running, capacity int) { return len(h.slots), cap(h.slots) }

// Train trains with the trainer, then hot-loads the new step into the
// engine. A load failure does not undo the step (its checkpoint is saved):
// it is logged, and the first request for the step tries again and
// reports the engine's error.
func (h *Host) Train(ctx context.Context, groups []art.TrajectoryGroup, cfg art.TrainConfig, progress func(done, total int)) (art.TrainResult, error) {
	res, err := h.Model.Train(ctx, groups, cfg, progress)
	if err == nil {
		h.publish(ctx, res.Step)
	}
	return res, err
}

// TrainSFT fine-tunes with the trainer, then hot-loads the new step as
// Train does.
func (h *Host) TrainSFT(ctx context.Context, trajectories []art.Trajectory, cfg art.TrainSFTConfig, progress func(done, total int)) (art.TrainResult, error) {
	res, err := h.Model.TrainSFT(ctx, trajectories, cfg, progress)
	if err == nil {
		h.publish(ctx, res.Step)
	}
	return res, err
}

// publish makes a new step available to the engine: loaded into vLLM or
// SGLang, written as a GGUF LoRA for llama.cpp.
func (h *Host) publish(ctx context.Context, step int) {
	if h.opt.Dialect == LlamaCpp {
		path, err := h.writeGGUF(step)
		if err != nil {
			h.log.Error("external: could not write the step's GGUF LoRA for llama-server", "step", step, "err", err)
			return
		}
		h.log.Warn("external: llama-server cannot load an adapter at run time; restart it with --lora to serve the new step",
			"step", step, "lora", path, "served_step", h.opt.LlamaCppStep)
		return
	}
	if err := h.ensureLoaded(context.WithoutCancel(ctx), step); err != nil {
		h.log.Error("external: the engine did not load the new step; requests for it will try again", "step", step, "err", err)
	}
}

// GGUFLoRAFile is the name of the GGUF LoRA written beside a checkpoint
// for llama.cpp.
const GGUFLoRAFile = "adapter.gguf"

// writeGGUF writes step's adapter as a GGUF LoRA in its checkpoint folder.
func (h *Host) writeGGUF(step int) (string, error) {
	info := h.Info()
	cfg, err := model.ReadConfig(info.BaseModel)
	if err != nil {
		return "", err
	}
	dir := h.CheckpointPath(step)
	a, err := lora.Load(dir, cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, GGUFLoRAFile)
	return path, gguf.ExportLoRAFile(path, a, cfg)
}

// DeleteCheckpoints deletes checkpoints with the trainer and unloads their
// adapters from the engine.
func (h *Host) DeleteCheckpoints(keep []int) error {
	if err := h.Model.DeleteCheckpoints(keep); err != nil {
		return err
	}
	steps, err := h.Checkpoints()
	if err != nil {
		return err
	}
	h.mu.Lock()
	var gone []int
	for st := range h.loaded {
		if !slices.Contains(steps, st) {
			gone = append(gone, st)
		}
	}
	h.mu.Unlock()
	slices.Sort(gone)
	var errs []error
	for _, st := range gone {
		if err := h.unload(context.Background(), st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// enginePath is where the engine finds a checkpoint folder.
func (h *Host) enginePath(step int) (string, error) {
	dir, err := filepath.Abs(h.CheckpointPath(step))
	if err != nil {
		return "", fmt.Errorf("external: %w", err)
	}
	if h.opt.EngineDataDir == "" {
		return dir, nil
	}
	root := h.Info().Path
	if root == "" {
		root = ".art"
	}
	if root, err = filepath.Abs(root); err != nil {
		return "", fmt.Errorf("external: %w", err)
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("external: checkpoint %s is not under the store root %s", dir, root)
	}
	return filepath.ToSlash(filepath.Join(h.opt.EngineDataDir, rel)), nil
}

// ensureLoaded loads step's adapter into the engine unless it is loaded.
func (h *Host) ensureLoaded(ctx context.Context, step int) error {
	h.mu.Lock()
	ok := h.loaded[step]
	h.mu.Unlock()
	if ok {
		return nil
	}
	unlock, err := h.lockLoading(ctx)
	if err != nil {
		return fmt.Errorf("external: load step %d: %w", step, err)
	}
	defer unlock()
	h.mu.Lock()
	ok = h.loaded[step]
	h.mu.Unlock()
	if ok {
		return nil
	}
	if _, err := os.Stat(filepath.Join(h.CheckpointPath(step), lora.ConfigFile)); err != nil {
		return fmt.Errorf("external: step %d has no adapter to load: %w", step, err)
	}
	path, err := h.enginePath(step)
	if err != nil {
		return err
	}
	name := h.Info().ModelID(step)
	if err := h.loadAdapter(ctx, name, path); err != nil {
		return err
	}
	h.mu.Lock()
	h.loaded[step] = true
	h.mu.Unlock()
	h.log.Info("external: adapter loaded", "engine", h.opt.Dialect.String(), "model", name, "path", path)
	return nil
}

// lockLoading waits for the turn to load or unload an adapter, or for ctx
// to end, and returns the function that gives the turn back.
func (h *Host) lockLoading(ctx context.Context) (unlock func(), err error) {
	unlock, err = h.loading.Take(ctx)
	if err != nil {
		return nil, fmt.Errorf("waiting for another adapter load: %w", err)
	}
	return unlock, nil
}

// unload unloads step's adapter from the engine.
func (h *Host) unload(ctx context.Context, step int) error {
	unlock, err := h.lockLoading(ctx)
	if err != nil {
		return fmt.Errorf("external: unload step %d: %w", step, err)
	}
	defer unlock()
	name := h.Info().ModelID(step)
	if err := h.unloadAdapter(ctx, name); err != nil {
		return err
	}
	h.mu.Lock()
	delete(h.loaded, step)
	h.mu.Unlock()
	h.log.Info("external: adapter unloaded", "engine", h.opt.Dialect.String(), "model", name)
	return nil
}
