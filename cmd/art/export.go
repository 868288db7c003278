package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/artgo/art/engine/gguf"
	"github.com/artgo/art/engine/model"
)

// newExportCmd returns `art export`, which converts a model folder to other
// engines' formats; `art export gguf` writes a GGUF file for llama.cpp.
func newExportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export a model folder for other inference engines",
	}
	cmd.AddCommand(newExportGGUFCmd())
	return cmd
}

func newExportGGUFCmd() *cobra.Command {
	var dir, out, dtype, pre, name string
	cmd := &cobra.Command{
		Use:   "gguf --model DIR --out FILE [--dtype f32|f16]",
		Short: "Write a Hugging Face model folder as a GGUF file llama.cpp can run",
		Long: `Write a Hugging Face model folder (config.json, *.safetensors, tokenizer.json,
tokenizer_config.json) as a GGUF v3 file for llama.cpp: Llama and Qwen2 models,
matrices in f32 or f16, norms and biases in f32, with the tokenizer, special
tokens and chat template embedded. The file is written atomically.`,
		Example: `  art export gguf --model .art/models/tiny --out tiny.gguf
  art export gguf --model ./Qwen2.5-0.5B-Instruct --out qwen.gguf --dtype f16`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var dt gguf.Type
			switch strings.ToLower(dtype) {
			case "f32":
				dt = gguf.F32
			case "f16":
				dt = gguf.F16
			default:
				return fmt.Errorf("--dtype %q: want f32 or f16", dtype)
			}
			stderr := cmd.ErrOrStderr()
			start := time.Now()
			fmt.Fprintf(stderr, "loading %s\n", dir)
			m, err := model.Load(dir)
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
			// ships them.
			if err := gguf.ExportFile(out, m, dir, opts); err != nil {
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
	f.StringVar(&dtype, "dtype", "f32", "storage of the weight matrices: f32 or f16")
	f.StringVar(&pre, "pre", "", "llama.cpp pre-tokenizer name, when not recognised from tokenizer.json")
	f.StringVar(&name, "name", "", "general.name stored in the file (default: the architecture)")
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("out")
	return cmd
}
