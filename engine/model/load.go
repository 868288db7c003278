package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/safetensors"
)

// Model is a loaded transformer: its config and weights. A Model is
// read-only after Load and safe for concurrent forward passes, each with its
// own Workspace and caches.
type Model struct {
	Config     Config
	Generation GenerationConfig
	W          Weights
	freqs      []float64 // rotary inverse frequencies (HD/2)
	localFreqs []float64 // Family.LocalRope: the sliding layers' frequencies
	embedScale float32   // Family.EmbedScale: √C; else 1
	queryScale float32   // Family.QueryPreAttnScalar: √(HD/query_pre_attn_scalar); else 1
}

// Load reads a Hugging Face model folder: config.json, generation_config.json
// (optional) and model.safetensors or a sharded model.safetensors.index.json.
// Matrices keep their stored dtype (F32, BF16 or F16). Every expected tensor
// must be present with the right shape and every tensor in the files must be
// used; the error lists all problems at once.
func Load(dir string) (*Model, error) { return LoadWith(context.Background(), dir, LoadOptions{}) }

// LoadWith is Load with options: opt.Quantize stores the matrices quantized,
// each as soon as it is read, so the checkpoint's copy of only one matrix
// is held beside the quantized model. It stops between tensors once ctx
// ends (a 7B model reads for about a minute), returning ctx's error.
func LoadWith(ctx context.Context, dir string, opt LoadOptions) (*Model, error) {
	if _, err := ParseQuantization(string(opt.Quantize)); err != nil {
		return nil, err
	}
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	gen, err := ReadGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	defer set.Close()
	m := &Model{Config: cfg, Generation: gen}
	if err := loadWeights(ctx, set, cfg, &m.W, opt.Quantize); err != nil {
		return nil, fmt.Errorf("model: load %s: %w", dir, err)
	}
	m.derive()
	return m, nil
}

// New builds a Model from weights already in memory (init-model, tests).
func New(cfg Config, w Weights) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if cfg.TieWordEmbeddings {
		w.LMHead = w.Embed
	}
	m := &Model{Config: cfg, W: w}
	m.derive()
	return m, nil
}

func loadWeights(ctx context.Context, set *safetensors.Set, cfg Config, w *Weights, q Quantization) error {
	refs := tensorTable(cfg, w)
	var problems []string
	used := make(map[string]bool, len(refs))
	for _, r := range refs {
		if err := ctx.Err(); err != nil {
			return err
		}
		used[r.name] = true
		info, ok := set.Info(r.name)
		if !ok {
			problems = append(problems, fmt.Sprintf("missing tensor %s %v", r.name, r.shape))
			continue
		}
		if !slices.Equal(info.Shape, r.shape) {
			problems = append(problems, fmt.Sprintf("tensor %s has shape %v, want %v", r.name, info.Shape, r.shape))
			continue
		}
		if err := loadTensor(set, r, info, q); err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, name := range set.Names() {
		if !used[name] && !ignorableTensor(name) {
			problems = append(problems, "unexpected tensor "+name)
		}
	}
	if len(problems) > 0 {
		const show = 8
		more := ""
		if len(problems) > show {
			more = fmt.Sprintf(" (and %d more)", len(problems)-show)
			problems = problems[:show]
		}
		return errors.New(strings.Join(problems, "; ") + more)
	}
	if cfg.TieWordEmbeddings {
		w.LMHead = w.Embed
	}
	return nil
}

func loadTensor(set *safetensors.Set, r tensorRef, info safetensors.TensorInfo, q Quantization) error {
	if r.vec != nil {
		v, err := set.ReadF32(r.name)
		if err != nil {
			return err
		}
		if r.offset != 0 {
			for i := range v {
				v[i] += r.offset
			}
		}
		*r.vec = v
		return nil
	}
	rows, cols := r.shape[0], r.shape[1]
	switch info.DType {
	case safetensors.F32:
		v, err := set.ReadF32(r.name)
		if err != nil {
			return err
		}
		*r.mat = kernels.NewMatF32(rows, cols, v)
	case safetensors.BF16, safetensors.F16:
		v, err := set.ReadU16(r.name)
		if err != nil {
			return err
		}
		dt := kernels.BF16
		if info.DType == safetensors.F16 {
			dt = kernels.F16
		}
		*r.mat = &kernels.Mat{Rows: rows, Cols: cols, DType: dt, U16: v}
	default:
		return fmt.Errorf("tensor %s has dtype %v; want F32, BF16 or F16", r.name, info.DType)
	}
	if r.unquantized {
		return nil
	}
	qm, err := q.quantize(*r.mat, r.name)
	*r.mat = qm
	return err
}
