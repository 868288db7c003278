package native

import (
	"slices"
	"testing"
)

// Ensure parallel_tool_calls false's constraint (oneCallConstraint) lets
// any token through until the first call's closing marker has been
// sampled, however the tokenizer cuts the text, and then only the end of
// the turn: with the real Qwen3 tokenizer, whose </tool_call> is one
// special token, and with the marker spelled out in pieces.
func TestOneCallConstraint(t *testing.T) {
	h := openTinyQwen3(t)
	defer h.Close()
	newC := h.oneCallConstraint()
	if newC == nil {
		t.Fatal("no constraint for the Hermes tool-call format")
	}
	stops := h.folder.StopIDs
	if len(stops) == 0 {
		t.Fatal("the model has no stop tokens")
	}
	other := h.tok.Encode("hello")[0]
	call := "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"
	for _, pieces := range [][]int{
		h.tok.Encode(call),
		// The marker spelled in single bytes' tokens where it can be.
		append(h.tok.Encode("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n"), encodeEach(h, "</tool_call>")...),
	} {
		c := newC()
		for i, id := range pieces {
			if !c.Allows(other) || !c.Allows(id) {
				t.Fatalf("before the call is complete (token %d of %d) a token is refused", i, len(pieces))
			}
			if err := c.Accept(id); err != nil {
				t.Fatal(err)
			}
		}
		if c.Allows(other) {
			t.Errorf("after the first complete call (%d tokens) another token is allowed", len(pieces))
		}
		mask := make([]uint64, (h.tok.VocabSize()+63)/64)
		c.FillMask(mask)
		for w, word := range mask {
			for b := range 64 {
				if id := 64*w + b; word&(1<<b) != 0 != slices.Contains(stops, id) {
					t.Fatalf("after the call, token %d's mask bit is %v; only the stop tokens %v may follow", id, word&(1<<b) != 0, stops)
				}
			}
		}
		if err := c.Accept(other); err == nil {
			t.Error("accepting a token after the call succeeded")
		}
		if err := c.Accept(stops[0]); err != nil {
			t.Errorf("the end of the turn after the call: %v", err)
		}
	}
}

// encodeEach encodes s one byte at a time (as the model may spell a
// marker without its special token).
func encodeEach(h *Host, s string) []int {
	var ids []int
	for i := range len(s) {
		ids = append(ids, h.tok.Encode(s[i:i+1])...)
	}
	return ids
}
