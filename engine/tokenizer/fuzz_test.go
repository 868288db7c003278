package tokenizer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/artgo/art/internal/testassets"
)

// FuzzEncodeDecode ensures Decode(Encode(s)) gives s back (normalized) for
// the real tokenizers, that streaming decoding adds up to Decode, and that
// nothing panics on invalid UTF-8. The seeds are the golden texts. In CI:
//
//	go test -run '^$' -fuzz FuzzEncodeDecode -fuzztime 20s ./engine/tokenizer/
func FuzzEncodeDecode(f *testing.F) {
	g := readGolden(f)
	for _, name := range g.names() {
		f.Add(g.Texts[name])
	}
	tks := []*Tokenizer{
		realTokenizer(f, "qwen3"),
		realTokenizer(f, "llama3_1"),
		tiny(f, [][2]string{{"a", "b"}, {" ", "a"}, {"\n", "\n"}}),
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tk := range tks {
			if !utf8.ValidString(s) {
				// Invalid bytes are encoded byte by byte; without a
				// normalizer they come back unchanged.
				ids := tk.Encode(s)
				if len(tk.normalizer) == 0 {
					if got, err := tk.Decode(ids); err != nil || got != s {
						t.Errorf("Decode(Encode(%q)) = %q, %v", s, got, err)
					}
				}
				continue
			}
			checkRoundTrip(t, tk, s)
			checkStreaming(t, tk, tk.Encode(s))
			ids := tk.EncodeOrdinary(s)
			if got, _ := tk.Decode(ids); len(tk.normalizer) == 0 && got != s {
				t.Errorf("Decode(EncodeOrdinary(%q)) = %q", s, got)
			}
		}
	})
}

// benchText returns mixed English and code: the Go standard library's
// net/http/server.go (about 130 KB, one third comments), read from GOROOT.
func benchText(b *testing.B) string {
	b.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skipf("go env GOROOT: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "src", "net", "http", "server.go"))
	if err != nil {
		b.Skip(err)
	}
	return string(data)
}

// BenchmarkEncode measures Encode throughput (MB/s of input) on one
// goroutine: on Go source with its comments ("code") and on the multilingual
// golden corpus ("corpus"), with the word cache warm (the steady state of a
// server) and without it ("nocache", every piece merged afresh).
func BenchmarkEncode(b *testing.B) {
	code := benchText(b)
	g := readGolden(b)
	var corpus strings.Builder
	for _, name := range g.names() {
		corpus.WriteString(g.Texts[name])
		corpus.WriteString("\n")
	}
	for _, asset := range realAssets {
		tk := realTokenizer(b, asset)
		noCache := *tk
		noCache.cache = nil
		for _, in := range []struct {
			name, text string
			tk         *Tokenizer
		}{
			{"code", code, tk},
			{"corpus", corpus.String(), tk},
			{"code-nocache", code, &noCache},
		} {
			b.Run(asset+"/"+in.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.text)))
				cpu := cpuSeconds()
				for b.Loop() {
					in.tk.Encode(in.text)
				}
				reportCPURate(b, len(in.text), cpu)
			})
		}
	}
}

// reportCPURate reports MB of input per second of process CPU time since
// cpu0 ("cpu-MB/s"): on a shared machine wall-clock MB/s drops when other
// processes take the cores, CPU time much less so.
func reportCPURate(b *testing.B, size int, cpu0 float64) {
	if d := cpuSeconds() - cpu0; d > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/d/1e6, "cpu-MB/s")
	}
}

// BenchmarkDecode measures Decode throughput (MB/s of output).
func BenchmarkDecode(b *testing.B) {
	code := benchText(b)
	tk := realTokenizer(b, "qwen3")
	ids := tk.Encode(code)
	b.SetBytes(int64(len(code)))
	for b.Loop() {
		if _, err := tk.Decode(ids); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad measures parsing the Qwen3 tokenizer.json (11 MB).
func BenchmarkLoad(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(testassets.Dir(b, testassets.Qwen3Tokenizer), "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParse feeds arbitrary tokenizer.json documents to Parse: a bad file is
// an error, never a panic; a file that parses encodes and decodes text
// without panicking, and every id it produces is in its vocabulary.
func FuzzParse(f *testing.F) {
	f.Add(tinyJSON(f, [][2]string{{"a", "b"}, {" ", "a"}, {"\n", "\n"}}, gpt2PreTokenizer))
	f.Add(tinyJSON(f, nil, nil))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"added_tokens":[{"id":3,"content":"<s>","special":true}]}`))
	f.Add([]byte(`{"model":{"type":"WordPiece"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := Parse(data)
		if err != nil {
			return
		}
		for _, s := range []string{"hello <|end|> wörld\n\n", "ab ab", "\xff\xfe", ""} {
			ids := tk.Encode(s)
			for _, id := range ids {
				if id < 0 || id >= tk.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside the vocabulary of %d", s, id, tk.VocabSize())
				}
			}
			tk.Decode(ids)
			dec := tk.NewDecoder()
			for _, id := range ids {
				dec.Next(id)
			}
		}
		tk.VocabBytes()
	})
}
