package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/artgo/art/engine/gguf"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/atomicfile"
)

// newExportCmd returns `art export`, which converts a model folder to other
// engines' formats; `art export gguf` writes a GGUF file for llama.cpp and
// `art export gguf-lora` a trained adapter in llama.cpp's LoRA format.
func newExportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export a model folder for other inference engines",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRun,
	}
	cmd.AddCommand(newExportGGUFCmd(), newExportGGUFLoRACmd())
	return cmd
}

func newExportGGUFCmd() *cobra.Command {
	var dir, out, dtype, pre, name string
	cmd := &cobra.Command{
		Use:   "gguf --model DIR --out FILE [--dtype f32|f16|bf16|q8_0|q4_0]",
		Short: "Write a Hugging Face model folder as a GGUF file llama.cpp can run",
		Long: `Write a Hugging Face model folder (config.json, *.safetensors, tokenizer.json,
tokenizer_config.json) as a GGUF v3 file for llama.cpp: Llama, Mistral, Qwen2,
Qwen3, Qwen3-MoE and Gemma 3 models (what llama.cpp cannot represent is
refused: e.g. a Gemma 3 whose global layers are not every sixth), matrices in
f32, f16, bf16, q8_0 or q4_0, norms and biases in f32, with the tokenizer, special tokens and chat
template embedded. q8_0 and q4_0 hold the very blocks that --quantize q8 and
q4 (art serve, art logprobs) run, so both engines compute with the same
weights. The file is written atomically.`,
		Example: `  art export gguf --model .art/models/tiny --out tiny.gguf
  art export gguf --model ./Qwen2.5-0.5B-Instruct --out qwen.gguf --dtype f16
  art export gguf --model ./Qwen2.5-0.5B-Instruct --out qwen-q8_0.gguf --dtype q8_0
  art export gguf --model ./Qwen2.5-0.5B-Instruct --out qwen-q4_0.gguf --dtype q4_0`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var dt gguf.Type
			var load model.LoadOptions
			switch strings.ToLower(dtype) {
			case "f32":
				dt = gguf.F32
			case "f16":
				dt = gguf.F16
			case "bf16":
				dt = gguf.BF16
			case "q8_0":
				dt, load.Quantize = gguf.Q8_0, model.Q8
			case "q4_0":
				dt, load.Quantize = gguf.Q4_0, model.Q4
			default:
				return fmt.Errorf("--dtype %q: want f32, f16, bf16, q8_0 or q4_0", dtype)
			}
			if err := checkOutFile("export gguf", out); err != nil {
				return err
			}
			ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
			start := time.Now()
			fmt.Fprintf(stderr, "loading %s\n", dir)
			m, err := interruptible(ctx, func() (*model.Model, error) { return model.LoadWith(ctx, dir, load) })
			if ctx.Err() != nil {
				return fmt.Errorf("export gguf: interrupted while loading %s; %s not written", dir, out)
			}
			if err != nil {
				return err
			}
			c := m.Config
			fmt.Fprintf(stderr, "%s: %d layers, hidden %d, vocab %d, %.1fM parameters\n",
				c.ModelType, c.NumLayers, c.HiddenSize, c.VocabSize, float64(c.NumParams())/1e6)
			var bar *progressbar.ProgressBar
			opts := gguf.Options{DType: dt, Pre: pre, Name: name, Progress: func(done, total int64) {
				if bar == nil {
					bar = progressbar.NewOptions64(total,
						progressbar.OptionSetWriter(stderr),
						progressbar.OptionSetDescription("writing "+out),
						progressbar.OptionShowBytes(true),
						progressbar.OptionThrottle(100*time.Millisecond),
						progressbar.OptionOnCompletion(func() { fmt.Fprintln(stderr) }),
					)
				}
				bar.Set64(done)
			}}
			// The tokenizer files live in the model folder, as Hugging Face
			// ships them. The file is written as gguf.ExportFile writes it
			// (a temporary file, synced, renamed), through a writer that
			// fails once ctx is done, so that an interrupt stops the export
			// and removes the temporary file.
			err = atomicfile.Write(out, 0o644, func(w io.Writer) error { return gguf.Export(ctxWriter{ctx, w}, m, dir, opts) })
			if ctx.Err() != nil {
				if bar != nil {
					fmt.Fprintln(stderr) // end the bar's line
				}
				return fmt.Errorf("export gguf: interrupted; %s not written", out)
			}
			if err != nil {
				return err
			}
			if bar != nil {
				bar.Finish()
			}
			st, err := os.Stat(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "wrote %s (%s, %.1f MB) in %s\n", out, strings.ToLower(dt.String()),
				float64(st.Size())/1e6, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "model", "", "model folder (config.json, *.safetensors, tokenizer.json, tokenizer_config.json)")
	f.StringVar(&out, "out", "", "GGUF file to write")
	f.StringVar(&dtype, "dtype", "f32", "storage of the weight matrices: f32, f16, bf16, q8_0 or q4_0 (8- or 4-bit blocks, as --quantize q8 or q4)")
	f.StringVar(&pre, "pre", "", "llama.cpp pre-tokenizer name, when not recognised from tokenizer.json")
	f.StringVar(&name, "name", "", "general.name stored in the file (default: the architecture)")
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("out")
	return cmd
}

func newExportGGUFLoRACmd() *cobra.Command {
	var adapterDir, baseModel, out string
	cmd := &cobra.Command{
		Use:   "gguf-lora --adapter DIR --out FILE [--base-model DIR]",
		Short: "Write a trained LoRA adapter (a checkpoint folder) as a GGUF LoRA for llama.cpp and Ollama",
		Long: `Write a PEFT LoRA adapter folder (adapter_config.json +
adapter_model.safetensors; every checkpoint under
.art/<project>/models/<name>/checkpoints/ is one) in llama.cpp's GGUF LoRA
format, for llama.cpp (--lora FILE), llama-server and Ollama (ADAPTER FILE)
over the base model exported with "art export gguf". The base model folder
gives the shapes; by default it is the adapter's base_model_name_or_path.
The file is written atomically.`,
		Example: `  art export gguf --model ./base --out base.gguf
  art export gguf-lora --adapter .art/default/models/agent/checkpoints/0012 --out agent-12.gguf
  llama-cli -m base.gguf --lora agent-12.gguf`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutFile("export gguf-lora", out); err != nil {
				return err
			}
			if baseModel == "" {
				var err error
				if baseModel, err = adapterBaseModel(adapterDir); err != nil {
					return err
				}
			}
			cfg, err := model.ReadConfig(baseModel)
			if err != nil {
				return fmt.Errorf("base model: %w", err)
			}
			a, err := lora.Load(adapterDir, cfg)
			if err != nil {
				return err
			}
			if err := gguf.ExportLoRAFile(out, a, cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (rank %d, %d projections, base %s)\n", out, a.Config.Rank, len(a.Factors()), baseModel)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&adapterDir, "adapter", "", "PEFT adapter folder (a checkpoint)")
	f.StringVar(&baseModel, "base-model", "", "the adapter's base model folder (default: its base_model_name_or_path)")
	f.StringVar(&out, "out", "", "GGUF LoRA file to write")
	cmd.MarkFlagRequired("adapter")
	cmd.MarkFlagRequired("out")
	return cmd
}

// adapterBaseModel returns the base_model_name_or_path of the adapter in
// dir, or an error saying to pass --base-model.
func adapterBaseModel(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, lora.ConfigFile))
	if err != nil {
		return "", fmt.Errorf("adapter: %w", err)
	}
	var c struct {
		Base string `json:"base_model_name_or_path"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("adapter: %s: %w", filepath.Join(dir, lora.ConfigFile), err)
	}
	if c.Base == "" {
		return "", fmt.Errorf("adapter: %s names no base model; pass --base-model DIR", filepath.Join(dir, lora.ConfigFile))
	}
	if _, err := os.Stat(filepath.Join(c.Base, "config.json")); err != nil {
		return "", fmt.Errorf("adapter: its base model %q is not a model folder here (%v); pass --base-model DIR", c.Base, err)
	}
	return c.Base, nil
}
