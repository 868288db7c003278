package tokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"
)

// tinyJSON builds a small byte-level BPE tokenizer.json: the 256 byte tokens
// (ids 0–255 in byte order), then one token per merge in merge order, the
// given pre-tokenizer, and two added tokens: "<|end|>" (special) and "<x>".
// Merges are written in raw form ("a", " b") and converted to byte-level.
func tinyJSON(tb testing.TB, merges [][2]string, preTokenizer any) []byte {
	tb.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	var ms [][2]string
	for _, m := range merges {
		a, b := toByteLevel(m[0]), toByteLevel(m[1])
		if _, ok := vocab[a+b]; !ok {
			vocab[a+b] = len(vocab)
		}
		ms = append(ms, [2]string{a, b})
	}
	n := len(vocab)
	doc := map[string]any{
		"version": "1.0",
		"added_tokens": []map[string]any{
			{"id": n, "content": "<|end|>", "special": true},
			{"id": n + 1, "content": "<x>", "special": false},
		},
		"normalizer":    nil,
		"pre_tokenizer": preTokenizer,
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": ms},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// gpt2PreTokenizer is the pre-tokenizer of GPT-2's tokenizer.json.
var gpt2PreTokenizer = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}

func tiny(tb testing.TB, merges [][2]string) *Tokenizer {
	tb.Helper()
	t, err := Parse(tinyJSON(tb, merges, gpt2PreTokenizer))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// pieces returns the tokens of ids as raw strings.
func pieces(t *Tokenizer, ids []int) []string {
	var out []string
	for _, id := range ids {
		out = append(out, string(t.TokenBytes(id)))
	}
	return out
}

// TestBPETieBreak ensures merges go by rank, and leftmost first among pairs
// of equal rank, whatever the word length (linear and heap paths).
func TestBPETieBreak(t *testing.T) {
	tests := []struct {
		name   string
		merges [][2]string
		text   string
		want   []string
	}{
		{"aaa", [][2]string{{"a", "a"}}, "aaa", []string{"aa", "a"}},
		{"aaaaa", [][2]string{{"a", "a"}}, "aaaaa", []string{"aa", "aa", "a"}},
		{"a8", [][2]string{{"a", "a"}, {"aa", "aa"}}, "aaaaaaaa", []string{"aaaa", "aaaa"}},
		{"a7", [][2]string{{"a", "a"}, {"aa", "aa"}}, "aaaaaaa", []string{"aaaa", "aa", "a"}},
		{"a7 rank order", [][2]string{{"aa", "a"}, {"a", "a"}}, "aaaaaaa", []string{"aaa", "aaa", "a"}},
		{"abab", [][2]string{{"a", "b"}, {"b", "a"}}, "abab", []string{"ab", "ab"}},
		{"abab ba first", [][2]string{{"b", "a"}, {"a", "b"}}, "abab", []string{"a", "ba", "b"}},
		{"abc", [][2]string{{"b", "c"}, {"a", "b"}}, "abc", []string{"a", "bc"}},
		{"no merges", nil, "abc", []string{"a", "b", "c"}},
		{"long run", [][2]string{{"a", "a"}}, strings.Repeat("a", 201), append(slices.Repeat([]string{"aa"}, 100), "a")},
		{"long abab", [][2]string{{"b", "a"}, {"a", "b"}}, strings.Repeat("ab", 100),
			append(append([]string{"a"}, slices.Repeat([]string{"ba"}, 99)...), "b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := tiny(t, tt.merges)
			if got := pieces(tk, tk.Encode(tt.text)); !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q) = %q; want %q", tt.text, got, tt.want)
			}
		})
	}
}

// naiveBPE is the oracle: the textbook loop, merging the best pair of a
// plain slice until none is left.
func naiveBPE(t *Tokenizer, w string) []int32 {
	syms := make([]int32, len(w))
	for i := range len(w) {
		syms[i] = t.byteID[w[i]]
	}
	for {
		best, at := noMerge, -1
		for i := 0; i+1 < len(syms); i++ {
			if r := t.pairRank(syms[i], syms[i+1]); r < best {
				best, at = r, i
			}
		}
		if at < 0 {
			return syms
		}
		syms = slices.Replace(syms, at, at+2, int32(uint32(best)))
	}
}

// checkBPE compares bpeLinear (for short words), bpeHeap and the oracle on w.
func checkBPE(tb testing.TB, t *Tokenizer, w string) {
	tb.Helper()
	want := naiveBPE(t, w)
	if len(w) <= smallWord {
		if got := t.bpeLinear(w, nil); !slices.Equal(got, want) {
			tb.Fatalf("bpeLinear(%q) = %v; want %v", w, got, want)
		}
	}
	if got := t.bpeHeap(w, nil); !slices.Equal(got, want) {
		tb.Fatalf("bpeHeap(%q) = %v; want %v", w, got, want)
	}
}

// randomWords returns words over small alphabets, where many merges compete,
// with lengths around the linear/heap threshold and beyond.
func randomWords(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	alphabets := []string{"ab", "a", "abc", " \n", "01", "aeiou tr", "é中a", "\t ", "=-"}
	lengths := []int{2, 3, 4, 5, 6, 8, 12, 17, 30, 63, 64, 65, 100, 300}
	var words []string
	for range n {
		alpha := []rune(alphabets[r.IntN(len(alphabets))])
		var b strings.Builder
		for b.Len() < lengths[r.IntN(len(lengths))] {
			b.WriteRune(alpha[r.IntN(len(alpha))])
		}
		if b.Len() >= 2 {
			words = append(words, b.String())
		}
	}
	return words
}

// TestBPEOracle ensures the linear and heap merge loops agree with the naive
// oracle, on a synthetic vocabulary and on the real ones.
func TestBPEOracle(t *testing.T) {
	t.Run("tiny", func(t *testing.T) {
		tk := tiny(t, [][2]string{{"a", "b"}, {"b", "a"}, {"a", "a"}, {"ab", "ab"}, {"aa", "a"}, {"ba", "b"},
			{"abab", "a"}, {"aa", "aa"}, {"b", "b"}, {"aaaa", "aaaa"}, {"c", "c"}, {"ab", "c"}})
		for _, w := range randomWords(1, 3000) {
			checkBPE(t, tk, w)
		}
	})
	for _, asset := range realAssets {
		t.Run(asset, func(t *testing.T) {
			tk := realTokenizer(t, asset)
			for _, w := range randomWords(2, 1000) {
				checkBPE(t, tk, w)
			}
		})
	}
}

// TestCache ensures cached results equal fresh ones while shards fill up and
// are emptied, also when several goroutines share the cache.
func TestCache(t *testing.T) {
	tk := tiny(t, [][2]string{{"a", "b"}, {"b", "a"}, {"a", "a"}, {"ab", "ab"}, {"c", "a"}})
	words := randomWords(3, 2*cacheShards*cacheShardCap)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := g; i < len(words); i += 2 {
				w := words[i]
				got := tk.encodeWord(w, nil)
				want := naiveBPE(tk, w)
				if len(got) != len(want) {
					t.Errorf("encodeWord(%q) = %v; want %v", w, got, want)
					return
				}
				for k := range got {
					if got[k] != int(want[k]) {
						t.Errorf("encodeWord(%q) = %v; want %v", w, got, want)
						return
					}
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

// TestUnreachableVocabEntry ensures a piece that is a vocabulary entry BPE
// cannot reach (without ignore_merges) encodes to its merges, the first time
// and again once the per-id flag and the cache know it. Every Qwen3 entry is
// reachable; Llama 3.1 has 588 unreachable ones, so it serves with its
// ignore_merges turned off.
func TestUnreachableVocabEntry(t *testing.T) {
	tk := *realTokenizer(t, "llama3_1")
	tk.ignoreMerges = false
	tk.whole = make([]atomic.Uint32, len(tk.tokens))
	tk.cache = newWordCache()
	found := 0
	for raw, id := range tk.vocab {
		if len(raw) < 2 || !utf8.ValidString(raw) || splitLlama3(raw, 0, 3) != len(raw) {
			continue
		}
		want := naiveBPE(&tk, raw)
		if len(want) == 1 && want[0] == id {
			continue
		}
		for range 3 {
			got := tk.Encode(raw)
			if len(got) != len(want) || got[0] != int(want[0]) {
				t.Fatalf("Encode(%q) = %v; want %v (not the vocab entry %d)", raw, got, want, id)
			}
		}
		if found++; found == 20 {
			break
		}
	}
	if found == 0 {
		t.Fatal("no unreachable vocab entry found")
	}
}
