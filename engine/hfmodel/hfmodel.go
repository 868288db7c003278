// Package hfmodel opens a Hugging Face model folder for the engine: the
// weights and config, the tokenizer, the chat templates (with and without
// tools), the ids that end a turn, and how the model writes tool calls.
// Every program that reads a model folder (the host, pretraining, the demo,
// `art logprobs`) opens it here, so they all render, stop and tokenize
// alike.
package hfmodel

import (
	"context"
	"fmt"
	"slices"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/engine/train"
)

// Folder is an opened model folder.
type Folder struct {
	Dir string
	// Model is the transformer; nil when the folder was opened by
	// OpenText.
	Model      *model.Model
	Tokenizer  *tokenizer.Tokenizer
	Chat       *chat.Config
	Template   *chat.Template // renders conversations without tools
	ToolTpl    *chat.Template // renders conversations with tools (often the same source)
	ToolFormat chat.Format    // how the model writes tool calls, detected from ToolTpl
	// StopIDs end an assistant turn: the model's EOS ids and the chat
	// markers that close a message.
	StopIDs []int
}

// Open reads everything in dir, weights included.
func Open(dir string) (*Folder, error) {
	return OpenWith(context.Background(), dir, model.LoadOptions{})
}

// OpenWith is Open with the weights loaded as opt says (quantized),
// stopping between tensors once ctx ends (model.LoadWith).
func OpenWith(ctx context.Context, dir string, opt model.LoadOptions) (*Folder, error) {
	m, err := model.LoadWith(ctx, dir, opt)
	if err != nil {
		return nil, fmt.Errorf("hfmodel: %w", err)
	}
	f, err := openText(dir, m.Config, m.Generation)
	if err != nil {
		return nil, err
	}
	if n := f.Tokenizer.VocabSize(); n > m.Config.VocabSize {
		return nil, fmt.Errorf("hfmodel: %s: the tokenizer has %d ids but the model's vocabulary is %d", dir, n, m.Config.VocabSize)
	}
	f.Model = m
	return f, nil
}

// OpenText reads what turns conversations into token ids and back (config,
// tokenizer, templates), without the weights.
func OpenText(dir string) (*Folder, error) {
	cfg, err := model.ReadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("hfmodel: %w", err)
	}
	gen, err := model.ReadGenerationConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("hfmodel: %w", err)
	}
	return openText(dir, cfg, gen)
}

func openText(dir string, cfg model.Config, gen model.GenerationConfig) (*Folder, error) {
	f := &Folder{Dir: dir}
	var err error
	if f.Tokenizer, err = tokenizer.LoadDir(dir); err != nil {
		return nil, fmt.Errorf("hfmodel: %w", err)
	}
	if f.Chat, err = chat.LoadConfig(dir); err != nil {
		return nil, fmt.Errorf("hfmodel: %w", err)
	}
	if f.Template, err = f.template(false); err != nil {
		return nil, err
	}
	if f.ToolTpl, err = f.template(true); err != nil {
		return nil, err
	}
	f.ToolFormat = chat.DetectFormat(f.ToolTpl.Source())
	f.StopIDs = stopIDs(f.Tokenizer, f.Chat, cfg, gen)
	return f, nil
}

func (f *Folder) template(withTools bool) (*chat.Template, error) {
	src, err := f.Chat.TemplateSource(withTools)
	if err != nil {
		return nil, fmt.Errorf("hfmodel: %s: %w", f.Dir, err)
	}
	t, err := chat.NewTemplate(src)
	if err != nil {
		return nil, fmt.Errorf("hfmodel: %s: chat template: %w", f.Dir, err)
	}
	return t, nil
}

// stopIDs collects the ids that end a turn: the model's EOS ids and the
// chat markers that close an assistant message.
func stopIDs(tok *tokenizer.Tokenizer, cc *chat.Config, cfg model.Config, gen model.GenerationConfig) []int {
	var ids []int
	add := func(id int) {
		if id >= 0 && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range cfg.EOSTokenID {
		add(id)
	}
	for _, id := range gen.EOSTokenID {
		add(id)
	}
	for _, t := range []string{cc.EOSToken, "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|end_of_text|>", "<end_of_turn>"} {
		if id, ok := tok.ID(t); ok && t != "" {
			add(id)
		}
	}
	return ids
}

// RenderOptions are the template options the folder renders with: its BOS
// and EOS tokens and the caller's chat_template_kwargs.
func (f *Folder) RenderOptions(kwargs map[string]any) chat.RenderOptions {
	return chat.RenderOptions{BOSToken: f.Chat.BOSToken, EOSToken: f.Chat.EOSToken, Kwargs: kwargs}
}

// TrainTokenizer returns how the trainer turns histories into tokens, and
// how inference builds its prompts (train.Tokenizer.EncodePrompt), so the
// two render with the same templates and options.
func (f *Folder) TrainTokenizer() *train.Tokenizer {
	return &train.Tokenizer{Tok: f.Tokenizer, Template: f.Template, ToolTemplate: f.ToolTpl, Render: f.RenderOptions(nil)}
}
