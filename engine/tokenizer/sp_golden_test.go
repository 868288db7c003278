package tokenizer

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/artgo/art/internal/testassets"
)

// testdata/sp_golden.json holds the reference (@lenml/tokenizers) ids and
// decoded texts of the SentencePiece-style tokenizers for golden.json's
// texts plus its own extra cases; testdata/gen/gen.sh regenerates it.
type spGolden struct {
	Extra map[string]string `json:"extra"`
	IDs   map[string]struct {
		SHA256  string            `json:"tokenizer_json_sha256"`
		Cases   map[string][]int  `json:"cases"`
		Decoded map[string]string `json:"decoded"`
	} `json:"ids"`
}

var loadSPGolden = sync.OnceValues(testdataJSON[spGolden]("sp_golden.json"))

var spAssets = []string{testassets.Llama2Tokenizer, testassets.Gemma3Tokenizer}

// spTexts returns every text of the SentencePiece golden set by name.
func spTexts(t *testing.T) (*spGolden, map[string]string, []string) {
	t.Helper()
	g, err := loadSPGolden()
	if err != nil {
		t.Fatalf("read sp_golden.json: %v", err)
	}
	texts := map[string]string{}
	for n, s := range readGolden(t).Texts {
		texts[n] = s
	}
	for n, s := range g.Extra {
		texts[n] = s
	}
	names := make([]string, 0, len(texts))
	for n := range texts {
		names = append(names, n)
	}
	sort.Strings(names)
	return g, texts, names
}

// Ensure the SentencePiece-style tokenizers (Llama 2, Gemma 3) encode and
// decode every golden text as the reference does.
func TestGoldenSentencePiece(t *testing.T) {
	g, texts, names := spTexts(t)
	for _, asset := range spAssets {
		t.Run(asset, func(t *testing.T) {
			tk := checkedTokenizer(t, asset, g.IDs[asset].SHA256, "sp_golden.json")
			ref := g.IDs[asset]
			if len(ref.Cases) != len(texts) {
				t.Fatalf("sp_golden.json has %d %s cases for %d texts: run testdata/gen/gen.sh", len(ref.Cases), asset, len(texts))
			}
			bad, badDecode := 0, 0
			for _, name := range names {
				got, want := tk.Encode(texts[name]), ref.Cases[name]
				if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
					bad++
					if bad <= 5 {
						k := firstDiff(got, want)
						t.Errorf("%s: token %d: got %d (%q); want %d (%q)\ntext %q\ngot  %v\nwant %v", name, k,
							at(got, k), tk.TokenString(at(got, k)), at(want, k), tk.TokenString(at(want, k)), texts[name], got, want)
					}
				}
				// Decode the reference's ids; the reference turns bytes that
				// are not UTF-8 into U+FFFD, Decode keeps them.
				dec, err := tk.Decode(want)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if dec = strings.ToValidUTF8(dec, "\uFFFD"); dec != ref.Decoded[name] {
					badDecode++
					if badDecode <= 5 {
						t.Errorf("%s: Decode = %q; reference %q", name, dec, ref.Decoded[name])
					}
				}
				// Streaming gives what Decode gives.
				d := tk.NewDecoder()
				var sb strings.Builder
				for _, id := range want {
					sb.WriteString(d.Next(id))
				}
				sb.WriteString(d.Flush())
				if whole, _ := tk.Decode(want); sb.String() != whole {
					t.Errorf("%s: streamed %q; Decode %q", name, sb.String(), whole)
				}
			}
			if bad+badDecode > 0 {
				t.Errorf("%d of %d texts encode and %d decode differently", bad, len(texts), badDecode)
			} else {
				t.Logf("%d of %d texts match the reference", len(texts), len(texts))
			}
		})
	}
}
