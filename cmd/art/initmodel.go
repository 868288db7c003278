package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/atomicfile"
)

func newInitModelCmd() *cobra.Command {
	var opt initmodel.Options
	var dtype, out, templateFile string
	cmd := &cobra.Command{
		Use:   "init-model",
		Short: "Write a Hugging Face model folder with random weights in a real architecture",
		Long: `init-model writes a complete Hugging Face model folder (config.json,
generation_config.json, model.safetensors, tokenizer.json and
tokenizer_config.json with a chat template) holding random weights in the
shape of a real model. No pretrained weights can be downloaded here, so tests,
benchmarks and demos start from such folders.

--arch picks the family: qwen2, llama, qwen3, qwen3_moe (mixture of experts),
mistral (sliding-window attention) or gemma3 (Gemma 3 text: model_type
gemma3_text). Shapes named after a real model (qwen3-0.6b, qwen3-30b-a3b,
mistral-7b, gemma-3-270m, ...) fix their family; tiny and small fit any family
(qwen3_moe's tiny has 4 experts, 2 a token; its small 8 experts, 3 a token, on
every second layer).

--tokenizer takes a folder with tokenizer.json and tokenizer_config.json (for
example from scripts/fetch-assets.sh: .assets/qwen3 or .assets/llama3_1), or
"bytes" for a built-in byte-level vocabulary with ChatML tokens.`,
		Example: `  art init-model --arch qwen2 --shape qwen2.5-0.5b --tokenizer .assets/qwen3 --dtype bf16 --out ./qwen-random
  art init-model --arch qwen3 --shape qwen3-0.6b --tokenizer .assets/qwen3 --dtype bf16 --out ./qwen3-random
  art init-model --arch gemma3 --shape tiny --tokenizer bytes --out ./gemma-tiny
  art init-model --arch qwen3_moe --shape small --tokenizer .assets/qwen3 --out ./moe-small
  art init-model --arch qwen2 --shape tiny --tokenizer bytes --out ./tiny`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			if opt.Tokenizer == "" {
				return fmt.Errorf("--tokenizer is required: a folder with tokenizer.json, or %q", initmodel.ByteTokenizer)
			}
			// Checked before any weights are drawn (a large shape takes a while).
			if !(opt.Std >= 0) || math.IsInf(opt.Std, 0) {
				return fmt.Errorf("init-model: --std must be > 0, or 0 for 0.02; got %v", opt.Std)
			}
			if !(opt.RopeTheta >= 0) || math.IsInf(opt.RopeTheta, 0) {
				return fmt.Errorf("init-model: --rope-theta must be > 0, or 0 for the shape's; got %v", opt.RopeTheta)
			}
			switch strings.ToLower(dtype) {
			case "f32":
				opt.DType = kernels.F32
			case "bf16":
				opt.DType = kernels.BF16
			case "f16":
				opt.DType = kernels.F16
			default:
				return fmt.Errorf("--dtype %q: want f32, bf16 or f16", dtype)
			}
			if templateFile != "" {
				b, err := os.ReadFile(templateFile)
				if err != nil {
					return fmt.Errorf("--chat-template: %w", err)
				}
				opt.ChatTemplate = string(b)
			}
			if opt.Arch == "llama" && opt.Tokenizer == initmodel.ByteTokenizer && opt.ChatTemplate == "" {
				return fmt.Errorf("init-model: --arch llama with --tokenizer %s needs an explicit chat template: pass a Jinja template file with --chat-template FILE", initmodel.ByteTokenizer)
			}
			if err := checkOutFolder("init-model", out); err != nil {
				return err
			}
			m, err := writeModelFolder(cmd.Context(), out, opt)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s %s, %d parameters, vocabulary %d, %s weights\n",
				out, opt.Arch, opt.Shape, m.Config.NumParams(), m.Config.VocabSize, opt.DType)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.Arch, "arch", "qwen2", "architecture: "+strings.Join(model.SupportedModelTypes(), ", ")+" (gemma3 = gemma3_text)")
	f.StringVar(&opt.Shape, "shape", "tiny", "shape: "+strings.Join(model.PresetNames(), ", "))
	f.StringVar(&opt.Tokenizer, "tokenizer", "", `tokenizer folder, or "bytes"`)
	f.StringVar(&dtype, "dtype", "f32", "weight storage: f32, bf16 or f16")
	f.Uint64Var(&opt.Seed, "seed", 1, "random seed")
	f.Float64Var(&opt.Std, "std", 0, "weight init standard deviation, > 0 (0: 0.02)")
	f.StringVar(&templateFile, "chat-template", "", "file holding a Jinja chat template to use instead of the default: Qwen2.5's for qwen2, Llama 3.1's for llama, for other architectures the tokenizer folder's own (Qwen2.5's ChatML if it has none or with --tokenizer bytes; bytes with llama needs this flag)")
	f.Float64Var(&opt.RopeTheta, "rope-theta", 0, "RoPE base, > 0 (0: the shape's)")
	f.StringVar(&out, "out", "", "output folder (must not exist or be empty)")
	return cmd
}

// writeModelFolder writes the random model into a temporary folder beside
// out and renames it to out once complete, so that out appears whole or
// not at all. Drawing and writing the weights of a large shape takes
// minutes and cannot be stopped inside initmodel.Write, so an interrupt
// returns at once with the temporary folder removed (the process ends
// right after, and with it the abandoned write).
func writeModelFolder(ctx context.Context, out string, opt initmodel.Options) (*model.Model, error) {
	out = filepath.Clean(out)
	parent := filepath.Dir(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("init-model: --out %s: %w", out, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("init-model: --out %s: %w", out, err)
	}
	m, err := interruptible(ctx, func() (*model.Model, error) { return initmodel.Write(tmp, opt) })
	if ctx.Err() != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("init-model: interrupted; %s not written", out)
	}
	if err == nil {
		err = os.Chmod(tmp, 0o755) // MkdirTemp's is 0700
	}
	if err == nil {
		if rerr := os.Remove(out); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) { // empty, checked above
			err = fmt.Errorf("init-model: --out %s: %w", out, rerr)
		}
	}
	if err == nil {
		if err = os.Rename(tmp, out); err != nil {
			err = fmt.Errorf("init-model: move the new folder to %s: %w", out, err)
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := atomicfile.SyncDir(parent); err != nil {
		return nil, fmt.Errorf("init-model: %w", err)
	}
	return m, nil
}
