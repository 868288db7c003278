package server

import (
	"encoding/json"
	"testing"
)

// Ensure tools are re-encoded in art.Tool's key order whatever order the
// client used, keeping the parameters' own order and dropping unknown
// fields, so the sampled prompt and the trained history render the same.
func TestCanonicalTools(t *testing.T) {
	in := []json.RawMessage{
		json.RawMessage(`{"function":{"parameters":{"type":"object","properties":{}},"description":"d","name":"f","x":1},"type":"function"}`),
		json.RawMessage(`{"type":"function","function":{"name":"g"}}`),
	}
	out, err := canonicalTools(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}}`,
		`{"type":"function","function":{"name":"g"}}`,
	}
	for i := range want {
		if string(out[i]) != want[i] {
			t.Errorf("tool %d: %s\nwant %s", i, out[i], want[i])
		}
	}
}
