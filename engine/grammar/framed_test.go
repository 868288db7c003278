package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// Ensure a Framed matcher forces the prefix ids, one document, the suffix
// ids and then a stop token, whatever the sampler picks among what it
// allows (random walks with the byte vocabulary), and refuses anything
// else at each point.
func TestFramed_RandomWalks(t *testing.T) {
	v := byteVocab(t)
	g := mustCompile(t, `{"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"]}},"required":["name","arguments"]}`)
	ids := func(s string) []int {
		out := make([]int, len(s))
		for i := range len(s) {
			out[i] = int(s[i])
		}
		return out
	}
	const pre, suf = "<tool_call>\n", "\n</tool_call>"
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		f := g.NewFramedMatcher(v, ids(pre), ids(suf))
		text, ok := walk(t, f, v, rng, 2000, func(id int) string { return string(rune(id)) })
		if !ok {
			t.Fatalf("no stop after %q", text)
		}
		if !strings.HasPrefix(text, pre) || !strings.HasSuffix(text, suf) {
			t.Fatalf("frame missing: %q", text)
		}
		var call struct {
			Name      string `json:"name"`
			Arguments struct {
				City *string `json:"city"`
			} `json:"arguments"`
		}
		doc := strings.TrimSuffix(strings.TrimPrefix(text, pre), suf)
		if err := json.Unmarshal([]byte(doc), &call); err != nil || call.Name != "get_weather" || call.Arguments.City == nil {
			t.Fatalf("document %q: %+v, %v", doc, call, err)
		}
		if f.Allows('x') || f.Allows(256) || f.Accept(256) == nil {
			t.Fatal("a finished frame allows more")
		}
	}
	f := g.NewFramedMatcher(v, ids(pre), ids(suf))
	if f.Allows(256) || f.Allows('{') || !f.Allows('<') {
		t.Fatal("the prefix is not forced")
	}
	if f.Accept('x') == nil {
		t.Fatal("Accept took a token outside the prefix")
	}
}
