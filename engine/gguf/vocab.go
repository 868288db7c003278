package gguf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
const (
	tokenNormal      int32 = 1
	tokenUnknown     int32 = 2
	tokenControl     int32 = 3
	tokenUserDefined int32 = 4
	tokenUnused      int32 = 5
	tokenByte        int32 = 6
)

// preTokenizers maps the Split regex of a Hugging Face byte-level BPE
// pre-tokenizer to the tokenizer.ggml.pre name llama.cpp uses for it. Only the
// families the engine supports are listed; Options.Pre covers the others.
var preTokenizers = map[string]string{
	// Qwen2 / Qwen2.5 / Qwen3: digits one at a time.
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "qwen2",
	// Llama 3.x: digits in groups of up to three.
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "llama-bpe",
}

// hfTokenizer is the part of tokenizer.json the export reads.
type hfTokenizer struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type   string            `json:"type"`
		Vocab  map[string]int    `json:"vocab"`
		Merges []json.RawMessage `json:"merges"` // "a b" or ["a", "b"]
		// ByteFallback marks a SentencePiece-style BPE (Llama 2,
		// Mistral, Gemma): metaspace "▁" instead of byte-level symbols,
		// and <0xNN> tokens for bytes no piece covers.
		ByteFallback bool `json:"byte_fallback"`
	} `json:"model"`
}

// hfTokenizerConfig is the part of tokenizer_config.json the export reads.
// Special tokens are a string, null, or an AddedToken object {"content": ...}.
type hfTokenizerConfig struct {
	AddBOSToken  *bool           `json:"add_bos_token"`
	AddEOSToken  *bool           `json:"add_eos_token"`
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	PadToken     json.RawMessage `json:"pad_token"`
	UnkToken     json.RawMessage `json:"unk_token"`
	ChatTemplate json.RawMessage `json:"chat_template"` // a string, or [{"name", "template"}]
}

// vocabulary is a tokenizer turned into GGUF tokenizer metadata.
type vocabulary struct {
	tokens []string
	types  []int32
	merges []string
	pre    string
	// sentencePiece: the vocabulary is written as llama.cpp's "llama"
	// (SentencePiece) tokenizer, with scores instead of merges.
	sentencePiece  bool
	scores         []float32
	addSpacePrefix bool
	bos            int // -1 when unknown
	eos            int
	pad            int
	unk            int
	addBOS         bool
	addEOS         bool
	// chatTemplates maps a template name to its text; "" is the default.
	chatTemplates map[string]string
}

// TokenizerFiles are the files Export reads from the tokenizer directory.
const (
	TokenizerJSON       = "tokenizer.json"
	TokenizerConfigJSON = "tokenizer_config.json"
)

// readVocabulary reads dir/tokenizer.json (required) and
// dir/tokenizer_config.json (optional) and pads the vocabulary to size
// entries. pre overrides the detected pre-tokenizer name. fallbackBOS and
// fallbackEOS (config.json's ids, -1 if none) are used when
// tokenizer_config.json does not name those tokens.
func readVocabulary(dir string, size int, pre string, fallbackBOS, fallbackEOS int) (*vocabulary, error) {
	if dir == "" {
		return nil, errors.New("gguf: no tokenizer directory: GGUF embeds the tokenizer, so the model's tokenizer.json and tokenizer_config.json are needed")
	}
	path := filepath.Join(dir, TokenizerJSON)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("gguf: %s not found: GGUF embeds the tokenizer, so the model folder must hold %s and %s", path, TokenizerJSON, TokenizerConfigJSON)
	}
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	var tok hfTokenizer
	if err := json.Unmarshal(b, &tok); err != nil {
		return nil, fmt.Errorf("gguf: %s: invalid JSON: %w", path, err)
	}
	var cfg hfTokenizerConfig
	cpath := filepath.Join(dir, TokenizerConfigJSON)
	switch cb, err := os.ReadFile(cpath); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("gguf: %w", err)
	default:
		if err := json.Unmarshal(cb, &cfg); err != nil {
			return nil, fmt.Errorf("gguf: %s: invalid JSON: %w", cpath, err)
		}
	}
	v, err := buildVocabulary(&tok, &cfg, size, pre, fallbackBOS, fallbackEOS)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	return v, nil
}

func buildVocabulary(tok *hfTokenizer, cfg *hfTokenizerConfig, size int, pre string, fallbackBOS, fallbackEOS int) (*vocabulary, error) {
	if tok.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer model %q is not supported (only BPE, byte-level or SentencePiece-style)", tok.Model.Type)
	}
	if pre == "" && !tok.Model.ByteFallback {
		var err error
		if pre, err = detectPre(tok.PreTokenizer); err != nil {
			return nil, err
		}
	}
	v := &vocabulary{pre: pre, bos: -1, eos: -1, pad: -1, unk: -1, chatTemplates: map[string]string{}}

	// Place every token at its id; added tokens override the model vocab.
	n := 0
	for _, id := range tok.Model.Vocab {
		n = max(n, id+1)
	}
	// Added tokens beyond the model's rows are left out: the model has no
	// embedding for them, so it can neither read nor write them (Gemma 3's
	// tokenizer carries the multimodal <image_soft_token> one past the
	// text model's 262144 rows).
	for _, a := range tok.AddedTokens {
		if a.ID < size {
			n = max(n, a.ID+1)
		}
	}
	if n > size {
		return nil, fmt.Errorf("the tokenizer has ids up to %d but the model's vocabulary has only %d rows", n-1, size)
	}
	v.tokens = make([]string, size)
	v.types = make([]int32, size)
	set := make([]bool, size)
	for s, id := range tok.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("token %q has negative id %d", s, id)
		}
		if set[id] {
			return nil, fmt.Errorf("id %d is used by %q and %q", id, v.tokens[id], s)
		}
		v.tokens[id], v.types[id], set[id] = s, tokenNormal, true
	}
	for _, a := range tok.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("added token %q has negative id %d", a.Content, a.ID)
		}
		if a.ID >= size {
			continue
		}
		typ := tokenUserDefined
		if a.Special || looksSpecial(a.Content) {
			typ = tokenControl
		}
		v.tokens[a.ID], v.types[a.ID], set[a.ID] = a.Content, typ, true
	}
	// Ids the tokenizer never produces (the model's vocabulary is usually
	// rounded up) get unique placeholder names, as llama.cpp wants every
	// token text distinct.
	for i := range v.tokens {
		if !set[i] {
			v.tokens[i], v.types[i] = fmt.Sprintf("[PAD%d]", i), tokenUnused
		}
	}
	seen := make(map[string]int, size)
	for i, s := range v.tokens {
		if s == "" {
			return nil, fmt.Errorf("token %d is empty", i)
		}
		if j, dup := seen[s]; dup {
			return nil, fmt.Errorf("tokens %d and %d are both %q; llama.cpp needs distinct token texts", j, i, s)
		}
		seen[s] = i
	}

	v.merges = make([]string, len(tok.Model.Merges))
	for i, raw := range tok.Model.Merges {
		m, err := parseMerge(raw)
		if err != nil {
			return nil, fmt.Errorf("merge %d: %w", i, err)
		}
		v.merges[i] = m
	}

	idOf := func(field string, raw json.RawMessage) (int, error) {
		s, ok, err := specialTokenText(raw)
		if err != nil || !ok {
			return -1, err
		}
		if id, found := seen[s]; found {
			return id, nil
		}
		return -1, fmt.Errorf("%s %s %q is not in the vocabulary", TokenizerConfigJSON, field, s)
	}
	var err error
	if v.bos, err = idOf("bos_token", cfg.BOSToken); err != nil {
		return nil, err
	}
	if v.eos, err = idOf("eos_token", cfg.EOSToken); err != nil {
		return nil, err
	}
	if v.pad, err = idOf("pad_token", cfg.PadToken); err != nil {
		return nil, err
	}
	if v.unk, err = idOf("unk_token", cfg.UnkToken); err != nil {
		return nil, err
	}
	if v.bos < 0 && fallbackBOS >= 0 && fallbackBOS < size {
		v.bos = fallbackBOS
	}
	if v.eos < 0 && fallbackEOS >= 0 && fallbackEOS < size {
		v.eos = fallbackEOS
	}

	// add_bos/add_eos: tokenizer_config.json says so explicitly, or the
	// tokenizer's TemplateProcessing wraps a single sequence in them.
	tmplBOS, tmplEOS := templateSpecials(tok.PostProcessor)
	if cfg.AddBOSToken != nil {
		v.addBOS = *cfg.AddBOSToken
	} else {
		v.addBOS = tmplBOS != "" && v.bos >= 0 && v.tokens[v.bos] == tmplBOS
	}
	if cfg.AddEOSToken != nil {
		v.addEOS = *cfg.AddEOSToken
	} else {
		v.addEOS = tmplEOS != "" && v.eos >= 0 && v.tokens[v.eos] == tmplEOS
	}

	if err := parseChatTemplates(cfg.ChatTemplate, v.chatTemplates); err != nil {
		return nil, err
	}
	if tok.Model.ByteFallback {
		v.toSentencePiece(tok)
	}
	return v, nil
}

// looksSpecial reports whether an added token that is not marked special is
// nevertheless a control marker such as <|fim_prefix|>, which llama.cpp must
// not produce from plain text. Tags like <tool_call> or <think> stay
// user-defined: models write them as text.
func looksSpecial(s string) bool {
	return (strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") && len(s) > 4) ||
		(strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>"))
}

// detectPre finds the tokenizer.ggml.pre name from the pre-tokenizer's
// Split regex.
func detectPre(raw json.RawMessage) (string, error) {
	var patterns []string
	var walk func(json.RawMessage)
	walk = func(raw json.RawMessage) {
		var node struct {
			Type    string `json:"type"`
			Pattern struct {
				Regex string `json:"Regex"`
			} `json:"pattern"`
			Pretokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if json.Unmarshal(raw, &node) != nil {
			return
		}
		if node.Type == "Split" && node.Pattern.Regex != "" {
			patterns = append(patterns, node.Pattern.Regex)
		}
		for _, p := range node.Pretokenizers {
			walk(p)
		}
	}
	walk(raw)
	for _, p := range patterns {
		if name, ok := preTokenizers[p]; ok {
			return name, nil
		}
	}
	known := make([]string, 0, len(preTokenizers))
	for _, name := range preTokenizers {
		known = append(known, name)
	}
	sort.Strings(known)
	return "", fmt.Errorf("unrecognised pre-tokenizer (Split regexes %q); known: %s; set Options.Pre to llama.cpp's name for it", patterns, strings.Join(known, ", "))
}

// parseMerge returns a merge as llama.cpp wants it: "left right".
func parseMerge(raw json.RawMessage) (string, error) {
	left, right, err := mergePair(raw)
	if err != nil {
		return "", err
	}
	return left + " " + right, nil
}

// mergePair reads a merge written "a b" or ["a", "b"].
func mergePair(raw json.RawMessage) (left, right string, err error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		left, right, ok := strings.Cut(s, " ")
		if !ok {
			return "", "", fmt.Errorf("%q is not a space-separated pair", s)
		}
		return left, right, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("%s is neither \"a b\" nor [\"a\", \"b\"]", raw)
	}
	if strings.Contains(pair[0], " ") {
		return "", "", fmt.Errorf("left part %q contains a space, which GGUF's \"a b\" form cannot carry", pair[0])
	}
	return pair[0], pair[1], nil
}

// specialTokenText reads a special-token field: a string, null, or an
// AddedToken object.
func specialTokenText(raw json.RawMessage) (string, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, s != "", nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", false, fmt.Errorf("special token %s is neither a string nor {\"content\": ...}", raw)
	}
	return obj.Content, obj.Content != "", nil
}

// templateSpecials returns the special tokens a TemplateProcessing
// post-processor puts before and after a single sequence ("" if none).
func templateSpecials(raw json.RawMessage) (first, last string) {
	type piece struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
		Sequence *struct{} `json:"Sequence"`
	}
	var walk func(json.RawMessage)
	walk = func(raw json.RawMessage) {
		var node struct {
			Type       string            `json:"type"`
			Single     []piece           `json:"single"`
			Processors []json.RawMessage `json:"processors"`
		}
		if json.Unmarshal(raw, &node) != nil {
			return
		}
		if node.Type == "TemplateProcessing" && len(node.Single) > 0 {
			if p := node.Single[0]; p.SpecialToken != nil {
				first = p.SpecialToken.ID
			}
			if p := node.Single[len(node.Single)-1]; p.SpecialToken != nil {
				last = p.SpecialToken.ID
			}
		}
		for _, p := range node.Processors {
			walk(p)
		}
	}
	walk(raw)
	return first, last
}

// parseChatTemplates reads chat_template: a string (the default template) or
// a list of named templates, the one named "default" being the default.
func parseChatTemplates(raw json.RawMessage, out map[string]string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		out[""] = s
		return nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("%s chat_template is neither a string nor a list of {name, template}", TokenizerConfigJSON)
	}
	for _, t := range list {
		name := t.Name
		if name == "default" {
			name = ""
		}
		out[name] = t.Template
	}
	return nil
}

// metadata returns the tokenizer.* key-value pairs of v.
func (v *vocabulary) metadata() []KV {
	kvs := []KV{
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", v.pre},
		{"tokenizer.ggml.tokens", v.tokens},
		{"tokenizer.ggml.token_type", v.types},
		{"tokenizer.ggml.merges", v.merges},
	}
	if v.sentencePiece {
		kvs = []KV{
			{"tokenizer.ggml.model", "llama"},
			{"tokenizer.ggml.tokens", v.tokens},
			{"tokenizer.ggml.scores", v.scores},
			{"tokenizer.ggml.token_type", v.types},
			{"tokenizer.ggml.add_space_prefix", v.addSpacePrefix},
		}
	}
	for _, s := range []struct {
		key string
		id  int
	}{{"bos", v.bos}, {"eos", v.eos}, {"unknown", v.unk}, {"padding", v.pad}} {
		if s.id >= 0 {
			kvs = append(kvs, KV{"tokenizer.ggml." + s.key + "_token_id", uint32(s.id)})
		}
	}
	kvs = append(kvs,
		KV{"tokenizer.ggml.add_bos_token", v.addBOS},
		KV{"tokenizer.ggml.add_eos_token", v.addEOS},
	)
	if t, ok := v.chatTemplates[""]; ok {
		kvs = append(kvs, KV{"tokenizer.chat_template", t})
	}
	var names []string
	for name := range v.chatTemplates {
		if name != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		kvs = append(kvs, KV{"tokenizer.chat_template." + name, v.chatTemplates[name]})
	}
	if len(names) > 0 {
		kvs = append(kvs, KV{"tokenizer.chat_templates", names})
	}
	return kvs
}
