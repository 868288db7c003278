package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// This file reads tokenizer.json (the Hugging Face tokenizers format) and
// checks that it asks only for what this package implements.

// fileJSON is the part of tokenizer.json this package reads. Truncation,
// padding and the post-processor are ignored: Encode never adds BOS/EOS.
type fileJSON struct {
	AddedTokens  []addedJSON     `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        *modelJSON      `json:"model"`
}

type addedJSON struct {
	ID         *int   `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    *string    `json:"type"`
	Vocab                   vocabJSON  `json:"vocab"`
	Merges                  mergesJSON `json:"merges"`
	Dropout                 *float64   `json:"dropout"`
	ContinuingSubwordPrefix *string    `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string    `json:"end_of_word_suffix"`
	ByteFallback            bool       `json:"byte_fallback"`
	IgnoreMerges            bool       `json:"ignore_merges"`
	UnkToken                *string    `json:"unk_token"`
}

// vocabJSON and mergesJSON decode the two large fields (hundreds of
// thousands of entries) with a small hand-written parser, several times
// faster than encoding/json's reflection. They keep a shape error for later
// rather than failing, so that an unsupported model type is reported as such
// (a Unigram vocab, say, is a list, not an object).

// vocabJSON is the BPE vocabulary: byte-level token -> id.
type vocabJSON struct {
	m   map[string]int
	err error
}

func (v *vocabJSON) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	r := jsonReader{data: data}
	v.m, v.err = r.vocab()
	if v.err != nil {
		v.err = fmt.Errorf("vocab: %v", v.err)
	}
	return nil
}

// mergesJSON is the merge list, each merge stored either as "a b"
// (tokenizers < 0.20, Llama 3) or as ["a", "b"] (newer files, Qwen).
type mergesJSON struct {
	list [][2]string
	err  error
}

func (m *mergesJSON) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	r := jsonReader{data: data}
	m.list, m.err = r.merges()
	if m.err != nil {
		m.err = fmt.Errorf("merges: %v", m.err)
	}
	return nil
}

// jsonReader parses JSON that encoding/json has already checked for syntax
// (Unmarshal validates the whole document before calling an Unmarshaler), so
// it only has to check shapes.
type jsonReader struct {
	data []byte
	i    int
}

func (r *jsonReader) space() {
	for r.i < len(r.data) {
		switch r.data[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (r *jsonReader) peek() byte {
	r.space()
	if r.i < len(r.data) {
		return r.data[r.i]
	}
	return 0
}

func (r *jsonReader) expect(c byte, what string) error {
	if r.peek() != c {
		return fmt.Errorf("want %s at byte %d", what, r.i)
	}
	r.i++
	return nil
}

// str reads a string; only strings with escapes go through encoding/json.
func (r *jsonReader) str() (string, error) {
	if err := r.expect('"', "a string"); err != nil {
		return "", err
	}
	start, escaped := r.i, false
	for ; r.data[r.i] != '"'; r.i++ {
		if r.data[r.i] == '\\' {
			escaped = true
			r.i++
		}
	}
	r.i++
	if !escaped {
		return string(r.data[start : r.i-1]), nil
	}
	var s string
	err := json.Unmarshal(r.data[start-1:r.i], &s)
	return s, err
}

// integer reads a non-negative integer token id.
func (r *jsonReader) integer() (int, error) {
	r.space()
	start, n := r.i, 0
	for r.i < len(r.data) && r.data[r.i] >= '0' && r.data[r.i] <= '9' {
		n = n*10 + int(r.data[r.i]-'0')
		if n > maxID {
			return 0, fmt.Errorf("id out of range at byte %d", start)
		}
		r.i++
	}
	if r.i == start || (r.i < len(r.data) && strings.IndexByte(".eE", r.data[r.i]) >= 0) {
		return 0, fmt.Errorf("want a token id (an integer from 0) at byte %d", start)
	}
	return n, nil
}

// list calls elem for each element of an array (open '[') or each member of
// an object (open '{').
func (r *jsonReader) list(open, close byte, what string, elem func() error) error {
	if err := r.expect(open, what); err != nil {
		return err
	}
	if r.peek() == close {
		r.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if r.peek() == ',' {
			r.i++
			continue
		}
		return r.expect(close, "',' or '"+string(close)+"'")
	}
}

func (r *jsonReader) vocab() (map[string]int, error) {
	m := make(map[string]int, bytes.Count(r.data, []byte(`":`)))
	err := r.list('{', '}', "an object of token ids", func() error {
		tok, err := r.str()
		if err != nil {
			return err
		}
		if err := r.expect(':', "':'"); err != nil {
			return err
		}
		id, err := r.integer()
		if err != nil {
			return fmt.Errorf("token %q: %v", tok, err)
		}
		m[tok] = id
		return nil
	})
	return m, err
}

func (r *jsonReader) merges() ([][2]string, error) {
	var list [][2]string
	err := r.list('[', ']', "a list of merges", func() error {
		if r.peek() == '"' {
			s, err := r.str()
			if err != nil {
				return err
			}
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return fmt.Errorf("merge %d: %q is not two tokens separated by one space", len(list), s)
			}
			list = append(list, [2]string{a, b})
			return nil
		}
		var pair [2]string
		n := 0
		err := r.list('[', ']', "a merge (a string or a list of two strings)", func() error {
			s, err := r.str()
			if err == nil && n < 2 {
				pair[n] = s
			}
			n++
			return err
		})
		if err == nil && n != 2 {
			err = fmt.Errorf("merge %d does not hold two tokens", len(list))
		}
		list = append(list, pair)
		return err
	})
	return list, err
}

// component is a normalizer, pre-tokenizer or decoder entry: a type and its
// parameters.
type component struct {
	Type string `json:"type"`

	// Sequence
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`

	// Split
	Pattern  *struct{ Regex, String *string } `json:"pattern"`
	Behavior string                           `json:"behavior"`
	Invert   bool                             `json:"invert"`

	// ByteLevel
	AddPrefixSpace bool  `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
}

// isNull reports whether a raw JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// ErrUnsupported is matched (with errors.Is) by the error Load and Parse
// return when tokenizer.json asks for a feature this package does not
// implement, as opposed to a file that is malformed.
var ErrUnsupported = errors.New("tokenizer: unsupported feature")

// unsupportedError describes an unsupported feature; it matches ErrUnsupported.
type unsupportedError string

func (e unsupportedError) Error() string        { return "unsupported " + string(e) }
func (e unsupportedError) Is(target error) bool { return target == ErrUnsupported }

func unsupported(format string, args ...any) error {
	return unsupportedError(fmt.Sprintf(format, args...))
}

// parseNormalizer returns the Unicode normalization forms to apply in order.
func parseNormalizer(raw json.RawMessage) ([]norm.Form, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("normalizer: %v", err)
	}
	switch c.Type {
	case "NFC":
		return []norm.Form{norm.NFC}, nil
	case "NFD":
		return []norm.Form{norm.NFD}, nil
	case "NFKC":
		return []norm.Form{norm.NFKC}, nil
	case "NFKD":
		return []norm.Form{norm.NFKD}, nil
	case "Sequence":
		var forms []norm.Form
		for _, sub := range c.Normalizers {
			f, err := parseNormalizer(sub)
			if err != nil {
				return nil, err
			}
			forms = append(forms, f...)
		}
		return forms, nil
	}
	return nil, unsupported("normalizer type %q (supported: NFC, NFD, NFKC, NFKD, Sequence of those)", c.Type)
}

// preTokenizer is a parsed pre-tokenizer: zero or more Split regexes applied
// in turn, then the ByteLevel step, which may prepend a space to each piece
// and split it again with the GPT-2 regex.
type preTokenizer struct {
	splits      []pattern
	prefixSpace bool // ByteLevel add_prefix_space
	byteRegex   bool // ByteLevel use_regex
}

func (p preTokenizer) String() string {
	var parts []string
	for _, s := range p.splits {
		parts = append(parts, "Split("+s.String()+")")
	}
	b := "ByteLevel"
	if p.byteRegex {
		b += "(gpt2)"
	}
	if p.prefixSpace {
		b += "+prefix-space"
	}
	return strings.Join(append(parts, b), " → ")
}

func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	var p preTokenizer
	if isNull(raw) {
		return p, unsupported("tokenizer without a ByteLevel pre-tokenizer (only byte-level BPE is implemented)")
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return p, fmt.Errorf("pre_tokenizer: %v", err)
	}
	steps := []component{c}
	if c.Type == "Sequence" {
		steps = steps[:0]
		for _, sub := range c.Pretokenizers {
			var s component
			if err := json.Unmarshal(sub, &s); err != nil {
				return p, fmt.Errorf("pre_tokenizer: %v", err)
			}
			steps = append(steps, s)
		}
	}
	for i, s := range steps {
		switch s.Type {
		case "Split":
			if s.Pattern == nil || s.Pattern.Regex == nil {
				return p, unsupported("pre-tokenizer Split without a Regex pattern")
			}
			if s.Invert || !strings.EqualFold(s.Behavior, "Isolated") {
				return p, unsupported("pre-tokenizer Split with behavior %q invert %v (supported: Isolated, not inverted)", s.Behavior, s.Invert)
			}
			pat, ok := knownPatterns[*s.Pattern.Regex]
			if !ok {
				return p, unsupported("pre-tokenizer regex %q (known: the GPT-2, Llama 3 and Qwen2 patterns)", *s.Pattern.Regex)
			}
			p.splits = append(p.splits, pat)
		case "ByteLevel":
			if i != len(steps)-1 {
				return p, unsupported("pre-tokenizer steps after ByteLevel")
			}
			p.prefixSpace = s.AddPrefixSpace
			p.byteRegex = s.UseRegex == nil || *s.UseRegex
			return p, nil
		default:
			return p, unsupported("pre-tokenizer type %q (supported: ByteLevel, Split, Sequence of those)", s.Type)
		}
	}
	return p, unsupported("pre-tokenizer without a final ByteLevel step (only byte-level BPE is implemented)")
}

func parseDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return nil // Decode is byte-level whatever the file says.
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("decoder: %v", err)
	}
	if c.Type != "ByteLevel" {
		return unsupported("decoder type %q (supported: ByteLevel)", c.Type)
	}
	return nil
}

// checkModel checks that the model is a BPE this package implements.
func checkModel(m *modelJSON) error {
	switch {
	case m == nil:
		return errors.New("no model")
	case m.Type == nil:
		return errors.New("model has no type")
	case *m.Type != "BPE":
		return unsupported("model type %q (supported: BPE)", *m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return unsupported("BPE dropout %v", *m.Dropout)
	case m.ByteFallback:
		return unsupported("BPE byte_fallback (a SentencePiece-style model)")
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return unsupported("BPE continuing_subword_prefix %q", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return unsupported("BPE end_of_word_suffix %q", *m.EndOfWordSuffix)
	case m.Vocab.err != nil:
		return fmt.Errorf("model %v", m.Vocab.err)
	case m.Merges.err != nil:
		return fmt.Errorf("model %v", m.Merges.err)
	case len(m.Vocab.m) == 0:
		return errors.New("model has an empty vocab")
	}
	return nil
}

// jsonError makes a one-line message of a JSON decoding error.
func jsonError(data []byte, err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("invalid JSON at byte %d: %v", syn.Offset, syn)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		field := typ.Field
		if field == "" {
			field = "top level"
		}
		return fmt.Errorf("invalid JSON: unexpected %s for %s at byte %d", typ.Value, field, typ.Offset)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("empty file")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}
