package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/artgo/art/internal/testassets"
)

// The reference data in testdata/golden.json comes from transformers.js
// (@lenml/tokenizers) via testdata/gen/gen.sh; see that script to regenerate
// it after editing testdata/corpus.json.

// golden is testdata/golden.json.
type golden struct {
	Generator string                         `json:"generator"`
	Unicode   string                         `json:"unicode"`
	Texts     map[string]string              `json:"texts"`
	Splits    map[string]map[string][]string `json:"splits"` // pattern -> case -> pieces
	IDs       map[string]struct {
		SHA256 string           `json:"tokenizer_json_sha256"`
		Cases  map[string][]int `json:"cases"`
	} `json:"ids"` // asset -> ...
}

var loadGolden = sync.OnceValues(testdataJSON[golden]("golden.json"))

// testdataJSON returns a function decoding testdata/name into a T.
func testdataJSON[T any](name string) func() (*T, error) {
	return func() (*T, error) {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			return nil, err
		}
		var v T
		err = json.Unmarshal(data, &v)
		return &v, err
	}
}

func readGolden(tb testing.TB) *golden {
	tb.Helper()
	g, err := loadGolden()
	if err != nil {
		tb.Fatalf("read golden.json: %v", err)
	}
	return g
}

// names returns the case names in a stable order.
func (g *golden) names() []string {
	names := make([]string, 0, len(g.Texts))
	for n := range g.Texts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// tokenizers under test: asset name -> loaded once per test binary.
var loaded sync.Map // asset name -> *Tokenizer

// realTokenizer loads the tokenizer of a fetched asset (skipping the test
// when it is missing) and checks it is the file the golden ids came from.
func realTokenizer(tb testing.TB, asset string) *Tokenizer {
	tb.Helper()
	return checkedTokenizer(tb, asset, readGolden(tb).IDs[asset].SHA256, "golden.json")
}

// checkedTokenizer loads the tokenizer of a fetched asset, checking its
// sha256 is want, the file golden (a testdata file) was made from.
func checkedTokenizer(tb testing.TB, asset, want, golden string) *Tokenizer {
	tb.Helper()
	dir := testassets.Dir(tb, asset)
	if t, ok := loaded.Load(asset); ok {
		return t.(*Tokenizer)
	}
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != want {
		tb.Fatalf("%s: sha256 %x, %s was made from %s: rerun scripts/fetch-assets.sh", path, sum, golden, want)
	}
	t, err := Parse(data)
	if err != nil {
		tb.Fatal(err)
	}
	loaded.Store(asset, t)
	return t
}

var realAssets = []string{testassets.Qwen3Tokenizer, testassets.Llama31Tokenizer}

// TestGoldenFresh ensures golden.json was generated from the current corpus.
func TestGoldenFresh(t *testing.T) {
	g := readGolden(t)
	data, err := os.ReadFile(filepath.Join("testdata", "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus []struct{ Name, Text string }
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatal(err)
	}
	for _, c := range corpus {
		if got, ok := g.Texts[c.Name]; !ok || got != c.Text {
			t.Fatalf("corpus case %q differs from golden.json: run testdata/gen/gen.sh", c.Name)
		}
	}
	if g.Unicode != unicodeVersion {
		t.Errorf("golden.json made with Unicode %s, unicode_tables.go with %s: run testdata/gen/gen.sh", g.Unicode, unicodeVersion)
	}
	for _, asset := range realAssets {
		if n := len(g.IDs[asset].Cases); n != len(g.Texts) {
			t.Errorf("%s: %d cases with ids; want %d", asset, n, len(g.Texts))
		}
	}
}

// TestGoldenSplits ensures each pre-tokenizer scanner splits every golden
// text exactly as the reference regex does.
func TestGoldenSplits(t *testing.T) {
	g := readGolden(t)
	for _, p := range []pattern{patGPT2, patQwen2, patLlama3} {
		t.Run(p.String(), func(t *testing.T) {
			want := g.Splits[p.String()]
			if len(want) == 0 {
				t.Fatalf("no golden splits for %s", p)
			}
			bad := 0
			for _, name := range g.names() {
				text := g.Texts[name]
				var got []string
				for i := 0; i < len(text); {
					j := p.split(text, i)
					if j <= i {
						t.Fatalf("%s: split(%q, %d) = %d; no progress", name, text, i, j)
					}
					got = append(got, text[i:j])
					i = j
				}
				if !slices.Equal(got, want[name]) && !(len(got) == 0 && len(want[name]) == 0) {
					bad++
					if bad <= 5 {
						k := firstDiff(got, want[name])
						t.Errorf("%s: piece %d: got %q; want %q\ntext %q", name, k, at(got, k), at(want[name], k), text)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d texts split differently", bad, len(g.Texts))
			}
		})
	}
}

// TestGoldenIDs ensures Encode gives the reference's ids on the real Qwen3
// and Llama 3.1 tokenizers, for every golden text.
func TestGoldenIDs(t *testing.T) {
	g := readGolden(t)
	for _, asset := range realAssets {
		t.Run(asset, func(t *testing.T) {
			tk := realTokenizer(t, asset)
			cases := g.IDs[asset].Cases
			bad := 0
			for _, name := range g.names() {
				got, want := tk.Encode(g.Texts[name]), cases[name]
				if slices.Equal(got, want) || (len(got) == 0 && len(want) == 0) {
					continue
				}
				bad++
				if bad <= 5 {
					k := firstDiff(got, want)
					t.Errorf("%s: token %d: got %d (%q); want %d (%q)\ngot  %v\nwant %v", name, k,
						at(got, k), tk.TokenString(at(got, k)), at(want, k), tk.TokenString(at(want, k)), got, want)
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d texts encode differently", bad, len(g.Texts))
			} else {
				t.Logf("%d of %d texts match the reference", len(g.Texts), len(g.Texts))
			}
		})
	}
}

// TestRoundTrip ensures Decode(Encode(s)) gives s back, normalized.
func TestRoundTrip(t *testing.T) {
	g := readGolden(t)
	for _, asset := range realAssets {
		t.Run(asset, func(t *testing.T) {
			tk := realTokenizer(t, asset)
			for _, name := range g.names() {
				checkRoundTrip(t, tk, g.Texts[name])
			}
		})
	}
}

// checkRoundTrip checks Decode(Encode(s)) against s: equal for a tokenizer
// without normalizer, equal to NFC(s) for Qwen's NFC normalizer. (With added
// tokens each section is normalized alone, which can differ from normalizing
// the whole text when a combining mark follows a token, so then only NFC of
// both sides is compared.)
func checkRoundTrip(tb testing.TB, tk *Tokenizer, s string) {
	tb.Helper()
	ids := tk.Encode(s)
	got, err := tk.Decode(ids)
	if err != nil {
		tb.Fatalf("Decode(Encode(%q)): %v", s, err)
	}
	want := s
	for _, f := range tk.normalizer {
		want = f.String(want)
	}
	if got == want {
		return
	}
	if len(tk.normalizer) > 0 && norm.NFC.String(got) == norm.NFC.String(want) {
		return
	}
	tb.Errorf("Decode(Encode(%q)) = %q; want %q (ids %v)", s, got, want, ids)
}

// TestDecoderStreaming ensures that feeding ids one by one to a Decoder
// yields only whole characters and adds up to Decode of all ids.
func TestDecoderStreaming(t *testing.T) {
	g := readGolden(t)
	for _, asset := range realAssets {
		t.Run(asset, func(t *testing.T) {
			tk := realTokenizer(t, asset)
			for _, name := range g.names() {
				checkStreaming(t, tk, tk.Encode(g.Texts[name]))
			}
		})
	}
}

func checkStreaming(tb testing.TB, tk *Tokenizer, ids []int) {
	tb.Helper()
	full, err := tk.Decode(ids)
	if err != nil {
		tb.Fatal(err)
	}
	d := tk.NewDecoder()
	var sb strings.Builder
	for i, id := range ids {
		out := d.Next(id)
		if utf8.ValidString(full) && !utf8.ValidString(out) {
			tb.Fatalf("Next(ids[%d]=%d) = %q: not valid UTF-8 (ids %v)", i, id, out, ids)
		}
		sb.WriteString(out)
		if !strings.HasPrefix(full, sb.String()) {
			tb.Fatalf("after ids[%d] the stream is %q; not a prefix of %q", i, sb.String(), full)
		}
	}
	sb.WriteString(d.Flush())
	if sb.String() != full {
		tb.Fatalf("stream %q; Decode %q (ids %v)", sb.String(), full, ids)
	}
}

func firstDiff[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func at[T any](s []T, i int) T {
	var zero T
	if i < len(s) {
		return s[i]
	}
	return zero
}
