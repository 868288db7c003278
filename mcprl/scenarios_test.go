package mcprl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/artgo/art/ruler"
)

func sample() Scenarios {
	var s Scenarios
	for i := range 10 {
		s = append(s, Scenario{Task: fmt.Sprintf("task %d", i), Difficulty: i%5 + 1})
	}
	return s
}

func TestScenarios_Collection(t *testing.T) {
	s := sample()
	a, b := s.Shuffle(7), s.Shuffle(7)
	if !reflect.DeepEqual(a, b) || reflect.DeepEqual(a, s) || len(a) != len(s) {
		t.Errorf("Shuffle(7) twice: %v, %v", a, b)
	}
	if s[0].Task != "task 0" {
		t.Error("Shuffle changed its receiver")
	}
	train, val := s.Split(7)
	if len(train) != 7 || len(val) != 3 || val[0] != s[7] {
		t.Errorf("Split(7) = %d, %d", len(train), len(val))
	}
	if tr, v := s.Split(99); len(tr) != 10 || len(v) != 0 {
		t.Errorf("Split(99) = %d, %d", len(tr), len(v))
	}
	if f := s.FilterByDifficulty(2, 3); len(f) != 4 || f[0].Difficulty != 2 {
		t.Errorf("FilterByDifficulty(2, 3) = %v", f)
	}
	if h := s.Histogram(); h != [6]int{0, 2, 2, 2, 2, 2} {
		t.Errorf("Histogram = %v", h)
	}
	path := filepath.Join(t.TempDir(), "s.json")
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadScenarios(path)
	if err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	for _, bad := range []string{`{"task":"x"}`, `[{"task":"x","difficulty":9}]`, `[{"task":"","difficulty":1}]`, `[{"task":"x","difficulty":1,"extra":1}]`} {
		os.WriteFile(path, []byte(bad), 0o644)
		if _, err := LoadScenarios(path); err == nil {
			t.Errorf("LoadScenarios accepted %s", bad)
		}
	}
}

// Ensure a generator that keeps answering the wrong number of scenarios
// is asked again, then gives an error saying what came back. The endpoint
// stands in for a hosted generator: a model under constrained decoding
// (our own server) cannot answer the wrong count.
func TestGenerate_WrongCount(t *testing.T) {
	var calls atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		content := `{"scenarios":[{"task":"only one","difficulty":2}]}`
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "created": 1, "model": "g",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}}})
	}))
	defer hs.Close()
	gen := ruler.Judge{Model: "g", BaseURL: hs.URL + "/v1"}
	_, err := Generate(context.Background(), gen, []Tool{{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)}}, GenerateOptions{Count: 3, MaxRetries: 2})
	if err == nil || !strings.Contains(err.Error(), "1 scenarios, not 3") || !strings.Contains(err.Error(), "after 3 attempts") || calls.Load() != 3 {
		t.Fatalf("err %v after %d calls", err, calls.Load())
	}
	if _, err := Generate(context.Background(), gen, nil, GenerateOptions{}); err == nil {
		t.Error("generated tasks for no tools")
	}
}
