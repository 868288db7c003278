package tokenizer

import (
	"encoding/json"
	"fmt"
)

// qwen2Pattern is the pre-tokenizer regex of Qwen2 tokenizer.json files.
const qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// ByteVocabJSON returns a tokenizer.json for a byte-level BPE with no
// merges: ids 0..255 are the 256 bytes and the special tokens follow. Tiny
// models trained from scratch use it: a vocabulary of ~260 keeps their LM
// head cheap and every text encodable, while the file stays an ordinary
// Hugging Face tokenizer.json (Qwen2 pre-tokenizer) that other tools load.
func ByteVocabJSON(specials []string) ([]byte, error) {
	vocab := make(map[string]int, 256)
	for b := 0; b < 256; b++ {
		vocab[toByteLevel(string([]byte{byte(b)}))] = b
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var addedTokens []added
	seen := map[string]bool{}
	for i, s := range specials {
		if s == "" || seen[s] {
			return nil, fmt.Errorf("tokenizer: special token %q is empty or repeated", s)
		}
		seen[s] = true
		addedTokens = append(addedTokens, added{ID: 256 + i, Content: s, Special: true})
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	doc := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": addedTokens,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwen2Pattern}, "behavior": "Isolated", "invert": false},
			byteLevel,
		}},
		"post_processor": byteLevel,
		"decoder":        byteLevel,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "", "end_of_word_suffix": "",
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": []string{},
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}
