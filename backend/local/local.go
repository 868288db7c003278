// Package local is an art.Backend that runs the native engine in the
// caller's process: each registered model gets a service.Service (the base
// model, its tokenizer and a LoRA adapter per checkpoint) and an
// OpenAI-compatible server on a random free loopback port, so the model's
// stock OpenAI client (TrainableModel.OpenAIClient) reaches it like any
// remote endpoint. Training runs in process, without HTTP.
//
//	b := local.New(local.Options{})
//	defer b.Close()
//	model := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "demo"}, BaseModel: "./Qwen2.5-0.5B-Instruct"}
//	if err := model.Register(ctx, b); err != nil { ... }
//
// Checkpoints live under the model's BasePath (Options.Path when the model
// has none, ".art" when neither is set), so registering the same model
// again, in this process or a later one, resumes its latest step.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/artgo/art"
	"github.com/artgo/art/host"
	"github.com/artgo/art/host/native"
	"github.com/artgo/art/internal/tracing"
	"github.com/artgo/art/internal/trainbar"
	"github.com/artgo/art/server"
)

// Options configure a Backend. The zero value is ready to use.
type Options struct {
	// Path is the store root for models whose BasePath is empty; "" means
	// ".art".
	Path string
	// Addr is where each model's server listens; "" means 127.0.0.1:0 (a
	// random free loopback port). A fixed port serves one model only.
	Addr string
	// APIKey guards the servers; "" means a random key, which the models'
	// endpoints carry.
	APIKey string
	// Seed initialises new adapters (step 0).
	Seed uint64
	// MaxConcurrent bounds the sequences generated at once per model (0:
	// the service's default).
	MaxConcurrent int
	// PrefixCache bounds the bytes of finished answers' keys and values
	// kept for later prompts that start with them, per model (0: the
	// service's default, 512 MiB; < 0: none).
	PrefixCache int64
	// RecomputeActivations trades about a third more training compute for
	// far less activation memory (long sequences, big models).
	RecomputeActivations bool
	// Quantize stores the base models' weights quantized: "q8" (blockwise
	// 8-bit), "q4" (blockwise 4-bit), or "" to keep their dtype. Sampling
	// and training use the same quantized weights, so training stays
	// exactly on-policy; a checkpoint trained with another setting resumes
	// with a warning (it is slightly off-policy).
	Quantize string
	// RequestTimeout bounds each inference request (0: the server's
	// default of 10 minutes).
	RequestTimeout time.Duration
	// Quiet turns the training progress bar off. It is off anyway when
	// ProgressWriter (nil: os.Stderr) is not a terminal.
	Quiet          bool
	ProgressWriter io.Writer
	// Logger receives the engine's and servers' logs; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Backend runs models in process. Create it with New and Close it when
// done; it is safe for concurrent use.
type Backend struct {
	opt    Options
	log    *slog.Logger
	apiKey string

	mu     sync.Mutex // guards models and closed
	models map[string]*hosted
	closed bool
}

// The backend has every optional capability of art.Backend.
var (
	_ art.Backend            = (*Backend)(nil)
	_ art.SFTTrainer         = (*Backend)(nil)
	_ art.CheckpointDeleter  = (*Backend)(nil)
	_ art.CheckpointRestorer = (*Backend)(nil)
)

// hosted is one registered model and its server.
type hosted struct {
	model     *host.Meter // trained here directly; served by srv
	srv       *server.Server
	url       string // http://127.0.0.1:port
	baseModel string
	basePath  string
	served    chan error // Serve's result
}

// New returns a Backend configured by opt.
func New(opt Options) *Backend {
	b := &Backend{opt: opt, log: opt.Logger, apiKey: opt.APIKey, models: map[string]*hosted{}}
	if b.log == nil {
		b.log = slog.Default()
	}
	if b.apiKey == "" {
		var k [16]byte
		rand.Read(k[:])
		b.apiKey = "art-local-" + hex.EncodeToString(k[:])
	}
	return b
}

func key(m *art.TrainableModel) string { return m.Project + "/" + m.Name }

// Register opens the model (loading the base model and resuming its latest
// checkpoint, or creating step 0) and starts serving it. If m.BasePath is
// empty it is set to Options.Path. Registering a model this backend already
// serves is a no-op, provided the base model, path and LoRA config are the
// same.
func (b *Backend) Register(ctx context.Context, m *art.TrainableModel) (err error) {
	ctx, span := tracing.Start(ctx, "local.register", tracing.Model.String(key(m)), attribute.String("art.base_model", m.BaseModel))
	defer func() { tracing.End(span, err) }()
	if b.opt.RequestTimeout < 0 {
		return fmt.Errorf("local: Options.RequestTimeout = %v: must be >= 0 (0 means the server's 10 minutes)", b.opt.RequestTimeout)
	}
	if m.BasePath == "" {
		m.BasePath = b.opt.Path
	}
	if h, err := b.lookup(m); err == nil {
		if filepath.Clean(h.baseModel) != filepath.Clean(m.BaseModel) || h.basePath != m.BasePath {
			return fmt.Errorf("local: model %s is already registered with base model %q under %q", key(m), h.baseModel, h.basePath)
		}
		return checkLoRA(m, h.model.Info().LoRA)
	} else if !errors.Is(err, art.ErrNotRegistered) {
		return err
	}
	nh, err := native.Open(ctx, native.Options{
		BaseModel: m.BaseModel, Name: m.Name, Project: m.Project, Path: m.BasePath,
		LoRA: m.LoRA, Seed: b.opt.Seed, MaxConcurrent: b.opt.MaxConcurrent, PrefixCache: b.opt.PrefixCache, Logger: b.log,
		RecomputeActivations: b.opt.RecomputeActivations, Quantize: b.opt.Quantize,
	})
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	if err := checkLoRA(m, nh.Info().LoRA); err != nil {
		nh.Close()
		return err
	}
	addr := b.opt.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		nh.Close()
		return fmt.Errorf("local: serve model %s: %w", key(m), err)
	}
	model := host.NewMeter(nh)
	h := &hosted{model: model, baseModel: m.BaseModel, basePath: m.BasePath, served: make(chan error, 1),
		url: "http://" + ln.Addr().String(),
		srv: server.New(server.Config{APIKey: b.apiKey, RequestTimeout: b.opt.RequestTimeout, Logger: b.log}, model)}

	b.mu.Lock()
	if b.closed || b.models[key(m)] != nil {
		closed := b.closed
		b.mu.Unlock()
		ln.Close()
		nh.Close()
		if closed {
			return errors.New("local: backend is closed")
		}
		return b.Register(ctx, m) // registered concurrently: check it matches
	}
	b.models[key(m)] = h
	b.mu.Unlock()
	go func() { h.served <- h.srv.Serve(ln) }()
	b.log.Info("local: serving model", "model", key(m), "url", h.url+"/v1", "step", model.Step())
	return nil
}

// checkLoRA refuses m if it asks for an adapter other than have, the one
// its checkpoints hold. The zero LoRAConfig asks for none in particular.
func checkLoRA(m *art.TrainableModel, have art.LoRAConfig) error {
	if !m.LoRA.IsZero() && !m.LoRA.SameAdapter(have) {
		return fmt.Errorf("local: model %s: its checkpoints have an adapter with LoRA config %s, not %s; checkpoints keep the config they were created with (use another name for a new adapter)",
			key(m), have, m.LoRA)
	}
	return nil
}

func (b *Backend) lookup(m *art.TrainableModel) (*hosted, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("local: backend is closed")
	}
	h := b.models[key(m)]
	if h == nil {
		return nil, fmt.Errorf("local: model %s: %w", key(m), art.ErrNotRegistered)
	}
	return h, nil
}

// Step returns the model's latest checkpoint step.
func (b *Backend) Step(ctx context.Context, m *art.TrainableModel) (int, error) {
	h, err := b.lookup(m)
	if err != nil {
		return 0, err
	}
	return h.model.Step(), nil
}

// Train runs one training step in process (see art.Backend), showing a
// progress bar on a terminal. Inference keeps serving meanwhile; the new
// step is served as soon as Train returns.
func (b *Backend) Train(ctx context.Context, m *art.TrainableModel, groups []art.TrajectoryGroup, cfg art.TrainConfig) (art.TrainResult, error) {
	return b.train(ctx, m, "train", func(h *hosted, progress func(done, total int)) (art.TrainResult, error) {
		return h.model.Train(ctx, groups, cfg, progress)
	})
}

// train runs one training step of kind ("train" or "sft") under a
// "local.<kind>" span, showing a progress bar on a terminal.
func (b *Backend) train(ctx context.Context, m *art.TrainableModel, kind string, step func(*hosted, func(done, total int)) (art.TrainResult, error)) (res art.TrainResult, err error) {
	_, span := tracing.Start(ctx, "local."+kind, tracing.Model.String(key(m)))
	defer func() { tracing.End(span, err) }()
	h, err := b.lookup(m)
	if err != nil {
		return art.TrainResult{}, err
	}
	bar := trainbar.New(b.opt.ProgressWriter, b.opt.Quiet, kind+" "+m.Name+"@"+strconv.Itoa(h.model.Step()+1))
	res, err = step(h, bar.Update)
	if err != nil {
		bar.Abort()
		return art.TrainResult{}, fmt.Errorf("local: %w", err)
	}
	bar.Finish()
	span.SetAttributes(tracing.Step.Int(res.Step), attribute.Bool("art.skipped", res.Skipped),
		attribute.Float64("art.trainer_tokens", res.Metrics["data/step_trainer_tokens"]))
	return res, nil
}

// TrainSFT runs supervised fine-tuning in process (see art.SFTTrainer),
// showing a progress bar over the batches on a terminal.
func (b *Backend) TrainSFT(ctx context.Context, m *art.TrainableModel, trajectories []art.Trajectory, cfg art.TrainSFTConfig) (art.TrainResult, error) {
	return b.train(ctx, m, "sft", func(h *hosted, progress func(done, total int)) (art.TrainResult, error) {
		return h.model.TrainSFT(ctx, trajectories, cfg, progress)
	})
}

// DeleteCheckpointsExcept deletes every checkpoint whose step is not in keep,
// except the latest.
func (b *Backend) DeleteCheckpointsExcept(ctx context.Context, m *art.TrainableModel, keep []int) error {
	h, err := b.lookup(m)
	if err != nil {
		return err
	}
	if err := h.model.DeleteCheckpoints(keep); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	return nil
}

// RestoreCheckpoint serves the checkpoint at step again as the next step,
// from which training goes on (see art.CheckpointRestorer).
func (b *Backend) RestoreCheckpoint(ctx context.Context, m *art.TrainableModel, step int) (int, error) {
	h, err := b.lookup(m)
	if err != nil {
		return 0, err
	}
	next, err := h.model.RestoreCheckpoint(ctx, step)
	if err != nil {
		return 0, fmt.Errorf("local: %w", err)
	}
	return next, nil
}

// InferenceEndpoint returns the model's server, its API key and the id
// "name@step" (the latest step when step < 0).
func (b *Backend) InferenceEndpoint(ctx context.Context, m *art.TrainableModel, step int) (art.Endpoint, error) {
	h, err := b.lookup(m)
	if err != nil {
		return art.Endpoint{}, err
	}
	if step < 0 {
		step = h.model.Step()
	} else if _, err := h.model.Resolve(m.Name + "@" + strconv.Itoa(step)); err != nil {
		return art.Endpoint{}, fmt.Errorf("local: %w", err)
	}
	return art.Endpoint{BaseURL: h.url + "/v1", APIKey: b.apiKey, Model: m.Name + "@" + strconv.Itoa(step)}, nil
}

// closeTimeout bounds how long Close waits for requests in flight.
const closeTimeout = 30 * time.Second

// Close stops every model's server, letting requests in flight (a training
// step included) finish for up to 30 seconds before cancelling them.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	models := b.models
	b.models = nil
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	for k, h := range models {
		if err := h.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("local: shut down %s: %w", k, err))
		}
		if err := <-h.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("local: serve %s: %w", k, err))
		}
		if err := h.model.Close(); err != nil {
			errs = append(errs, fmt.Errorf("local: close %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}
