package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// SentencePiece-style BPE, as Llama 2, Mistral and Gemma ship it in
// tokenizer.json: spaces become the metaspace "▁" (Llama 2 also prepends
// one to each stretch of text between added tokens), the whole stretch is
// one word, BPE merges start from characters rather than bytes, and a
// character the vocabulary lacks falls back to its UTF-8 bytes as the
// tokens <0x00>…<0xFF>. Decoding turns "▁" back into a space and byte
// tokens into their bytes; Llama 2's decoder also drops the text's first
// space (the one its normalizer prepended).

// metaspace is SentencePiece's visible space, U+2581.
const metaspace = "▁"

// sentencePiece is what a SentencePiece-style tokenizer adds to Tokenizer.
type sentencePiece struct {
	pieces map[string]int32 // tokenizer.json's vocab: piece -> id
	names  []string         // id -> piece, "" for ids the vocab lacks
	// prepend: the normalizer prepends "▁" to each stretch of text.
	prepend bool
	// stripFirst: the decoder drops one leading space of the text.
	stripFirst bool
	unk        int32 // id of unk_token, -1 if none
}

// spComponent is the shape of the normalizer, pre-tokenizer and decoder
// steps of a SentencePiece-style tokenizer.json.
type spComponent struct {
	Type          string                    `json:"type"`
	Prepend       string                    `json:"prepend"`
	Content       string                    `json:"content"`
	Pattern       *struct{ String *string } `json:"pattern"`
	Start         int                       `json:"start"`
	Stop          int                       `json:"stop"`
	Normalizers   []json.RawMessage         `json:"normalizers"`
	Pretokenizers []json.RawMessage         `json:"pretokenizers"`
	Decoders      []json.RawMessage         `json:"decoders"`
}

// isSentencePiece reports whether f is a BPE over characters with byte
// fallback (its normalizer replaces spaces by "▁").
func isSentencePiece(f *fileJSON) bool {
	return f.Model != nil && f.Model.ByteFallback
}

// spSteps flattens a Sequence component (or returns the one component).
func spSteps(raw json.RawMessage, what string) ([]spComponent, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c spComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	if c.Type != "Sequence" {
		return []spComponent{c}, nil
	}
	var out []spComponent
	for _, sub := range append(append(c.Normalizers, c.Pretokenizers...), c.Decoders...) {
		var s spComponent
		if err := json.Unmarshal(sub, &s); err != nil {
			return nil, fmt.Errorf("%s: %v", what, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// isReplace reports whether c replaces the string from with to.
func (c spComponent) isReplace(from, to string) bool {
	return c.Type == "Replace" && c.Pattern != nil && c.Pattern.String != nil && *c.Pattern.String == from && c.Content == to
}

// parseSentencePiece reads a SentencePiece-style tokenizer.json: the
// normalizer must be [Prepend "▁"] + Replace " " → "▁", the pre-tokenizer
// none or a Split on " " (a no-op once spaces are gone), the decoder
// Replace "▁" → " ", ByteFallback, Fuse and optionally Strip one leading
// space.
func parseSentencePiece(f *fileJSON) (*Tokenizer, error) {
	m := f.Model
	sp := &sentencePiece{pieces: make(map[string]int32, len(m.Vocab.m)), unk: -1}
	switch {
	case m.Type == nil || *m.Type != "BPE":
		return nil, unsupported("byte_fallback outside a BPE model")
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, unsupported("BPE dropout %v", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "",
		m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, unsupported("BPE subword prefixes or suffixes")
	case m.IgnoreMerges:
		return nil, unsupported("ignore_merges with byte_fallback")
	case m.Vocab.err != nil:
		return nil, fmt.Errorf("model %v", m.Vocab.err)
	case m.Merges.err != nil:
		return nil, fmt.Errorf("model %v", m.Merges.err)
	case len(m.Vocab.m) == 0:
		return nil, fmt.Errorf("model has an empty vocab")
	}
	norms, err := spSteps(f.Normalizer, "normalizer")
	if err != nil {
		return nil, err
	}
	if len(norms) == 2 && norms[0].Type == "Prepend" && norms[0].Prepend == metaspace {
		sp.prepend = true
		norms = norms[1:]
	}
	if len(norms) != 1 || !norms[0].isReplace(" ", metaspace) {
		return nil, unsupported("byte_fallback (SentencePiece-style) tokenizer with a normalizer other than [Prepend \"▁\"] + Replace \" \" → \"▁\"")
	}
	pres, err := spSteps(f.PreTokenizer, "pre_tokenizer")
	if err != nil {
		return nil, err
	}
	for _, p := range pres {
		if p.Type != "Split" || p.Pattern == nil || p.Pattern.String == nil || *p.Pattern.String != " " {
			return nil, unsupported("SentencePiece pre-tokenizer %q (supported: none, or a Split on \" \")", p.Type)
		}
	}
	decs, err := spSteps(f.Decoder, "decoder")
	if err != nil {
		return nil, err
	}
	if n := len(decs); n > 0 && decs[n-1].Type == "Strip" {
		if decs[n-1].Content != " " || decs[n-1].Start != 1 || decs[n-1].Stop != 0 {
			return nil, unsupported("decoder Strip other than one leading space")
		}
		sp.stripFirst = true
		decs = decs[:n-1]
	}
	if len(decs) != 3 || !decs[0].isReplace(metaspace, " ") || decs[1].Type != "ByteFallback" || decs[2].Type != "Fuse" {
		return nil, unsupported("SentencePiece decoder other than Replace \"▁\" → \" \", ByteFallback, Fuse[, Strip]")
	}

	size, err := idSpace(f)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{
		merges:  newPairTable(len(m.Merges.list)),
		addedBy: make(map[string]int),
		tokens:  make([]string, size),
		kinds:   make([]uint8, size),
		whole:   make([]atomic.Uint32, size),
		sp:      sp,
	}
	sp.names = make([]string, size)
	for b := range t.byteID {
		t.byteID[b] = -1
	}
	for piece, id := range m.Vocab.m {
		if t.kinds[id] != kindNone {
			return nil, fmt.Errorf("vocab id %d used twice (%q and %q)", id, sp.names[id], piece)
		}
		sp.pieces[piece] = int32(id)
		sp.names[id] = piece
		t.kinds[id] = kindModel
		t.tokens[id] = strings.ReplaceAll(piece, metaspace, " ")
		if b, ok := byteToken(piece); ok {
			t.byteID[b] = int32(id)
			t.tokens[id] = string([]byte{b})
		}
	}
	if m.UnkToken != nil {
		if id, ok := sp.pieces[*m.UnkToken]; ok {
			sp.unk = id
		}
	}
	for rank, mg := range m.Merges.list {
		a, okA := sp.pieces[mg[0]]
		b, okB := sp.pieces[mg[1]]
		c, okC := sp.pieces[mg[0]+mg[1]]
		if !okA || !okB || !okC {
			return nil, fmt.Errorf("merge %d (%q %q) uses a token missing from the vocab", rank, mg[0], mg[1])
		}
		t.merges.put(pairKey(a, b), uint64(rank)<<32|uint64(c))
	}
	if err := t.addTokens(f.AddedTokens); err != nil {
		return nil, err
	}
	// The decoder's Replace applies to added tokens too (Gemma has "▁▁"…).
	for _, a := range t.added {
		sp.names[a.ID] = a.Content
		t.tokens[a.ID] = strings.ReplaceAll(a.Content, metaspace, " ")
	}
	return t, nil
}

// byteToken parses a byte-fallback piece, "<0x0A>".
func byteToken(piece string) (byte, bool) {
	if len(piece) != 6 || piece[:3] != "<0x" || piece[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range piece[3:5] {
		switch {
		case c >= '0' && c <= '9':
			b = b<<4 | byte(c-'0')
		case c >= 'A' && c <= 'F':
			b = b<<4 | byte(c-'A'+10)
		default:
			return 0, false
		}
	}
	return b, true
}

// encodePieces appends the tokens of a stretch of text without added
// tokens: normalize to metaspace form, start from one symbol per character
// (or its bytes, or unk), merge.
func (t *Tokenizer) encodePieces(s string, ids []int) []int {
	sp := t.sp
	if sp.prepend {
		s = metaspace + s
	}
	s = strings.ReplaceAll(s, " ", metaspace)
	if s == "" {
		return ids
	}
	syms := make([]int32, 0, len(s))
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		if id, ok := sp.pieces[s[i:i+n]]; ok {
			syms = append(syms, id)
		} else {
			syms = t.fallback(syms, s[i:i+n])
		}
		i += n
	}
	var out []int32
	if len(syms) > 1 {
		out = t.mergeHeap(syms, nil)
	} else {
		out = syms
	}
	for _, id := range out {
		ids = append(ids, int(id))
	}
	return ids
}

// fallback appends the byte tokens of a character the vocabulary lacks,
// or unk when a byte token is missing.
func (t *Tokenizer) fallback(syms []int32, char string) []int32 {
	for i := 0; i < len(char); i++ {
		if t.byteID[char[i]] < 0 {
			if t.sp.unk >= 0 {
				return append(syms, t.sp.unk)
			}
			return syms
		}
	}
	for i := 0; i < len(char); i++ {
		syms = append(syms, t.byteID[char[i]])
	}
	return syms
}
