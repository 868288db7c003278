package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestMalformed ensures broken or unsupported tokenizer.json files give a
// one-line error that says what is wrong.
func TestMalformed(t *testing.T) {
	// good returns a valid tiny tokenizer.json as a map to break.
	good := func() map[string]any {
		var m map[string]any
		if err := json.Unmarshal(tinyJSON(t, [][2]string{{"a", "b"}}, gpt2PreTokenizer), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	model := func(m map[string]any) map[string]any { return m["model"].(map[string]any) }
	tests := []struct {
		name        string
		data        func() any // a map to marshal, or a string used as is
		want        string     // a substring of the error
		unsupported bool
	}{
		{"empty", func() any { return "" }, "invalid JSON at byte 0", false},
		{"truncated", func() any { return `{"model": {"type": "BPE"` }, "invalid JSON", false},
		{"not an object", func() any { return `[1, 2]` }, "invalid JSON: unexpected array for top level at byte 1", false},
		{"model not an object", func() any { return `{"model": 5}` }, "invalid JSON: unexpected number for model", false},
		{"unigram", func() any { return `{"model": {"type": "Unigram", "vocab": [["a", -1.5]]}}` }, `unsupported model type "Unigram"`, true},
		{"huge id", func() any { m := good(); model(m)["vocab"].(map[string]any)["zz"] = 1 << 40; return m }, "id out of range", false},
		{"sparse ids", func() any { m := good(); model(m)["vocab"].(map[string]any)["zz"] = 1 << 30; return m }, "too sparse", false},
		{"no model", func() any { m := good(); delete(m, "model"); return m }, "no model", false},
		{"null model", func() any { m := good(); m["model"] = nil; return m }, "no model", false},
		{"untyped model", func() any { m := good(); delete(model(m), "type"); return m }, "model has no type", false},
		{"unknown model type", func() any { m := good(); model(m)["type"] = "Unigram"; return m }, `unsupported model type "Unigram"`, true},
		{"wordpiece", func() any { m := good(); model(m)["type"] = "WordPiece"; return m }, `model type "WordPiece"`, true},
		{"byte fallback", func() any { m := good(); model(m)["byte_fallback"] = true; return m }, "byte_fallback", true},
		{"dropout", func() any { m := good(); model(m)["dropout"] = 0.1; return m }, "dropout", true},
		{"empty vocab", func() any { m := good(); model(m)["vocab"] = map[string]int{}; return m }, "empty vocab", false},
		{"vocab not ints", func() any { m := good(); model(m)["vocab"] = map[string]string{"a": "x"}; return m }, `vocab: token "a": want a token id`, false},
		{"negative id", func() any { m := good(); model(m)["vocab"].(map[string]any)["zz"] = -3; return m }, "integer from 0", false},
		{"missing byte", func() any { m := good(); delete(model(m)["vocab"].(map[string]any), "Ġ"); return m }, "byte 0x20", false},
		{"non byte-level vocab", func() any { m := good(); model(m)["vocab"].(map[string]any)["▁the"] = 9999; return m }, "byte-level", true},
		{"merge not in vocab", func() any { m := good(); model(m)["merges"] = []string{"x y"}; return m }, `merge 0 ("x" "y")`, false},
		{"bad merge string", func() any { m := good(); model(m)["merges"] = []string{"xy"}; return m }, "one space", false},
		{"bad merge pair", func() any { m := good(); model(m)["merges"] = [][]string{{"x"}}; return m }, "two tokens", false},
		{"no pre-tokenizer", func() any { m := good(); m["pre_tokenizer"] = nil; return m }, "ByteLevel pre-tokenizer", true},
		{"metaspace", func() any {
			m := good()
			m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁"}
			return m
		}, `pre-tokenizer type "Metaspace"`, true},
		{"unknown regex", func() any {
			m := good()
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\w+|[^\w\s]+`}, "behavior": "Isolated"},
				map[string]any{"type": "ByteLevel", "use_regex": false},
			}}
			return m
		}, `pre-tokenizer regex "\\w+|[^\\w\\s]+"`, true},
		{"split without byte level", func() any {
			m := good()
			m["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": " "}, "behavior": "Isolated"}
			return m
		}, "regex", true},
		{"removed behavior", func() any {
			m := good()
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "Removed"},
				map[string]any{"type": "ByteLevel"},
			}}
			return m
		}, "Split without a Regex", true},
		{"lowercase normalizer", func() any { m := good(); m["normalizer"] = map[string]any{"type": "Lowercase"}; return m }, `normalizer type "Lowercase"`, true},
		{"metaspace decoder", func() any { m := good(); m["decoder"] = map[string]any{"type": "Metaspace"}; return m }, `decoder type "Metaspace"`, true},
		{"added token without id", func() any {
			m := good()
			m["added_tokens"] = []any{map[string]any{"content": "<s>"}}
			return m
		}, `added token "<s>" has no valid id`, false},
		{"added token twice", func() any {
			m := good()
			m["added_tokens"] = []any{map[string]any{"id": 300, "content": "<s>"}, map[string]any{"id": 301, "content": "<s>"}}
			return m
		}, "listed twice", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var data []byte
			switch d := tt.data().(type) {
			case string:
				data = []byte(d)
			default:
				var err error
				if data, err = json.Marshal(d); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Parse(data)
			if err == nil {
				t.Fatalf("Parse: no error; want one containing %q", tt.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "tokenizer: ") || strings.Contains(msg, "\n") || !strings.Contains(msg, tt.want) {
				t.Errorf("Parse: error %q; want one line starting with \"tokenizer: \" and containing %q", msg, tt.want)
			}
			if errors.Is(err, ErrUnsupported) != tt.unsupported {
				t.Errorf("errors.Is(%q, ErrUnsupported) = %v; want %v", msg, !tt.unsupported, tt.unsupported)
			}
		})
	}
}

// TestLoad ensures Load and LoadDir read files and name the file in errors.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, tinyJSON(t, [][2]string{{"a", "b"}}, gpt2PreTokenizer), 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := pieces(tk, tk.Encode("ab")); !slices.Equal(got, []string{"ab"}) {
		t.Errorf("Encode(ab) = %q; want [ab]", got)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Load(missing) error = %v; want one naming the file", err)
	}
	if err := os.WriteFile(path, []byte(`{"model": null}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || err.Error() != "tokenizer: "+path+": no model" {
		t.Errorf("Load(no model) error = %v; want %q", err, "tokenizer: "+path+": no model")
	}
}

// TestPreTokenizerConfigs ensures the supported pre-tokenizer layouts split
// as the reference does: a Split step with ByteLevel, ByteLevel alone (with
// its GPT-2 regex), add_prefix_space.
func TestPreTokenizerConfigs(t *testing.T) {
	split := func(regex string, byteLevel map[string]any) map[string]any {
		return map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regex}, "behavior": "Isolated", "invert": false},
			byteLevel,
		}}
	}
	var qwen, llama string
	for s, p := range knownPatterns {
		switch p {
		case patQwen2:
			qwen = s
		case patLlama3:
			llama = s
		}
	}
	text := "Hi  there, it's 12345<|end|> ok<x>y"
	tests := []struct {
		name string
		pre  any
		want []string
	}{
		{"gpt2 byte level", gpt2PreTokenizer,
			[]string{"H", "i", " ", " ", "t", "h", "e", "r", "e", ",", " ", "i", "t", "'", "s", " ", "1", "2", "3", "4", "5", "<|end|>", " ", "o", "k", "<x>", "y"}},
		{"qwen2 split", split(qwen, map[string]any{"type": "ByteLevel", "use_regex": false}),
			[]string{"H", "i", " ", " ", "t", "h", "e", "r", "e", ",", " ", "i", "t", "'", "s", " ", "1", "2", "3", "4", "5", "<|end|>", " ", "o", "k", "<x>", "y"}},
		{"prefix space", map[string]any{"type": "ByteLevel", "use_regex": true, "add_prefix_space": true},
			[]string{" ", "H", "i", " ", " ", "t", "h", "e", "r", "e", ",", " ", "i", "t", "'", "s", " ", "1", "2", "3", "4", "5", "<|end|>", " ", "o", "k", "<x>", " ", "y"}},
		{"split then gpt2", split(llama, map[string]any{"type": "ByteLevel", "use_regex": true}),
			[]string{"H", "i", " ", " ", "t", "h", "e", "r", "e", ",", " ", "i", "t", "'", "s", " ", "1", "2", "3", "4", "5", "<|end|>", " ", "o", "k", "<x>", "y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk, err := Parse(tinyJSON(t, nil, tt.pre)) // no merges: one token per byte shows the bytes
			if err != nil {
				t.Fatal(err)
			}
			if got := pieces(tk, tk.Encode(text)); !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q) = %q; want %q", text, got, tt.want)
			}
		})
	}
	// Piece boundaries show with merges: "Hi" merges within a piece only.
	tk, err := Parse(tinyJSON(t, [][2]string{{" ", "t"}, {"1", "2"}, {"2", "3"}}, split(llama, map[string]any{"type": "ByteLevel", "use_regex": false})))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pieces(tk, tk.Encode(" t 12345 1234")), []string{" t", " ", "12", "3", "4", "5", " ", "12", "3", "4"}; !slices.Equal(got, want) {
		t.Errorf("llama3 digits: got %q; want %q", got, want)
	}
}

// TestAddedTokens ensures added tokens are cut out first, the longest at the
// leftmost position, and that lstrip/rstrip trim the neighbouring text.
func TestAddedTokens(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(tinyJSON(t, nil, gpt2PreTokenizer), &m); err != nil {
		t.Fatal(err)
	}
	m["added_tokens"] = []any{
		map[string]any{"id": 300, "content": "<a>", "special": true},
		map[string]any{"id": 301, "content": "<a><b>", "special": true},
		map[string]any{"id": 302, "content": "[L]", "lstrip": true},
		map[string]any{"id": 303, "content": "[R]", "rstrip": true},
		map[string]any{"id": 304, "content": "b>", "special": true},
	}
	data, _ := json.Marshal(m)
	tk, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text string
		want []string
	}{
		{"<a><b>", []string{"<a><b>"}},
		{"<a><b", []string{"<a>", "<", "b"}},
		{"x<a>b>", []string{"x", "<a>", "b>"}},
		{"x \t [L] y", []string{"x", "[L]", " ", "y"}},
		{"x [R] \n y", []string{"x", " ", "[R]", "y"}},
		{"[R]   ", []string{"[R]"}},
		{"[L][R]", []string{"[L]", "[R]"}},
	}
	for _, tt := range tests {
		if got := pieces(tk, tk.Encode(tt.text)); !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q) = %q; want %q", tt.text, got, tt.want)
		}
	}
	if got, want := pieces(tk, tk.EncodeOrdinary("<a>[L]")), []string{"<", "a", ">", "[L]"}; !slices.Equal(got, want) {
		t.Errorf("EncodeOrdinary = %q; want %q", got, want)
	}
}

// TestAPI checks the accessors on the real Qwen3 tokenizer.
func TestAPI(t *testing.T) {
	tk := realTokenizer(t, "qwen3")
	if got := tk.VocabSize(); got != 151669 {
		t.Errorf("VocabSize = %d; want 151669", got)
	}
	for _, tt := range []struct {
		token   string
		id      int
		special bool
	}{
		{"<|endoftext|>", 151643, true},
		{"<|im_start|>", 151644, true},
		{"<|im_end|>", 151645, true},
		{"<think>", 151667, false},
		{"</think>", 151668, false},
		{"Hello", 9707, false},
		{"Ġworld", 1879, false},
		{"Ċ", 198, false},
	} {
		id, ok := tk.ID(tt.token)
		if !ok || id != tt.id {
			t.Errorf("ID(%q) = %d, %v; want %d", tt.token, id, ok, tt.id)
		}
		if got := tk.TokenString(tt.id); got != tt.token {
			t.Errorf("TokenString(%d) = %q; want %q", tt.id, got, tt.token)
		}
		if got := tk.IsSpecial(tt.id); got != tt.special {
			t.Errorf("IsSpecial(%d) = %v; want %v", tt.id, got, tt.special)
		}
	}
	if got := string(tk.TokenBytes(1879)); got != " world" {
		t.Errorf("TokenBytes(1879) = %q; want \" world\"", got)
	}
	for _, id := range []int{-1, 151669, 1 << 40} {
		if tk.TokenBytes(id) != nil || tk.TokenString(id) != "" || tk.IsSpecial(id) {
			t.Errorf("id %d: want nil/empty/false", id)
		}
	}
	if _, ok := tk.ID("no such token"); ok {
		t.Error(`ID("no such token") found`)
	}
	vb := tk.VocabBytes()
	if len(vb) != tk.VocabSize() || string(vb[1879]) != " world" || vb[151645] != nil || vb[151667] != nil {
		t.Errorf("VocabBytes: %d ids, 1879 %q, <|im_end|> %q, <think> %q; want the vocabulary's bytes and nil for added tokens",
			len(vb), vb[1879], vb[151645], vb[151667])
	}
	added := tk.AddedTokens()
	if len(added) != 26 || added[0].Content != "<|endoftext|>" || !added[0].Special || added[25].Content != "</think>" {
		t.Errorf("AddedTokens = %d tokens, first %+v", len(added), added[0])
	}
	added[0].Content = "changed"
	if tk.AddedTokens()[0].Content != "<|endoftext|>" {
		t.Error("AddedTokens returned the tokenizer's own slice")
	}
	// Every id has a spelling that maps back to it.
	for id := range tk.VocabSize() {
		if got, ok := tk.ID(tk.TokenString(id)); !ok || got != id {
			t.Fatalf("ID(TokenString(%d) = %q) = %d, %v", id, tk.TokenString(id), got, ok)
		}
	}
	if _, err := tk.Decode([]int{9707, 151669}); !errors.Is(err, ErrUnknownID) || !strings.Contains(err.Error(), "151669 at index 1") {
		t.Errorf("Decode(bad id) error = %v; want ErrUnknownID naming the id", err)
	}
	if got := tk.NewDecoder().Next(200000); got != "" {
		t.Errorf("Decoder.Next(unknown) = %q; want \"\"", got)
	}
	if s := tk.String(); !strings.Contains(s, "151643 vocab") || !strings.Contains(s, "NFC") {
		t.Errorf("String() = %q", s)
	}
}

// TestEncodeOrdinary ensures EncodeOrdinary never yields special tokens and
// otherwise encodes like Encode.
func TestEncodeOrdinary(t *testing.T) {
	g := readGolden(t)
	for _, asset := range realAssets {
		t.Run(asset, func(t *testing.T) {
			tk := realTokenizer(t, asset)
			for _, name := range g.names() {
				text := g.Texts[name]
				ids := tk.EncodeOrdinary(text)
				for _, id := range ids {
					if tk.IsSpecial(id) {
						t.Fatalf("%s: EncodeOrdinary gave special token %q", name, tk.TokenString(id))
					}
				}
				if !strings.Contains(text, "<|") && !slices.Equal(ids, tk.Encode(text)) {
					t.Errorf("%s: EncodeOrdinary differs from Encode on text without special tokens", name)
				}
				checkRoundTrip(t, tk, text)
			}
		})
	}
	tk := realTokenizer(t, "qwen3")
	ids := tk.EncodeOrdinary("<|im_start|>user<think>")
	if got, _ := tk.Decode(ids); got != "<|im_start|>user<think>" || ids[len(ids)-1] != 151667 {
		t.Errorf("EncodeOrdinary = %v (%q); want <|im_start|> as text and <think> as 151667", ids, got)
	}
}

// TestConcurrent ensures concurrent Encode calls (sharing the word cache)
// give the sequential results; run with -race.
func TestConcurrent(t *testing.T) {
	g := readGolden(t)
	tk := realTokenizer(t, "llama3_1")
	names := g.names()
	want := make([][]int, len(names))
	for i, n := range names {
		want[i] = g.IDs["llama3_1"].Cases[n]
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for r := range 3 {
				for i := range names {
					k := (i + w*7 + r) % len(names)
					if got := tk.Encode(g.Texts[names[k]]); !slices.Equal(got, want[k]) && len(want[k]) > 0 {
						t.Errorf("%s: concurrent Encode differs", names[k])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
