package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/artgo/art/engine/hfmodel"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
)

// tokenScore is one line of `art logprobs` output.
type tokenScore struct {
	ID      int      `json:"id"`
	Text    string   `json:"text"`
	Logprob *float64 `json:"logprob"` // nil for the first token (nothing predicts it)
}

func newLogprobsCmd() *cobra.Command {
	var modelDir, text, messagesFile, adapterDir, quantize string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "logprobs",
		Short: "Print each token of a text (or rendered chat) with its log probability under a model",
		Long: `logprobs tokenizes --text, or renders --messages (a JSON file holding an
OpenAI-style list of messages) with the model's chat template, runs the model
over it and prints every token with its id and the log probability the model
gives it after the tokens before it.`,
		Example: `  art logprobs --model ./tiny --text "Hello, world"
  art logprobs --model ./tiny --messages chat.json --json
  art logprobs --model ./tiny --text "Hello, world" --quantize q4`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if modelDir == "" {
				return fmt.Errorf("--model is required")
			}
			if (text == "") == (messagesFile == "") {
				return fmt.Errorf("give exactly one of --text or --messages")
			}
			quant, err := model.ParseQuantization(quantize)
			if err != nil {
				return err
			}
			// The messages are read before the model loads: a typo must not
			// cost the load.
			var msgs []json.RawMessage
			if messagesFile != "" {
				if msgs, err = readMessages(messagesFile); err != nil {
					return err
				}
			}
			// Loading and scoring only read, so an interrupt need not wait
			// for them.
			ctx := cmd.Context()
			folder, err := interruptible(ctx, func() (*hfmodel.Folder, error) {
				return hfmodel.OpenWith(ctx, modelDir, model.LoadOptions{Quantize: quant})
			})
			if ctx.Err() != nil {
				return errors.New("logprobs: interrupted")
			}
			if err != nil {
				return err
			}
			m, tok := folder.Model, folder.Tokenizer
			if msgs != nil {
				if text, err = folder.Template.Render(msgs, nil, folder.RenderOptions(nil)); err != nil {
					return fmt.Errorf("logprobs: --messages %s: %w", messagesFile, err)
				}
			}
			var adapter model.Adapter
			if adapterDir != "" {
				a, err := lora.Load(adapterDir, m.Config)
				if err != nil {
					return err
				}
				adapter = a
			}
			ids := tok.Encode(text)
			if len(ids) < 2 {
				return fmt.Errorf("the input has %d token(s); need at least 2 to score", len(ids))
			}
			if limit := m.Config.MaxPositions; limit > 0 && len(ids) > limit {
				return fmt.Errorf("logprobs: the input is %d tokens; the model's context (max_position_embeddings) is %d: shorten it", len(ids), limit)
			}
			lps, err := interruptible(ctx, func() ([]float64, error) { return m.LogProbs(ids, adapter) })
			if ctx.Err() != nil {
				return errors.New("logprobs: interrupted")
			}
			if err != nil {
				return err
			}
			rows := make([]tokenScore, len(ids))
			for i, id := range ids {
				rows[i] = tokenScore{ID: id, Text: string(tok.TokenBytes(id))}
				if i > 0 {
					lp := lps[i-1]
					rows[i].Logprob = &lp
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				return enc.Encode(rows)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTOKEN\tLOGPROB")
			var total float64
			for _, r := range rows {
				lp := "-"
				if r.Logprob != nil {
					lp = strconv.FormatFloat(*r.Logprob, 'f', 4, 64)
					total += *r.Logprob
				}
				fmt.Fprintf(w, "%d\t%q\t%s\n", r.ID, r.Text, lp)
			}
			fmt.Fprintf(w, "\ttotal\t%.4f\n", total)
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "Hugging Face model folder")
	f.StringVar(&adapterDir, "adapter", "", "optional PEFT LoRA adapter folder (e.g. a checkpoint)")
	f.StringVar(&text, "text", "", "text to score")
	f.StringVar(&messagesFile, "messages", "", "JSON file with a list of chat messages to render and score")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	addQuantizeFlag(f, &quantize)
	return cmd
}

// readMessages reads the JSON list of messages in path (--messages).
func readMessages(path string) ([]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("logprobs: --messages: %w", err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(b, &msgs); err != nil {
		return nil, fmt.Errorf("logprobs: --messages %s: want a JSON list of messages: %w", path, err)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("logprobs: --messages %s: the list has no message to score", path)
	}
	return msgs, nil
}
