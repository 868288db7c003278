package gguf

import "encoding/json"

// toSentencePiece turns v, read from a byte-fallback BPE tokenizer.json
// (Llama 2, Mistral, Gemma 3), into llama.cpp's SentencePiece vocabulary
// ("llama"), which is how the converter writes these models from their
// tokenizer.model.
//
// llama.cpp's SentencePiece tokenizer has no merge list: it repeatedly
// joins the adjacent pair whose concatenation is the vocabulary piece of
// highest score. tokenizer.json keeps the merges instead, ranked by the
// very scores the Hugging Face converter read from tokenizer.model (so the
// merges that make one piece sit together). A piece's score is therefore
// minus the rank of the first merge that makes it, which orders the joins
// as the merge list does. Pieces no merge makes (single characters, bytes,
// special tokens) score below every merge.
func (v *vocabulary) toSentencePiece(tok *hfTokenizer) {
	v.sentencePiece = true
	v.pre, v.merges = "", nil
	merges := tok.Model.Merges
	v.scores = make([]float32, len(v.tokens))
	floor := -float32(len(merges) + 1)
	for i := range v.scores {
		v.scores[i] = floor
	}
	for rank := len(merges) - 1; rank >= 0; rank-- { // the first rank wins
		left, right, err := mergePair(merges[rank])
		if err != nil {
			continue // buildVocabulary has refused malformed merges already
		}
		if id, ok := tok.Model.Vocab[left+right]; ok {
			v.scores[id] = -float32(rank)
		}
	}
	for i, s := range v.tokens {
		if v.types[i] == tokenNormal && isByteToken(s) {
			v.types[i] = tokenByte
		}
	}
	if v.unk >= 0 {
		v.types[v.unk] = tokenUnknown
	}
	v.addSpacePrefix = prependsMetaspace(tok.Normalizer) || prependsMetaspace(tok.PreTokenizer)
}

// isByteToken reports whether s names a byte-fallback token, <0xNN>.
func isByteToken(s string) bool {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return false
	}
	for _, c := range s[3:5] {
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'F' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// prependsMetaspace reports whether a normalizer or pre-tokenizer puts "▁"
// before the text (Llama 2's Prepend normalizer, or a Metaspace
// pre-tokenizer that adds a prefix space): llama.cpp's add_space_prefix.
// Gemma's tokenizer only replaces spaces, and prepends nothing.
func prependsMetaspace(raw json.RawMessage) bool {
	var node struct {
		Type           string            `json:"type"`
		Prepend        string            `json:"prepend"`
		PrependScheme  string            `json:"prepend_scheme"`
		AddPrefixSpace *bool             `json:"add_prefix_space"`
		Normalizers    []json.RawMessage `json:"normalizers"`
		Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	}
	if json.Unmarshal(raw, &node) != nil {
		return false
	}
	switch node.Type {
	case "Prepend":
		return node.Prepend == "▁"
	case "Metaspace":
		if node.PrependScheme != "" {
			return node.PrependScheme != "never"
		}
		return node.AddPrefixSpace == nil || *node.AddPrefixSpace
	}
	for _, child := range append(node.Normalizers, node.Pretokenizers...) {
		if prependsMetaspace(child) {
			return true
		}
	}
	return false
}
