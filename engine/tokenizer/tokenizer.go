// Package tokenizer implements the byte-level BPE tokenizers of Hugging Face
// tokenizer.json files (GPT-2, Llama 3, Qwen2/2.5/3 and their relatives) in
// pure Go.
//
// Token ids equal those of the reference implementation, transformers.js
// (checked against @lenml/tokenizers@3.7.2 on the real Qwen3 and Llama 3.1
// files, see testdata/), because the trainer reuses the exact ids a server
// sampled. Encode works like the reference's encode(text,
// {add_special_tokens: false}):
//
//  1. added tokens (special or not) are cut out of the text first, longest
//     match at the leftmost position, honouring their lstrip/rstrip flags;
//  2. each remaining section is normalized (NFC for Qwen, nothing for
//     Llama 3);
//  3. the pre-tokenizer regex splits it into pieces: the GPT-2, Llama 3
//     (\p{N}{1,3}) and Qwen2 (\p{N}) patterns are implemented as scanners, and
//     any other pattern is refused at load with an error naming it;
//  4. each piece's UTF-8 bytes are merged by BPE, lowest merge rank first and
//     leftmost first among equal ranks (with ignore_merges, a piece that is
//     itself a vocabulary entry maps to it directly).
//
// Character classes (\p{L}, \p{N}, \s) follow the reference's regex engine
// (Unicode 17, JavaScript's \s), see unicode_tables.go; Unicode
// normalization is golang.org/x/text's (Unicode 15), which differs only on
// characters assigned later. Hugging Face's Rust tokenizers (used by vLLM)
// differ from the reference, and so from this package, in a few corners:
// U+0085 is whitespace there and U+FEFF is not (the reverse of JavaScript),
// its Unicode tables are older, and it honours the single_word and
// normalized flags of added tokens (all false in the Qwen and Llama 3 files).
//
// Decoding is byte-level: the bytes of each token are concatenated, so
// decoding the ids of a text gives back the text (normalized). A Decoder
// turns a stream of ids into text without splitting UTF-8 characters.
//
// A *Tokenizer is safe for concurrent use; its only mutable state is internal
// caches, which are synchronised.
package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a byte-level or SentencePiece-style BPE tokenizer loaded
// from a tokenizer.json file.
// It is safe for concurrent use.
type Tokenizer struct {
	// vocab maps the raw bytes of each model token to its id.
	vocab map[string]int32
	// tokens holds the raw bytes of each id (added tokens: their content);
	// kinds says what the id is (kindNone for ids nobody uses).
	tokens []string
	kinds  []uint8
	// byteID is the id of the token of each single byte.
	byteID [256]int32
	// merges maps a pair of token ids (left<<32 | right) to the merge's
	// rank<<32 | merged id.
	merges       *pairTable
	ignoreMerges bool

	normalizer []norm.Form
	pre        preTokenizer

	added   []AddedToken
	addedBy map[string]int // content -> index in added
	// allAdded matches every added token; nonSpecial only those not special.
	allAdded, nonSpecial *matcher

	// whole[id] says whether BPE turns the bytes of vocabulary entry id
	// into id itself (wholeYes, the usual case) or not; filled in lazily.
	whole []atomic.Uint32
	cache *wordCache // BPE results of other pieces; nil: no caching (benchmarks)

	// sp is set for SentencePiece-style BPE (sentencepiece.go); vocab,
	// normalizer and pre are then unused.
	sp *sentencePiece
}

// Token kinds.
const (
	kindNone    uint8 = iota
	kindModel         // a BPE vocabulary entry
	kindAdded         // an added token that is not special
	kindSpecial       // an added token marked special
)

// AddedToken is an entry of tokenizer.json's added_tokens: a string that is
// matched in the text before normalization and pre-tokenization and becomes
// one token. Special tokens are the control tokens of a model (<|im_start|>,
// <|eot_id|>); others, such as Qwen's <think> or <tool_call>, are ordinary
// text that happens to have its own id.
type AddedToken struct {
	ID      int    // the token's id
	Content string // the text it matches
	// Special marks control tokens (EncodeOrdinary treats them as text).
	Special bool
	// LStrip and RStrip remove whitespace to the token's left or right when
	// it is matched in the text.
	LStrip, RStrip bool
	// SingleWord and Normalized are kept from the file but, as in the
	// reference implementation, do not change how the token is matched.
	SingleWord, Normalized bool
}

// Load reads a tokenizer.json file.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return t, nil
}

// LoadDir reads the tokenizer.json of a Hugging Face model folder.
// (tokenizer_config.json, which holds the chat template and the names of the
// BOS/EOS tokens, is read by the chat template package, not here.)
func LoadDir(dir string) (*Tokenizer, error) {
	return Load(filepath.Join(dir, "tokenizer.json"))
}

// Parse reads the contents of a tokenizer.json file.
func Parse(data []byte) (*Tokenizer, error) {
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return t, nil
}

func parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, jsonError(data, err)
	}
	if isSentencePiece(&f) {
		return parseSentencePiece(&f)
	}
	m := f.Model
	if err := checkModel(m); err != nil {
		return nil, err
	}
	t := &Tokenizer{
		vocab:        make(map[string]int32, len(m.Vocab.m)),
		merges:       newPairTable(len(m.Merges.list)),
		ignoreMerges: m.IgnoreMerges,
		addedBy:      make(map[string]int),
		cache:        newWordCache(),
	}
	var err error
	if t.normalizer, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := parseDecoder(f.Decoder); err != nil {
		return nil, err
	}

	// Vocabulary, stored by raw bytes.
	size, err := idSpace(&f)
	if err != nil {
		return nil, err
	}
	t.tokens = make([]string, size)
	t.whole = make([]atomic.Uint32, size)
	t.kinds = make([]uint8, size)
	for tok, id := range m.Vocab.m {
		raw, ok := fromByteLevel(tok)
		if !ok {
			return nil, unsupported("vocab token %q outside the byte-level alphabet (not a byte-level BPE)", tok)
		}
		if t.kinds[id] != kindNone {
			return nil, fmt.Errorf("vocab id %d used twice (%q and %q)", id, toByteLevel(t.tokens[id]), tok)
		}
		t.vocab[raw] = int32(id)
		t.tokens[id] = raw
		t.kinds[id] = kindModel
	}
	for b := range 256 {
		id, ok := t.vocab[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("vocab lacks the byte-level token %q for byte 0x%02X", byteToRune[b], b)
		}
		t.byteID[b] = id
	}

	// Merges. A pair listed twice keeps its last rank, as in the reference.
	var ab []byte
	for rank, mg := range m.Merges.list {
		ab = append(append(ab[:0], mg[0]...), mg[1]...)
		a, okA := m.Vocab.m[mg[0]]
		b, okB := m.Vocab.m[mg[1]]
		c, okC := m.Vocab.m[string(ab)]
		if !okA || !okB || !okC {
			return nil, fmt.Errorf("merge %d (%q %q) uses a token missing from the vocab", rank, mg[0], mg[1])
		}
		t.merges.put(pairKey(int32(a), int32(b)), uint64(rank)<<32|uint64(c))
	}

	if err := t.addTokens(f.AddedTokens); err != nil {
		return nil, err
	}
	return t, nil
}

// addTokens records the added tokens; the id gets their content.
func (t *Tokenizer) addTokens(added []addedJSON) error {
	for _, a := range added {
		if a.Content == "" {
			return fmt.Errorf("added token %d has empty content", *a.ID)
		}
		if _, dup := t.addedBy[a.Content]; dup {
			return fmt.Errorf("added token %q listed twice", a.Content)
		}
		at := AddedToken{ID: *a.ID, Content: a.Content, Special: a.Special, LStrip: a.LStrip,
			RStrip: a.RStrip, SingleWord: a.SingleWord, Normalized: a.Normalized}
		t.addedBy[a.Content] = len(t.added)
		t.added = append(t.added, at)
		t.tokens[at.ID] = at.Content
		t.kinds[at.ID] = kindAdded
		if at.Special {
			t.kinds[at.ID] = kindSpecial
		}
	}
	var all, plain []string
	for _, a := range t.added {
		all = append(all, a.Content)
		if !a.Special {
			plain = append(plain, a.Content)
		}
	}
	t.allAdded = newMatcher(all)
	t.nonSpecial = newMatcher(plain)
	return nil
}

// idSpace returns the number of token ids f uses (the largest plus one),
// checking every id.
func idSpace(f *fileJSON) (int, error) {
	m := f.Model
	size := 0
	for tok, id := range m.Vocab.m {
		if id < 0 || id > maxID {
			return 0, fmt.Errorf("vocab token %q has id %d out of range", tok, id)
		}
		size = max(size, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID == nil || *a.ID < 0 || *a.ID > maxID {
			return 0, fmt.Errorf("added token %q has no valid id", a.Content)
		}
		size = max(size, *a.ID+1)
	}
	if n := len(m.Vocab.m) + len(f.AddedTokens); size > 2*n+1<<16 {
		return 0, fmt.Errorf("token ids are too sparse: %d tokens with ids up to %d", n, size-1)
	}
	return size, nil
}

// maxID bounds token ids so that they fit the int32 tables.
const maxID = 1<<31 - 2

// vocabID returns the id of a vocabulary token given in byte-level form.
func (t *Tokenizer) vocabID(tok string) (int32, bool) {
	raw, ok := fromByteLevel(tok)
	if !ok {
		return 0, false
	}
	id, ok := t.vocab[raw]
	return id, ok
}

// Encode returns the token ids of text. Added tokens, special or not, are
// recognised where they occur; no BOS/EOS or other template tokens are added.
func (t *Tokenizer) Encode(text string) []int {
	return t.encode(text, false)
}

// EncodeOrdinary is Encode with special tokens treated as plain text, so text
// such as "<|im_start|>" from an untrusted source cannot inject control
// tokens. Added tokens that are not special (such as Qwen's <think>) are
// still recognised, as with split_special_tokens=True in Hugging Face
// tokenizers.
func (t *Tokenizer) EncodeOrdinary(text string) []int {
	return t.encode(text, true)
}

func (t *Tokenizer) encode(text string, ordinary bool) []int {
	ids := make([]int, 0, len(text)/3+1)
	added := t.allAdded
	if ordinary {
		added = t.nonSpecial
	}
	if added == nil {
		return t.encodeText(text, ids)
	}
	// Cut the text into sections: added tokens and the text between them.
	var sections []string
	for start, i := 0, 0; ; {
		pos, n := added.next(text, i)
		if n == 0 {
			if start < len(text) {
				sections = append(sections, text[start:])
			}
			break
		}
		if pos > start {
			sections = append(sections, text[start:pos])
		}
		sections = append(sections, text[pos:pos+n])
		start, i = pos+n, pos+n
	}
	// As in the reference, a section is an added token if its text is one
	// (after trimming), and lstrip/rstrip trim the neighbouring sections
	// (with JavaScript's trimEnd/trimStart).
	token := func(s string) (AddedToken, bool) {
		k, ok := t.addedBy[s]
		if !ok || (ordinary && t.added[k].Special) {
			return AddedToken{}, false
		}
		return t.added[k], true
	}
	for i, s := range sections {
		a, ok := token(s)
		if !ok {
			continue
		}
		if a.LStrip && i > 0 {
			sections[i-1] = trimRightSpace(sections[i-1])
		}
		if a.RStrip && i < len(sections)-1 {
			sections[i+1] = trimLeftSpace(sections[i+1])
		}
	}
	for _, s := range sections {
		if a, ok := token(s); ok {
			ids = append(ids, a.ID)
			continue
		}
		ids = t.encodeText(s, ids)
	}
	return ids
}

// encodeText encodes a section without added tokens: normalize, pre-tokenize,
// BPE.
func (t *Tokenizer) encodeText(s string, ids []int) []int {
	if t.sp != nil {
		return t.encodePieces(s, ids)
	}
	for _, f := range t.normalizer {
		s = f.String(s)
	}
	return t.encodeSplits(s, 0, ids)
}

// encodeSplits applies the pre-tokenizer's Split steps from step k on, then
// the ByteLevel step, then BPE.
func (t *Tokenizer) encodeSplits(s string, k int, ids []int) []int {
	if k < len(t.pre.splits) {
		p := t.pre.splits[k]
		last := k == len(t.pre.splits)-1 && !t.pre.prefixSpace && !t.pre.byteRegex
		for i := 0; i < len(s); {
			j := p.split(s, i)
			if last {
				ids = t.encodeWord(s[i:j], ids)
			} else {
				ids = t.encodeSplits(s[i:j], k+1, ids)
			}
			i = j
		}
		return ids
	}
	if len(s) == 0 {
		return ids
	}
	if t.pre.prefixSpace && s[0] != ' ' {
		s = " " + s
	}
	if !t.pre.byteRegex {
		return t.encodeWord(s, ids)
	}
	for i := 0; i < len(s); {
		j := splitGPT2(s, i)
		ids = t.encodeWord(s[i:j], ids)
		i = j
	}
	return ids
}

// encodeWord appends the BPE tokens of one pre-tokenized piece.
func (t *Tokenizer) encodeWord(w string, ids []int) []int {
	switch len(w) {
	case 0:
		return ids
	case 1:
		return append(ids, int(t.byteID[w[0]]))
	}
	// Most pieces of real text are vocabulary entries. With ignore_merges
	// they map to it; otherwise they do when BPE merges them into it, which
	// whole records per id once known.
	id, inVocab := t.vocab[w]
	state := wholeUnknown
	if inVocab {
		if t.ignoreMerges {
			return append(ids, int(id))
		}
		if state = t.whole[id].Load(); state == wholeYes {
			return append(ids, int(id))
		}
	}
	// Other pieces go through the word cache, except a vocabulary entry seen
	// for the first time, whose flag gets set instead.
	cache := t.cache != nil && len(w) <= maxCachedWord && (!inVocab || state == wholeNo)
	if cache {
		if c, ok := t.cache.get(w); ok {
			for _, id := range c {
				ids = append(ids, int(id))
			}
			return ids
		}
	}
	var buf [smallWord]int32
	out := t.bpe(w, buf[:0])
	switch {
	case cache:
		t.cache.put(w, out)
	case inVocab && len(out) == 1 && out[0] == id:
		t.whole[id].Store(wholeYes)
	case inVocab:
		t.whole[id].Store(wholeNo)
	}
	for _, id := range out {
		ids = append(ids, int(id))
	}
	return ids
}

// Values of Tokenizer.whole.
const (
	wholeUnknown uint32 = iota
	wholeYes            // BPE of the token's bytes gives the token itself
	wholeNo             // it gives several tokens (the token is unreachable)
)

// trimLeftSpace and trimRightSpace remove JavaScript whitespace (\s).
func trimLeftSpace(s string) string {
	for len(s) > 0 {
		c, w := classAt(s, 0)
		if c != clsSpace && c != clsNewline {
			break
		}
		s = s[w:]
	}
	return s
}

func trimRightSpace(s string) string {
	for len(s) > 0 {
		r, w := utf8.DecodeLastRuneInString(s)
		if r == utf8.RuneError && w <= 1 {
			break
		}
		if c, _ := classAt(s, len(s)-w); c != clsSpace && c != clsNewline {
			break
		}
		s = s[:len(s)-w]
	}
	return s
}

// VocabSize returns the number of token ids: the largest id, counting added
// tokens, plus one. (A model's embedding may have more rows than this.)
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// TokenBytes returns the bytes a token stands for (an added token: its
// content), or nil for an id no token has. The slice is the caller's.
func (t *Tokenizer) TokenBytes(id int) []byte {
	if !t.valid(id) {
		return nil
	}
	return []byte(t.tokens[id])
}

// VocabBytes returns the bytes of every id below VocabSize: a BPE
// vocabulary entry's bytes (which may be part of a UTF-8 character), nil for
// an added token (chat markers, tool-call tags: they are matched as whole
// strings, never spelled by sampling their bytes) and for an unused id. It
// is what a grammar needs to know which tokens may spell a structured
// answer. The slices are the caller's.
func (t *Tokenizer) VocabBytes() [][]byte {
	out := make([][]byte, len(t.tokens))
	for id := range out {
		if t.kinds[id] == kindModel {
			out[id] = []byte(t.tokens[id])
		}
	}
	return out
}

// TokenString returns a token as tokenizer.json spells it: a vocabulary entry
// in the byte-level alphabet ("Ġhello" for " hello"), an added token as its
// content. It returns "" for an id no token has.
func (t *Tokenizer) TokenString(id int) string {
	if !t.valid(id) {
		return ""
	}
	if t.sp != nil {
		return t.sp.names[id]
	}
	if t.kinds[id] == kindModel {
		return toByteLevel(t.tokens[id])
	}
	return t.tokens[id]
}

// ID returns the id of a token spelled as TokenString spells it: an added
// token's content or a vocabulary entry in byte-level form.
func (t *Tokenizer) ID(token string) (int, bool) {
	if k, ok := t.addedBy[token]; ok {
		return t.added[k].ID, true
	}
	if t.sp != nil {
		id, ok := t.sp.pieces[token]
		return int(id), ok
	}
	id, ok := t.vocabID(token)
	return int(id), ok
}

// AddedTokens returns the added tokens in file order. The slice is the
// caller's.
func (t *Tokenizer) AddedTokens() []AddedToken {
	return append([]AddedToken(nil), t.added...)
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int) bool {
	return t.valid(id) && t.kinds[id] == kindSpecial
}

func (t *Tokenizer) valid(id int) bool {
	return id >= 0 && id < len(t.kinds) && t.kinds[id] != kindNone
}

// String describes the tokenizer in one line, for logs.
func (t *Tokenizer) String() string {
	var b strings.Builder
	if t.sp != nil {
		fmt.Fprintf(&b, "SentencePiece BPE: %d vocab, %d merges, %d added tokens, byte fallback", len(t.sp.pieces), t.merges.n, len(t.added))
		return b.String()
	}
	fmt.Fprintf(&b, "byte-level BPE: %d vocab, %d merges, %d added tokens", len(t.vocab), t.merges.n, len(t.added))
	if len(t.normalizer) > 0 {
		b.WriteString(", normalizer")
		for _, f := range t.normalizer {
			b.WriteString(" " + formName(f))
		}
	}
	b.WriteString(", pre-tokenizer " + t.pre.String())
	if t.ignoreMerges {
		b.WriteString(", ignore_merges")
	}
	return b.String()
}

func formName(f norm.Form) string {
	return [...]string{norm.NFC: "NFC", norm.NFD: "NFD", norm.NFKC: "NFKC", norm.NFKD: "NFKD"}[f]
}

// ErrUnknownID is returned (wrapped) by Decode for an id that no token has.
var ErrUnknownID = errors.New("tokenizer: unknown token id")
