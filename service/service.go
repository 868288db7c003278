// Package service hosts one trainable model on the native engine: the base
// model, its tokenizer and chat template, and a LoRA adapter per checkpoint
// step. It answers chat requests for "name@step" with the exact sampled
// token ids and logprobs, and turns trajectory groups into the next
// checkpoint. The HTTP server and the in-process backend both sit on it; it
// knows nothing about HTTP.
//
// During a training step inference keeps serving the previous steps: the
// trainer works on its own copy of the adapter and the new step appears
// once its checkpoint is on disk.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/store"
)

// Options configure Open.
type Options struct {
	BaseModel string // Hugging Face model folder (config, weights, tokenizer files)
	Name      string // served as Name@step
	Project   string
	Path      string      // store root; "" means ".art"
	LoRA      lora.Config // used when the model has no checkpoint yet
	Seed      uint64      // initialises a new adapter
	// MaxConcurrent bounds the sequences generated at once, all decoded in
	// shared forward passes (0: DefaultMaxConcurrent).
	MaxConcurrent int
	// RecomputeActivations trades about a third more training compute for
	// far less activation memory (see train.Trainer.RecomputeActivations).
	RecomputeActivations bool
	Logger               *slog.Logger
}

// Service is one trainable model served by the native engine. Its methods
// are safe for concurrent use.
type Service struct {
	opt      Options
	log      *slog.Logger
	model    *model.Model
	tok      *tokenizer.Tokenizer
	chatCfg  *chat.Config
	tmpl     *chat.Template // without tools
	toolTmpl *chat.Template // with tools (often the same)
	format   chat.Format
	stopIDs  []int
	dir      *store.ModelDir
	slots    chan struct{} // sequences in flight
	batcher  *generate.Batcher

	mu       sync.Mutex // guards adapters and latest
	adapters map[int]*lora.Adapter
	latest   int

	trainMu sync.Mutex // one training step at a time; guards trainer
	trainer *train.Trainer

	structured structured // structured outputs: the grammar vocabulary and compiled schemas
}

// ErrUnknownModel is returned for a model id the service does not serve.
var ErrUnknownModel = errors.New("service: unknown model")

// Open loads the base model and resumes the latest checkpoint of
// Project/Name, creating step 0 (the untrained adapter) if there is none.
func Open(ctx context.Context, opt Options) (*Service, error) {
	if err := store.ValidateName(opt.Name); err != nil {
		return nil, fmt.Errorf("service: model name: %w", err)
	}
	if err := store.ValidateName(opt.Project); err != nil {
		return nil, fmt.Errorf("service: project: %w", err)
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Service{opt: opt, log: log, adapters: map[int]*lora.Adapter{}}
	var err error
	if s.model, err = model.Load(opt.BaseModel); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	// Pack the weights now, layer by layer, so the stored copies are gone
	// before KV caches and training activations are allocated.
	s.model.W.Prepack()
	if s.tok, err = tokenizer.LoadDir(opt.BaseModel); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if s.tok.VocabSize() > s.model.Config.VocabSize {
		return nil, fmt.Errorf("service: tokenizer has %d ids but the model's vocabulary is %d", s.tok.VocabSize(), s.model.Config.VocabSize)
	}
	if s.chatCfg, err = chat.LoadConfig(opt.BaseModel); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if s.tmpl, err = s.template(false); err != nil {
		return nil, err
	}
	if s.toolTmpl, err = s.template(true); err != nil {
		return nil, err
	}
	s.format = chat.DetectFormat(s.toolTmpl.Source())
	s.stopIDs = s.stopTokens()
	n := opt.MaxConcurrent
	if n <= 0 {
		n = DefaultMaxConcurrent
	}
	s.slots = make(chan struct{}, n)
	if s.dir, err = store.New(opt.Path, opt.Project, opt.Name); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if err := s.resume(ctx); err != nil {
		return nil, err
	}
	s.batcher = generate.NewBatcher(s.model, generate.BatcherOptions{MaxSequences: n})
	return s, nil
}

// DefaultMaxConcurrent is the number of sequences generated at once when
// Options.MaxConcurrent is 0; they share forward passes.
const DefaultMaxConcurrent = 64

// Close stops the service's generation loop; requests in flight fail.
func (s *Service) Close() error {
	s.batcher.Close()
	return nil
}

func (s *Service) template(withTools bool) (*chat.Template, error) {
	src, err := s.chatCfg.TemplateSource(withTools)
	if err != nil {
		return nil, fmt.Errorf("service: %s: %w", s.opt.BaseModel, err)
	}
	t, err := chat.NewTemplate(src)
	if err != nil {
		return nil, fmt.Errorf("service: %s: chat template: %w", s.opt.BaseModel, err)
	}
	return t, nil
}

// stopTokens collects the ids that end a turn: the model's EOS ids and the
// chat markers that close an assistant message.
func (s *Service) stopTokens() []int {
	var ids []int
	add := func(id int) {
		if id >= 0 && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range s.model.Config.EOSTokenID {
		add(id)
	}
	for _, id := range s.model.Generation.EOSTokenID {
		add(id)
	}
	for _, t := range []string{s.chatCfg.EOSToken, "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|end_of_text|>"} {
		if id, ok := s.tok.ID(t); ok && t != "" {
			add(id)
		}
	}
	return ids
}

// resume loads the latest checkpoint into the trainer, creating step 0.
func (s *Service) resume(ctx context.Context) error {
	if err := os.MkdirAll(s.dir.Path(), 0o755); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	steps, err := s.dir.ListCheckpoints()
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	var a *lora.Adapter
	var opt *train.AdamW
	if len(steps) == 0 {
		if a, err = lora.New(s.model.Config, s.opt.LoRA, s.opt.Seed); err != nil {
			return fmt.Errorf("service: %w", err)
		}
		opt = train.NewAdamW(len(a.Params()))
		if err := train.SaveCheckpoint(s.dir.CheckpointDir(0), a, opt, s.opt.BaseModel); err != nil {
			return fmt.Errorf("service: create step 0: %w", err)
		}
		s.log.Info("service: created the untrained adapter as step 0", "model", s.opt.Name)
	} else {
		s.latest = steps[len(steps)-1]
		if a, opt, err = train.LoadCheckpoint(s.dir.CheckpointDir(s.latest), s.model.Config); err != nil {
			return fmt.Errorf("service: resume step %d: %w", s.latest, err)
		}
		s.log.Info("service: resumed", "model", s.opt.Name, "step", s.latest)
	}
	s.adapters[s.latest] = a.Clone()
	s.trainer = &train.Trainer{Model: s.model, Adapter: a, Opt: opt, Log: s.log,
		Tokenizer:            &train.Tokenizer{Tok: s.tok, Template: s.tmpl, ToolTemplate: s.toolTmpl, Render: s.renderOptions(nil)},
		RecomputeActivations: s.opt.RecomputeActivations}
	return nil
}

func (s *Service) renderOptions(kwargs map[string]any) chat.RenderOptions {
	return chat.RenderOptions{BOSToken: s.chatCfg.BOSToken, EOSToken: s.chatCfg.EOSToken, Kwargs: kwargs}
}

// Name returns the served model's name.
func (s *Service) Name() string { return s.opt.Name }

// Options returns the options the service was opened with.
func (s *Service) Options() Options {
	o := s.opt
	o.LoRA.TargetModules = slices.Clone(o.LoRA.TargetModules)
	o.LoRA.Layers = slices.Clone(o.LoRA.Layers)
	return o
}

// ToolCallFormat returns how the model writes tool calls in its output, as
// detected from its chat template.
func (s *Service) ToolCallFormat() chat.Format { return s.format }

// Running returns the number of sequences being generated right now. At
// most Capacity run at once; further sequences wait for a free slot.
func (s *Service) Running() int { return len(s.slots) }

// Capacity returns the most sequences generated at once.
func (s *Service) Capacity() int { return cap(s.slots) }

// Model returns the base model (read-only).
func (s *Service) Model() *model.Model { return s.model }

// Tokenizer returns the tokenizer.
func (s *Service) Tokenizer() *tokenizer.Tokenizer { return s.tok }

// Dir returns the model's store directory.
func (s *Service) Dir() *store.ModelDir { return s.dir }

// Step returns the latest checkpoint step.
func (s *Service) Step() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// Models lists the served model ids, "name@step" for every checkpoint on
// disk, oldest first.
func (s *Service) Models() ([]string, error) {
	steps, err := s.dir.ListCheckpoints()
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	out := make([]string, len(steps))
	for i, st := range steps {
		out[i] = s.opt.Name + "@" + strconv.Itoa(st)
	}
	return out, nil
}

// Resolve maps a requested model id to a checkpoint step. "name@N" is step
// N; a bare "name" means the latest step. Anything else, or a step with no
// checkpoint, is ErrUnknownModel with the list of what is served.
func (s *Service) Resolve(id string) (int, error) {
	name, stepStr, hasStep := strings.Cut(id, "@")
	if name != s.opt.Name {
		return 0, s.unknown(id)
	}
	if !hasStep {
		return s.Step(), nil
	}
	step, err := strconv.Atoi(stepStr)
	if err != nil || step < 0 {
		return 0, s.unknown(id)
	}
	if _, err := os.Stat(s.dir.CheckpointDir(step)); err != nil {
		return 0, s.unknown(id)
	}
	return step, nil
}

func (s *Service) unknown(id string) error {
	served, _ := s.Models()
	return fmt.Errorf("%w %q; served: %s (a bare %q means the latest step)", ErrUnknownModel, id, strings.Join(served, ", "), s.opt.Name)
}

// adapter returns the adapter of step, loading it from its checkpoint.
func (s *Service) adapter(step int) (*lora.Adapter, error) {
	s.mu.Lock()
	a, ok := s.adapters[step]
	s.mu.Unlock()
	if ok {
		return a, nil
	}
	a, err := lora.Load(s.dir.CheckpointDir(step), s.model.Config)
	if err != nil {
		return nil, fmt.Errorf("service: load step %d: %w", step, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.adapters[step]; ok {
		return b, nil
	}
	s.adapters[step] = a
	s.evictLocked()
	return a, nil
}

// maxCachedAdapters bounds the adapters kept in memory; the latest is
// always kept, older ones are reloaded from disk on demand.
const maxCachedAdapters = 8

func (s *Service) evictLocked() {
	if len(s.adapters) <= maxCachedAdapters {
		return
	}
	var steps []int
	for st := range s.adapters {
		if st != s.latest {
			steps = append(steps, st)
		}
	}
	sort.Ints(steps)
	for _, st := range steps[:len(s.adapters)-maxCachedAdapters] {
		delete(s.adapters, st)
	}
}

// DeleteCheckpoints removes every checkpoint not in keep, except the latest.
func (s *Service) DeleteCheckpoints(keep []int) error {
	s.trainMu.Lock()
	defer s.trainMu.Unlock()
	latest := s.Step()
	if !slices.Contains(keep, latest) {
		keep = append(slices.Clone(keep), latest)
	}
	if err := s.dir.DeleteCheckpoints(keep); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	s.mu.Lock()
	for st := range s.adapters {
		if !slices.Contains(keep, st) {
			delete(s.adapters, st)
		}
	}
	s.mu.Unlock()
	return nil
}

// CheckpointPath returns the folder of a step's checkpoint.
func (s *Service) CheckpointPath(step int) string { return filepath.Clean(s.dir.CheckpointDir(step)) }
