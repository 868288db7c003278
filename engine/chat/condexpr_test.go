package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

// Ensure the conditional-expression rewrite touches only conditionals
// nested in brackets: a template without them (every golden model template
// but Gemma 3's) reaches gonja byte for byte, and a malformed one is left
// for the parser to report.
func TestRewriteConditionals_LeavesOthersAlone(t *testing.T) {
	for _, src := range []string{
		Qwen25Template,
		Llama31Template,
		`{{ x if y else z }}{% set a = b if c %}{% if (a == 'u') != (b % 2 == 0) %}T{% endif %}`,
		`{{ 'if (x if y else z)' }} {# (a if b else c) #} data (a if b else c)`,
		`{{ (x if y else z }}`, // unbalanced: gonja's error
	} {
		if got := rewriteConditionals(src, newConfig()); got != src {
			t.Errorf("%q rewritten as %q", src, got)
		}
	}
}

// Ensure nested conditionals evaluate as Jinja's do: only the chosen
// branch is evaluated, a missing else gives undefined, an else branch can
// itself be a conditional, and the rewrite works in call arguments,
// lists, dict values, subscripts and with \r\n line ends (the expected
// texts are Python jinja2's).
func TestRewriteConditionals_Evaluates(t *testing.T) {
	cases := map[string]string{
		`{{ 'a' + (x if y else raise_exception('eager')) }}`:                                                                                        "aX",
		`{{ (raise_exception('eager') if not y else 'b') }}`:                                                                                        "b",
		`{{ (x if not y) | length }}|{{ [1 if y else 2, 3 if not y else 4 if y else 5] | tojson }}`:                                                 "0|[1, 4]",
		`{{ {'k': 'v' if y else 'w'}['k'] }}{{ 'abc'[1 if y else 2] }}{{ 'x,y'.split(',' if y else ';') | length }}`:                                "vb2",
		"{{ ('z' if y\r\n else 'q') | upper }}":                                                                                                     "Z",
		`{{ 'a' if not y else 'b' if y else 'c' | upper }}|{{ 'a' if not y else 'b' if not y else 'c' | upper }}`:                                   "b|C",
		`{%- set v = 'a' if not y else ('b' if not y else 'c') if y else 'd' -%}{{ v }}{% for m in (['p', 'q'] if y else []) %}{{ m }}{% endfor %}`: "cpq",
	}
	for src, want := range cases {
		tpl, err := NewTemplate(src)
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		got, err := tpl.Render([]json.RawMessage{}, nil, RenderOptions{Kwargs: map[string]any{"x": "X", "y": true}})
		if err != nil || got != want {
			t.Errorf("%q rendered %q, %v; want %q", src, got, err, want)
		}
	}
	if _, err := NewTemplate(`{{ (x if y else z }}`); err == nil || !strings.Contains(err.Error(), "parse template") {
		t.Errorf("unbalanced template: err %v; want gonja's parse error", err)
	}
}

// FuzzNewTemplate compiles arbitrary template sources: the conditional
// rewrite and the parser never panic, and a source without the keyword if
// reaches the parser unchanged.
func FuzzNewTemplate(f *testing.F) {
	for _, s := range []string{
		`{{ 'a' + (x if y else "") }}`,
		`{{ a if b else c if d else e }}{% set v = (a if b) %}`,
		`{% for m in (ms if c else []) %}{{ f(m, k=(1 if m else 2)) }}{% endfor %}`,
		`{{ (a if b else c }}{% set x = ( %}{{ ) }}`,
		"{{ [a if b else {'k': c if d}] }}\r\n{# (a if b) #}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if got := rewriteConditionals(src, newConfig()); !strings.Contains(src, "if") && got != strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n") {
			t.Fatalf("%q without if rewritten as %q", src, got)
		}
		_, _ = NewTemplate(src)
	})
}
