package grammar

import "testing"

// BenchmarkFillMask measures one full token mask over the Qwen vocabulary
// (151,665 ids) in the states a RULER answer passes through.
func BenchmarkFillMask(b *testing.B) {
	v, tok := qwenVocab(b)
	g := mustCompile(b, `{"type":"object","properties":{"scores":{"type":"array","items":{"type":"object",
		"properties":{"trajectory_id":{"type":"string","maxLength":8},"explanation":{"type":"string"},
		"score":{"type":"number","minimum":0,"maximum":1}},"required":["trajectory_id","explanation","score"],"additionalProperties":false}}},
		"required":["scores"],"additionalProperties":false}`)
	for _, tc := range []struct{ name, prefix string }{
		{"start", ``},
		{"before_key", `{"scores":[{`},
		{"in_free_string", `{"scores":[{"trajectory_id":"1","explanation":"the agent won`},
		{"in_bounded_string", `{"scores":[{"trajectory_id":"1`},
		{"in_number", `{"scores":[{"trajectory_id":"1","explanation":"","score":0.`},
		{"after_value", `{"scores":[{"trajectory_id":"1","explanation":"","score":0.5}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := g.NewMatcher(v)
			for _, id := range tok.EncodeOrdinary(tc.prefix) {
				if err := m.Accept(id); err != nil {
					b.Fatalf("prefix %q: %v", tc.prefix, err)
				}
			}
			mask := make([]uint64, v.words)
			for b.Loop() {
				m.FillMask(mask)
			}
		})
	}
}
