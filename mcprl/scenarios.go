package mcprl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/internal/atomicfile"
	"github.com/artgo/art/ruler"
)

// Scenario is one generated training task.
type Scenario struct {
	Task       string `json:"task"`
	Difficulty int    `json:"difficulty"` // 1 (one or two tool calls) to 5 (many steps)
}

// Scenarios is a collection of generated tasks.
type Scenarios []Scenario

// GenerateOptions configure Generate. The zero value asks for 24 tasks.
type GenerateOptions struct {
	// Count is how many tasks to generate; 0 means 24.
	Count int
	// Resources are shown to the generator beside the tools.
	Resources []Resource
	// Instructions are appended to the prompt (ART's custom_instructions).
	Instructions string
	// MaxRetries is how many times an answer with the wrong number of
	// tasks (or not the JSON asked for) is asked again; 0 means 2, < 0
	// none.
	MaxRetries int
	// Timeout bounds each generator call; 0 means 5 minutes.
	Timeout time.Duration
	// MaxTaskLength, if > 0, bounds each task's length in the answer's
	// schema (for small generators under constrained decoding).
	MaxTaskLength int
	// Logger receives warnings (nil: slog.Default()).
	Logger *slog.Logger
}

// Generate asks generator (any judge-style endpoint, as RULER's judges:
// a hosted model or `art serve`) for exactly opts.Count diverse, realistic
// tasks that the tools (and resources) can accomplish, each with a
// difficulty from 1 to 5, in one structured-output call (response_format
// json_schema, as OpenPipe ART's generate_scenarios). An answer that is not
// the JSON asked for or has the wrong number of tasks is asked again, up
// to opts.MaxRetries times, saying what was wrong; after that Generate
// fails with an error naming the generator and what came back.
func Generate(ctx context.Context, generator ruler.Judge, tools []Tool, opts GenerateOptions) (Scenarios, error) {
	n := opts.Count
	if n <= 0 {
		n = 24
	}
	if len(tools) == 0 {
		return nil, errors.New("mcprl: generate scenarios: no tools to generate tasks for")
	}
	msgs, err := generatePrompt(tools, opts.Resources, n, opts.Instructions)
	if err != nil {
		return nil, err
	}
	schema := scenariosSchema(n, opts.MaxTaskLength)
	var out Scenarios
	err = ruler.AskJSON(ctx, generator, msgs, "scenarios", schema, ruler.AskOptions{MaxRetries: opts.MaxRetries, Timeout: opts.Timeout, Logger: opts.Logger, What: fmt.Sprintf("%d scenarios", n)},
		func(content string) (string, error) {
			var a struct {
				Scenarios Scenarios `json:"scenarios"`
			}
			if err := json.Unmarshal([]byte(content), &a); err != nil {
				return "Answer with only the JSON object {\"scenarios\": [...]}.", fmt.Errorf("the answer is not the JSON object asked for: %v", err)
			}
			if len(a.Scenarios) != n {
				return fmt.Sprintf("Answer again with exactly %d scenarios.", n), fmt.Errorf("the answer has %d scenarios, not %d", len(a.Scenarios), n)
			}
			if err := a.Scenarios.Validate(); err != nil {
				return "Every task must be non-empty and every difficulty from 1 to 5.", err
			}
			out = a.Scenarios
			return "", nil
		})
	if err != nil {
		return nil, fmt.Errorf("mcprl: %w", err)
	}
	return out, nil
}

// scenariosSchema is the answer's JSON Schema: exactly n tasks.
func scenariosSchema(n, maxTask int) json.RawMessage {
	task := map[string]any{"type": "string", "minLength": 1}
	if maxTask > 0 {
		task["maxLength"] = maxTask
	}
	b, _ := json.Marshal(map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{"scenarios"},
		"properties": map[string]any{"scenarios": map[string]any{
			"type": "array", "minItems": n, "maxItems": n,
			"items": map[string]any{
				"type": "object", "additionalProperties": false, "required": []string{"task", "difficulty"},
				"properties": map[string]any{
					"task":       task,
					"difficulty": map[string]any{"type": "integer", "minimum": 1, "maximum": 5},
				},
			},
		}},
	})
	return b
}

// generatePrompt is OpenPipe ART's scenario prompt, paraphrased.
func generatePrompt(tools []Tool, resources []Resource, n int, instructions string) ([]art.Message, error) {
	tj, err := json.Marshal(tools)
	if err != nil {
		return nil, fmt.Errorf("mcprl: encode tools: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Available tools:\n%s\n\n", tj)
	if len(resources) > 0 {
		rj, err := json.Marshal(resources)
		if err != nil {
			return nil, fmt.Errorf("mcprl: encode resources: %w", err)
		}
		fmt.Fprintf(&b, "Available resources:\n%s\n\n", rj)
	}
	fmt.Fprintf(&b, `Generate %d diverse, realistic tasks that a user could ask an AI assistant to do with these tools.
- Vary them: some need only one or two tool calls, others several steps that build on each other.
- Describe what the user wants, never which tool to call.
- Give each task a difficulty from 1 (simple) to 5 (complex).
- Every task must end with the assistant giving a summary or report of the result.
Answer with a JSON object {"scenarios": [{"task": ..., "difficulty": ...}, ...]} holding exactly %d tasks.`, n, n)
	if instructions != "" {
		b.WriteString("\n\n" + instructions)
	}
	return []art.Message{
		art.SystemMsg("You write realistic, diverse tasks for training AI agents that use tools. You answer with JSON only."),
		art.UserMsg(b.String()),
	}, nil
}

// Validate checks that every task is non-empty and every difficulty is
// from 1 to 5; the error names the first bad scenario.
func (s Scenarios) Validate() error {
	for i, sc := range s {
		if strings.TrimSpace(sc.Task) == "" {
			return fmt.Errorf("scenario %d has an empty task", i+1)
		}
		if sc.Difficulty < 1 || sc.Difficulty > 5 {
			return fmt.Errorf("scenario %d has difficulty %d, not 1 to 5", i+1, sc.Difficulty)
		}
	}
	return nil
}

// Shuffle returns the scenarios in an order shuffled from seed; s is not
// changed.
func (s Scenarios) Shuffle(seed uint64) Scenarios {
	out := append(Scenarios(nil), s...)
	r := rand.New(rand.NewPCG(seed, 0x6d6370726c))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Split returns the first n scenarios and the rest (n is clamped to the
// collection's size), for training and held-out sets.
func (s Scenarios) Split(n int) (first, rest Scenarios) {
	n = max(0, min(n, len(s)))
	return append(Scenarios(nil), s[:n]...), append(Scenarios(nil), s[n:]...)
}

// FilterByDifficulty returns the scenarios whose difficulty is from lo to
// hi, inclusive.
func (s Scenarios) FilterByDifficulty(lo, hi int) Scenarios {
	var out Scenarios
	for _, sc := range s {
		if sc.Difficulty >= lo && sc.Difficulty <= hi {
			out = append(out, sc)
		}
	}
	return out
}

// Histogram counts the scenarios of each difficulty: index d is the count
// of difficulty d (index 0 counts those outside 1 to 5).
func (s Scenarios) Histogram() [6]int {
	var h [6]int
	for _, sc := range s {
		if sc.Difficulty >= 1 && sc.Difficulty <= 5 {
			h[sc.Difficulty]++
		} else {
			h[0]++
		}
	}
	return h
}

// String summarises the collection: its size and difficulty histogram.
func (s Scenarios) String() string {
	h := s.Histogram()
	var b strings.Builder
	fmt.Fprintf(&b, "%d scenarios", len(s))
	for d := 1; d <= 5; d++ {
		fmt.Fprintf(&b, "\n  difficulty %d: %-3d %s", d, h[d], strings.Repeat("█", h[d]))
	}
	return b.String()
}

// Tasks returns the scenarios' tasks.
func (s Scenarios) Tasks() []string {
	out := make([]string, len(s))
	for i, sc := range s {
		out[i] = sc.Task
	}
	return out
}

// Save writes the scenarios to path as JSON, atomically.
func (s Scenarios) Save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("mcprl: encode scenarios: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("mcprl: save scenarios: %w", err)
	}
	return nil
}

// LoadScenarios reads scenarios written by Save (a JSON array of
// {"task", "difficulty"}), and validates them.
func LoadScenarios(path string) (Scenarios, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcprl: load scenarios: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Scenarios
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("mcprl: load scenarios from %s: not a JSON array of {\"task\", \"difficulty\"}: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("mcprl: load scenarios from %s: %w", path, err)
	}
	return s, nil
}
