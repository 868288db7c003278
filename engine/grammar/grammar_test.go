package grammar

import (
	"encoding/json"
	"errors"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/internal/schemacheck"
	"github.com/artgo/art/internal/testassets"
)

// byteVocab has one token per byte and a stop token (id 256).
func byteVocab(t testing.TB) *Vocab {
	tokens := make([][]byte, 257)
	for i := range 256 {
		tokens[i] = []byte{byte(i)}
	}
	v, err := NewVocab(tokens, []int{256})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var qwenOnce struct {
	sync.Once
	v   *Vocab
	tok *tokenizer.Tokenizer
	err error
}

// qwenVocab is the real Qwen2.5 vocabulary (151,665 ids), with <|im_end|>
// and <|endoftext|> as stop tokens.
func qwenVocab(t testing.TB) (*Vocab, *tokenizer.Tokenizer) {
	dir := testassets.Dir(t, "qwen3")
	qwenOnce.Do(func() {
		tok, err := tokenizer.LoadDir(dir)
		if err != nil {
			qwenOnce.err = err
			return
		}
		var stop []int
		for _, s := range []string{"<|im_end|>", "<|endoftext|>"} {
			id, _ := tok.ID(s)
			stop = append(stop, id)
		}
		qwenOnce.tok = tok
		qwenOnce.v, qwenOnce.err = NewVocab(tok.VocabBytes(), stop)
	})
	if qwenOnce.err != nil {
		t.Fatal(qwenOnce.err)
	}
	return qwenOnce.v, qwenOnce.tok
}

func mustCompile(t testing.TB, schema string) *Grammar {
	t.Helper()
	g, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return g
}

// feed runs doc through a matcher byte by byte; it returns the offset of
// the first refused byte, or -1, and whether the document is complete.
func feed(g *Grammar, v *Vocab, doc string) (int, bool) {
	m := g.NewMatcher(v)
	for i := 0; i < len(doc); i++ {
		if m.Accept(int(doc[i])) != nil {
			return i, false
		}
	}
	return -1, m.Complete()
}

const judgeSchema = `{"type":"object","properties":{"scores":{"type":"array","minItems":3,"maxItems":3,"items":{"type":"object",
	"properties":{"trajectory_id":{"type":"string","maxLength":4},"explanation":{"type":"string","maxLength":24},
	"score":{"type":"number","minimum":0,"maximum":1}},"required":["trajectory_id","explanation","score"],"additionalProperties":false}}},
	"required":["scores"],"additionalProperties":false}`

// Ensure documents are accepted or refused at the right byte.
func TestMatcher_Documents(t *testing.T) {
	v := byteVocab(t)
	for _, tc := range []struct {
		schema string
		doc    string
		bad    int  // offset of the first refused byte, -1 for none
		done   bool // complete at the end
	}{
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"a":12}`, -1, true},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"a": 12}`, -1, true},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"a":  12}`, 6, false},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, `{}`, 1, false},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"b":1}`, 2, false},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"a":1.5}`, 6, false},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"a":1} `, 7, false},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b"]}`, `{"b":"x"}`, -1, true},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b"]}`, `{"a":"x", "b":""}`, -1, true},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b"]}`, `{"b":"","a":""}`, 7, false},
		{`{"type":"object","properties":{"ab":{"type":"null"},"abc":{"type":"null"}}}`, `{"abc":null}`, -1, true},
		{`{"type":"object","properties":{"ab":{"type":"null"},"abc":{"type":"null"}}}`, `{}`, -1, true},
		{`{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2}`, `[true, false]`, -1, true},
		{`{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2}`, `[]`, 1, false},
		{`{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2}`, `[true,true,`, 10, false},
		{`{"type":"string","maxLength":3}`, `"aé\n"`, -1, true},
		{`{"type":"string","maxLength":3}`, `"abcd"`, 4, false},
		{`{"type":"string","minLength":2}`, `"a"`, 2, false},
		{`{"type":"string"}`, "\"a\nb\"", 2, false},
		{`{"type":"string"}`, `"\x"`, 2, false},
		{`{"type":"string"}`, `"\u00e9\ud800"`, 10, false},
		{`{"type":"string"}`, "\"\xc3\x28\"", 2, false},
		{`{"type":"string"}`, "\"\xe0\x80\x80\"", 2, false},
		{`{"type":"string","pattern":"^[a-z]{2}-[0-9]$"}`, `"ab-7"`, -1, true},
		{`{"type":"string","pattern":"^[a-z]{2}-[0-9]$"}`, `"ab7"`, 3, false},
		{`{"type":"string","pattern":"^[a-z]{2}-[0-9]$"}`, `"ab-"`, 4, false},
		{`{"type":"string","pattern":"cat"}`, `"a cat!"`, -1, true},
		{`{"type":"string","pattern":"cat"}`, `"a ca"`, 5, false},
		{`{"type":"number","minimum":0,"maximum":1}`, `0.75`, -1, true},
		{`{"type":"number","minimum":0,"maximum":1}`, `1.5`, 2, false},
		{`{"type":"number","minimum":0,"maximum":1}`, `-0`, -1, true},
		{`{"type":"number","minimum":0,"maximum":1}`, `2`, 0, false},
		{`{"type":"number","exclusiveMinimum":0,"maximum":1}`, `0`, -1, false},
		{`{"type":"integer","minimum":-5,"maximum":120}`, `-5`, -1, true},
		{`{"type":"integer","minimum":-5,"maximum":120}`, `-6`, 1, false},
		{`{"type":"integer","minimum":-5,"maximum":120}`, `121`, 2, false},
		{`{"type":"integer","minimum":-5,"maximum":120}`, `012`, 1, false},
		{`{"type":"number"}`, `1e5`, 1, false},
		{`{"enum":["win","loss",1,12,null]}`, `"loss"`, -1, true},
		{`{"enum":["win","loss",1,12,null]}`, `1`, -1, true},
		{`{"enum":["win","loss",1,12,null]}`, `12`, -1, true},
		{`{"enum":["win","loss",1,12,null]}`, `13`, 1, false},
		{`{"const":{"a":[1,2]}}`, `{"a":[1,2]}`, -1, true},
		{`{"type":["string","null"],"maxLength":1}`, `null`, -1, true},
		{`{"type":["string","null"],"maxLength":1}`, `"ab"`, 2, false},
		{`{"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}]}`, `{"a":"x"}`, -1, true},
		{`{"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}]}`, `{"a":true}`, 5, false},
		{`{"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["kids"]}},"$ref":"#/$defs/node"}`, `{"kids":[{"kids":[]},{"kids":[{"kids":[]}]}]}`, -1, true},
		{`{}`, `{"x":[1,"a",{"y":null}],"z":-0.5}`, -1, true},
		{`{}`, `true`, -1, true},
		{`{"type":"string","format":"date"}`, `"2026-11-24"`, -1, true},
		{`{"type":"string","format":"date"}`, `"2026-13-01"`, 7, false},
	} {
		bad, done := feed(mustCompile(t, tc.schema), v, tc.doc)
		if bad != tc.bad || done != tc.done {
			t.Errorf("%s on %q: refused at %d, complete %v; want %d, %v", tc.schema, tc.doc, bad, done, tc.bad, tc.done)
		}
	}
	// json_object: any object, nothing else.
	if bad, done := feed(AnyJSONObject(), v, `{"a":{"b":[]}}`); bad != -1 || !done {
		t.Errorf("json_object: refused at %d, complete %v", bad, done)
	}
	if bad, _ := feed(AnyJSONObject(), v, `[1]`); bad != 0 {
		t.Errorf("json_object accepted an array (refused at %d)", bad)
	}
}

// Ensure keywords the grammar cannot enforce are refused by name.
func TestCompile_Unsupported(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"a":{"not":{"type":"string"}}}}`, `/properties/a: keyword "not" is not supported`},
		{`{"allOf":[{"type":"string"}]}`, `keyword "allOf"`},
		{`{"oneOf":[{"type":"string"}]}`, `keyword "oneOf"`},
		{`{"type":"object","patternProperties":{"x":{}}}`, `keyword "patternProperties"`},
		{`{"type":"object","properties":{},"additionalProperties":{"type":"string"}}`, `"additionalProperties": only false`},
		{`{"type":"number","multipleOf":2}`, `keyword "multipleOf"`},
		{`{"type":"array","prefixItems":[{}]}`, `keyword "prefixItems"`},
		{`{"type":"array","uniqueItems":true}`, `keyword "uniqueItems"`},
		{`{"type":"string","format":"hostname"}`, `"format": "hostname" is not supported`},
		{`{"type":"string","pattern":"(?=a)"}`, `"pattern"`},
		{`{"type":"string","pattern":"\\bx"}`, `word boundaries`},
		{`{"type":"string","minLength":3,"maxLength":2}`, `below minLength`},
		{`{"type":"string","maxLength":5,"format":"date"}`, `needs at least 10 characters, but maxLength is 5`},
		{`{"type":"integer","minimum":1.2,"maximum":1.8}`, `no integer`},
		{`{"$ref":"#/$defs/missing"}`, `"$ref"`},
		{`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, `refers to itself`},
		{`{"type":"object","properties":{"a":{}},"required":["b"]}`, `"b", which is not in properties`},
		{`{"type":"strin"}`, `unknown type "strin"`},
		{`[1]`, `must be an object`},
		{`{`, `not valid JSON`},
	} {
		_, err := Compile([]byte(tc.schema))
		var se *SchemaError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%s) = %v; want a SchemaError containing %q", tc.schema, err, tc.want)
		}
	}
}

// Bounded schemas for random walks: a random model must always finish.
var walkSchemas = map[string]string{
	"judge": judgeSchema,
	"enums": `{"type":"object","properties":{"verdict":{"enum":["win","loss","draw"]},"confident":{"type":"boolean"},
		"rank":{"type":"integer","minimum":1,"maximum":9},"note":{"type":["string","null"],"maxLength":10},"version":{"const":2},
		"ratio":{"type":"number","exclusiveMinimum":-1,"exclusiveMaximum":1}},
		"required":["verdict","confident","rank","note","version","ratio"],"additionalProperties":false}`,
	"refs": `{"$defs":{"cell":{"anyOf":[{"type":"integer","minimum":0,"maximum":9},{"type":"string","pattern":"^[XO]$"}]},
		"tree":{"type":"object","properties":{"v":{"$ref":"#/$defs/cell"},"kids":{"type":"array","items":{"$ref":"#/$defs/tree"},"maxItems":2}},"required":["v","kids"]}},
		"type":"object","properties":{"row":{"type":"array","items":{"$ref":"#/$defs/cell"},"minItems":1,"maxItems":3},
		"meta":{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]{2,5}$"}},"required":["id"],"additionalProperties":false}},
		"required":["row","meta"],"additionalProperties":false}`,
	"optional": `{"type":"object","properties":{"name":{"type":"string","minLength":2,"maxLength":8},
		"tags":{"type":"array","items":{"type":"string","maxLength":10,"format":"date"},"maxItems":2},"id":{"type":"string","format":"uuid"}},
		"required":["name"],"additionalProperties":false}`,
}

// constraint is what Matcher and Framed both do (engine/generate's
// Constraint).
type constraint interface {
	Allows(id int) bool
	FillMask(mask []uint64)
	Accept(id int) error
}

// walk samples a document: each token uniformly among those the mask
// allows (a stop token ends it), checking that the mask agrees with Allows
// on a sample of ids. It fails the test on a dead end.
func walk(t *testing.T, m constraint, v *Vocab, rng *rand.Rand, maxTokens int, tokenText func(int) string) (string, bool) {
	t.Helper()
	mask := make([]uint64, (v.Size()+63)/64)
	var doc strings.Builder
	for range maxTokens {
		m.FillMask(mask)
		var allowed []int
		for w, word := range mask {
			for word != 0 {
				allowed = append(allowed, w*64+bits.TrailingZeros64(word))
				word &= word - 1
			}
		}
		for range 64 { // FillMask and Allows agree
			id := rng.IntN(v.Size())
			if got, want := m.Allows(id), mask[id/64]>>(id%64)&1 == 1; got != want {
				t.Fatalf("after %q: Allows(%d %q) = %v, mask says %v", doc.String(), id, tokenText(id), got, want)
			}
		}
		if len(allowed) == 0 {
			t.Fatalf("dead end after %q", doc.String())
		}
		id := allowed[rng.IntN(len(allowed))]
		if err := m.Accept(id); err != nil {
			t.Fatalf("after %q: Accept(%d) of an allowed token: %v", doc.String(), id, err)
		}
		if v.isStop(id) {
			return doc.String(), true
		}
		doc.WriteString(tokenText(id))
	}
	return doc.String(), false
}

// Ensure every document a random walk over the masks produces is valid,
// and ends, with the byte vocabulary (200 walks per schema).
func TestRandomWalks_Bytes(t *testing.T) {
	v := byteVocab(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for name, schema := range walkSchemas {
		g := mustCompile(t, schema)
		for i := range 200 {
			doc, ok := walk(t, g.NewMatcher(v), v, rng, 20000, func(id int) string { return string(rune(id)) })
			doc = latin1ToBytes(doc)
			if !ok {
				t.Fatalf("%s walk %d did not finish: %q", name, i, doc)
			}
			if err := schemacheck.Validate([]byte(schema), []byte(doc)); err != nil {
				t.Fatalf("%s walk %d: %v: %q", name, i, err, doc)
			}
		}
	}
}

// latin1ToBytes undoes string(rune(b)) for bytes >= 0x80.
func latin1ToBytes(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		b = append(b, byte(r))
	}
	return string(b)
}

// Ensure the same with the real Qwen vocabulary, where tokens span
// structure and content, split characters, and hold quotes.
func TestRandomWalks_Qwen(t *testing.T) {
	v, tok := qwenVocab(t)
	rng := rand.New(rand.NewPCG(3, 4))
	text := func(id int) string { return string(tok.TokenBytes(id)) }
	n := 25
	if testing.Short() {
		n = 5
	}
	for name, schema := range walkSchemas {
		g := mustCompile(t, schema)
		for i := range n {
			doc, ok := walk(t, g.NewMatcher(v), v, rng, 5000, text)
			if !ok {
				t.Fatalf("%s walk %d did not finish: %q", name, i, doc)
			}
			if err := schemacheck.Validate([]byte(schema), []byte(doc)); err != nil {
				t.Fatalf("%s walk %d: %v: %q", name, i, err, doc)
			}
		}
	}
}

// Ensure the fast in-string mask equals the trie walk's, on the Qwen
// vocabulary, inside bounded and unbounded strings.
func TestFreeStringMask_MatchesWalk(t *testing.T) {
	v, _ := qwenVocab(t)
	for _, tc := range []struct{ schema, prefix string }{
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, `{"a":"hello`},
		{`{"type":"object","properties":{"a":{"type":"string","maxLength":7}},"required":["a"]}`, `{"a":"hel`},
		{`{"type":"object","properties":{"a":{"type":"string","minLength":5,"maxLength":7}},"required":["a"]}`, `{"a":"hel`},
		{`{"type":"array","items":{"type":"string","maxLength":2},"maxItems":3}`, `["a","`},
	} {
		g := mustCompile(t, tc.schema)
		m := g.NewMatcher(v)
		for i := 0; i < len(tc.prefix); i++ {
			id, ok := byteToken(v, tc.prefix[i])
			if !ok || m.Accept(id) != nil {
				t.Fatalf("%s: prefix byte %d refused", tc.schema, i)
			}
		}
		fast := make([]uint64, v.words)
		if !m.inFreeString(fast) {
			t.Fatalf("%s after %q: not in a free string", tc.schema, tc.prefix)
		}
		slow := make([]uint64, v.words)
		m.walk(slow, 0, 0, m.cur)
		for w := range fast {
			if fast[w] != slow[w] {
				d := fast[w] ^ slow[w]
				id := w*64 + bits.TrailingZeros64(d)
				t.Fatalf("%s after %q: token %d %q: fast %v, walk %v", tc.schema, tc.prefix, id, v.tokens[id], fast[w]>>(id%64)&1, slow[w]>>(id%64)&1)
			}
		}
	}
}

// byteToken finds the token that is exactly byte c.
func byteToken(v *Vocab, c byte) (int, bool) {
	for id, t := range v.tokens {
		if len(t) == 1 && t[0] == c {
			return id, true
		}
	}
	return 0, false
}

// Ensure a matcher never panics on any bytes, and what it accepts as a
// complete document parses as JSON.
func FuzzMatcher(f *testing.F) {
	v := byteVocab(f)
	g, err := Compile([]byte(walkSchemas["refs"]))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"row":[1,"X"],"meta":{"id":"ab"}}`))
	f.Add([]byte(`{"row":[`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, gr := range []*Grammar{g, AnyJSONObject()} {
			m := gr.NewMatcher(v)
			ok := true
			for _, c := range doc {
				if m.Accept(int(c)) != nil {
					ok = false
					break
				}
			}
			if ok && m.Complete() && !json.Valid(doc) {
				t.Fatalf("complete but not JSON: %q", doc)
			}
		}
	})
}
