package chat

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "regenerate testdata/golden with testdata/render.py (needs python3 with jinja2)")

// corpus is testdata/cases.json; messages and tools stay raw so their key
// order reaches the renderer exactly as written.
type corpus struct {
	Templates map[string]struct {
		File     string  `json:"file"`
		BOSToken *string `json:"bos_token"`
		EOSToken *string `json:"eos_token"`
	} `json:"templates"`
	Tools map[string][]json.RawMessage `json:"tools"`
	Cases []struct {
		Name                 string                     `json:"name"`
		Messages             []json.RawMessage          `json:"messages"`
		Tools                string                     `json:"tools"`
		AddGenerationPrompt  bool                       `json:"add_generation_prompt"`
		ContinueFinalMessage bool                       `json:"continue_final_message"`
		Kwargs               map[string]json.RawMessage `json:"kwargs"`
	} `json:"cases"`
}

var regenerateOnce sync.Once

func loadCorpus(tb testing.TB) *corpus {
	tb.Helper()
	if *update {
		regenerateOnce.Do(func() { regenerateGolden(tb) })
	}
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var c corpus
	if err := json.Unmarshal(data, &c); err != nil {
		tb.Fatalf("cases.json: %v", err)
	}
	return &c
}

// regenerateGolden runs render.py when python3 with jinja2 is available.
func regenerateGolden(tb testing.TB) {
	tb.Helper()
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		tb.Logf("-update: python3 with jinja2 not available (%v); golden files left as they are", err)
		return
	}
	cmd := exec.Command("python3", filepath.Join("testdata", "render.py"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("render.py: %v\n%s", err, out)
	}
	tb.Logf("%s", strings.TrimSpace(string(out)))
}

// TestGolden renders every case of cases.json with every template and
// compares the text byte for byte with Python jinja2's (golden/).
func TestGolden(t *testing.T) {
	c := loadCorpus(t)
	for name, spec := range c.Templates {
		src, err := os.ReadFile(filepath.Join("testdata", spec.File))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := NewTemplate(string(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, tc := range c.Cases {
			t.Run(name+"/"+tc.Name, func(t *testing.T) {
				opts := RenderOptions{
					AddGenerationPrompt:  tc.AddGenerationPrompt,
					ContinueFinalMessage: tc.ContinueFinalMessage,
					Kwargs:               map[string]any{},
				}
				if spec.BOSToken != nil {
					opts.BOSToken = *spec.BOSToken
				}
				if spec.EOSToken != nil {
					opts.EOSToken = *spec.EOSToken
				}
				for k, v := range tc.Kwargs {
					opts.Kwargs[k] = v
				}
				var tools []json.RawMessage
				if tc.Tools != "" {
					tools = c.Tools[tc.Tools]
				}
				got, err := tpl.Render(tc.Messages, tools, opts)
				checkGolden(t, filepath.Join("testdata", "golden", name, tc.Name), got, err)
			})
		}
	}
}

// checkGolden compares a render with base+".txt", or its error with
// base+".err" when Python refused the input.
func checkGolden(t *testing.T, base string, got string, err error) {
	t.Helper()
	if want, rerr := os.ReadFile(base + ".err"); rerr == nil {
		line := strings.TrimSuffix(string(want), "\n")
		if err == nil {
			t.Fatalf("got a render; want an error like Python's %q", line)
		}
		if msg, ok := strings.CutPrefix(line, "raise_exception: "); ok {
			var te *TemplateError
			if !errors.As(err, &te) || te.Message != msg {
				t.Fatalf("got error %v; want TemplateError %q", err, msg)
			}
		}
		return
	}
	want, rerr := os.ReadFile(base + ".txt")
	if rerr != nil {
		t.Fatalf("no golden file: %v (run go test -update)", rerr)
	}
	if err != nil {
		t.Fatalf("got error %v; want the render in %s.txt", err, base)
	}
	if got != string(want) {
		t.Fatalf("render differs from %s.txt:\n%s", base, diffSnippet(got, string(want)))
	}
}

// diffSnippet shows where two texts first differ, with some context.
func diffSnippet(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	line := strings.Count(want[:i], "\n") + 1
	clip := func(s string) string {
		from, to := max(0, min(i-120, len(s))), min(i+120, len(s))
		for from > 0 && !utf8.RuneStart(s[from]) {
			from--
		}
		for to < len(s) && !utf8.RuneStart(s[to]) {
			to++
		}
		return s[from:to]
	}
	return fmt.Sprintf("first difference at byte %d (line %d; got %d bytes, want %d)\n--- got:\n%q\n--- want:\n%q",
		i, line, len(got), len(want), clip(got), clip(want))
}
