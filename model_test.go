package art

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art/store"
)

// fakeBackend is an in-memory Backend: each Train call advances the step,
// skipping when no group has two different rewards.
type fakeBackend struct {
	baseURL string

	mu       sync.Mutex
	steps    map[string]int
	deleted  [][]int
	trained  int
	closed   bool
	failStep error
}

var _ Backend = (*fakeBackend)(nil)

func newFakeBackend(baseURL string) *fakeBackend {
	return &fakeBackend{baseURL: baseURL, steps: map[string]int{}}
}

func key(m *TrainableModel) string { return m.Project + "/" + m.Name }

func (b *fakeBackend) Register(ctx context.Context, m *TrainableModel) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.steps[key(m)]; !ok {
		b.steps[key(m)] = 0
	}
	return nil
}

func (b *fakeBackend) Step(ctx context.Context, m *TrainableModel) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failStep != nil {
		return 0, b.failStep
	}
	s, ok := b.steps[key(m)]
	if !ok {
		return 0, errors.New("fake: not registered")
	}
	return s, nil
}

func (b *fakeBackend) Train(ctx context.Context, m *TrainableModel, groups []TrajectoryGroup, cfg TrainConfig) (TrainResult, error) {
	if err := cfg.Validate(); err != nil {
		return TrainResult{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	trainable := 0
	for _, g := range groups {
		for _, t := range g.Trajectories {
			if t.Reward != g.Trajectories[0].Reward {
				trainable++
				break
			}
		}
	}
	b.steps[key(m)]++
	b.trained++
	res := TrainResult{Step: b.steps[key(m)], Metrics: map[string]float64{
		"loss/train":                     0.25,
		"data/step_num_groups_trainable": float64(trainable),
	}}
	if trainable == 0 {
		res.Skipped, res.SkipReason = true, "no group has rewards that differ"
	}
	return res, nil
}

func (b *fakeBackend) TrainSFT(ctx context.Context, m *TrainableModel, trajectories []Trajectory, cfg TrainSFTConfig) (TrainResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.steps[key(m)]++
	return TrainResult{Step: b.steps[key(m)], Metrics: map[string]float64{"loss/train": 1.5, "data/step_num_trajectories": float64(len(trajectories))}}, nil
}

func (b *fakeBackend) DeleteCheckpointsExcept(ctx context.Context, m *TrainableModel, keep []int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deleted = append(b.deleted, slices.Clone(keep))
	return nil
}

func (b *fakeBackend) InferenceEndpoint(ctx context.Context, m *TrainableModel, step int) (Endpoint, error) {
	if step < 0 {
		var err error
		if step, err = b.Step(ctx, m); err != nil {
			return Endpoint{}, err
		}
	}
	return Endpoint{BaseURL: b.baseURL, APIKey: "key-123", Model: fmt.Sprintf("%s@%d", m.Name, step)}, nil
}

func (b *fakeBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

func newTrainable(t *testing.T) *TrainableModel {
	t.Helper()
	return &TrainableModel{
		Model:     Model{Name: "agent-1", Project: "ttt", BasePath: t.TempDir()},
		BaseModel: "/models/tiny",
	}
}

func TestTrainableModel_RegisterValidation(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m *TrainableModel)
		want   string
	}{
		{"empty name", func(m *TrainableModel) { m.Name = "" }, "model name: name is empty"},
		{"at sign", func(m *TrainableModel) { m.Name = "agent@2" }, `contains '@'`},
		{"slash", func(m *TrainableModel) { m.Name = "a/b" }, `contains '/'`},
		{"bad project", func(m *TrainableModel) { m.Project = "../x" }, "project"},
		{"no base model", func(m *TrainableModel) { m.BaseModel = "" }, "BaseModel is empty"},
		{"bad lora", func(m *TrainableModel) { m.LoRA.Rank = -4 }, "LoRAConfig.Rank = -4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTrainable(t)
			tt.modify(m)
			b := newFakeBackend("http://unused")
			err := m.Register(context.Background(), b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Register = %v; want an error containing %q", err, tt.want)
			}
			if len(b.steps) != 0 {
				t.Fatal("the backend saw an invalid model")
			}
		})
	}
	if err := newTrainable(t).Register(context.Background(), nil); err == nil {
		t.Fatal("Register with a nil backend: got nil error")
	}
}

func TestTrainableModel_Unregistered(t *testing.T) {
	m := newTrainable(t)
	ctx := context.Background()
	if _, err := m.Step(ctx); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("Step = %v; want ErrNotRegistered", err)
	}
	if _, err := m.OpenAIClient(); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("OpenAIClient = %v; want ErrNotRegistered", err)
	}
	if err := m.DeleteCheckpoints(ctx, ""); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("DeleteCheckpoints = %v; want ErrNotRegistered", err)
	}
	if err := m.Log(ctx, nil, LogOptions{}); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("Log without a step = %v; want ErrNotRegistered", err)
	}
}

func TestTrainableModel_Register(t *testing.T) {
	m := newTrainable(t)
	b := newFakeBackend("http://127.0.0.1:1/v1")
	b.steps[key(m)] = 3 // a run being resumed
	if err := m.Register(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if m.InferenceBaseURL != b.baseURL || m.InferenceAPIKey != "key-123" || m.InferenceModelName != "agent-1@3" {
		t.Fatalf("inference fields %q %q %q; want the backend's endpoint for step 3", m.InferenceBaseURL, m.InferenceAPIKey, m.InferenceModelName)
	}
	tests := []struct {
		step int
		want string
	}{{0, "agent-1@0"}, {7, "agent-1@7"}, {-1, "agent-1@3"}}
	for _, tt := range tests {
		if got := m.InferenceName(tt.step); got != tt.want {
			t.Errorf("InferenceName(%d) = %q; want %q", tt.step, got, tt.want)
		}
	}
	if step, err := m.Step(context.Background()); err != nil || step != 3 {
		t.Fatalf("Step = %d, %v; want 3, nil", step, err)
	}

	data, err := os.ReadFile(filepath.Join(m.BasePath, "ttt", "models", "agent-1", "model.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "key-123") {
		t.Fatalf("model.json holds the API key:\n%s", data)
	}
	var rec map[string]any
	json.Unmarshal(data, &rec)
	if rec["trainable"] != true || rec["base_model"] != "/models/tiny" || rec["name"] != "agent-1" || rec["inference_model_name"] != "agent-1@3" {
		t.Fatalf("model.json = %v", rec)
	}
}

func TestModel_InferenceName(t *testing.T) {
	tests := []struct {
		m    Model
		step int
		want string
	}{
		{Model{Name: "gpt-4.1", InferenceModelName: "openai/gpt-4.1"}, -1, "openai/gpt-4.1"},
		{Model{Name: "gpt-4.1"}, -1, "gpt-4.1"},
		{Model{Name: "mine"}, 2, "mine@2"},
	}
	for _, tt := range tests {
		if got := tt.m.InferenceName(tt.step); got != tt.want {
			t.Errorf("%+v.InferenceName(%d) = %q; want %q", tt.m, tt.step, got, tt.want)
		}
	}
	if _, err := (&Model{Name: "x"}).OpenAIClient(); err == nil || !strings.Contains(err.Error(), "no InferenceBaseURL") {
		t.Fatalf("OpenAIClient without a URL = %v; want a clear error", err)
	}
}

// chatCompletion is a response as our server (or vLLM) sends it: token ids
// and logprobs on every sampled token.
const chatCompletion = `{
  "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "agent-1@3",
  "choices": [{
    "index": 0,
    "message": {"role": "assistant", "content": "Hi!"},
    "finish_reason": "stop",
    "logprobs": {"content": [
      {"token": "Hi", "token_id": 13048, "logprob": -0.5, "bytes": [72, 105], "top_logprobs": []},
      {"token": "token_id:0", "logprob": -0.25, "bytes": [33], "top_logprobs": []}
    ]}
  }],
  "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
}`

// Ensure OpenAIClient talks to the backend's endpoint with the model's key
// only, and its choices convert with token ids intact.
func TestTrainableModel_OpenAIClient(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-must-not-leak")
	t.Setenv("OPENAI_BASE_URL", "http://must-not-be-used.invalid")
	var gotAuth, gotModel string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		gotAuth = r.Header.Get("Authorization")
		var req struct {
			Model string `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		gotModel = req.Model
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatCompletion)
	}))
	defer srv.Close()

	m := newTrainable(t)
	b := newFakeBackend(srv.URL + "/v1")
	b.steps[key(m)] = 3
	if err := m.Register(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    m.InferenceName(-1),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if gotAuth != "Bearer key-123" {
		t.Fatalf("Authorization %q; want the model's key only", gotAuth)
	}
	if gotModel != "agent-1@3" {
		t.Fatalf("requested model %q; want agent-1@3", gotModel)
	}
	c, err := ChoiceFromOpenAI(resp.Choices[0])
	if err != nil {
		t.Fatal(err)
	}
	want := Choice{Message: AssistantMsg("Hi!"), FinishReason: "stop", Logprobs: []TokenLogprob{
		{TokenID: 13048, Token: "Hi", Bytes: []byte("Hi"), Logprob: -0.5, TopLogprobs: []TopLogprob{}},
		{TokenID: 0, Token: "token_id:0", Bytes: []byte("!"), Logprob: -0.25, TopLogprobs: []TopLogprob{}},
	}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("ChoiceFromOpenAI = %+v; want %+v", c, want)
	}
}

func sampleGroups() []TrajectoryGroup {
	win := Trajectory{Reward: 1, Metrics: map[string]float64{"win": 1, "completion_tokens": 4}, Metadata: map[string]any{"scenario_id": "s1"}, Logs: []string{"won"}}
	win.AddMessage(SystemMsg("play"))
	win.AddChoice(Choice{Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Function: FunctionCall{Name: "move", Arguments: `{"x":1}`}}}}, Logprobs: []TokenLogprob{{TokenID: 1}}})
	win.AddMessage(ToolMsg("c1", "ok"))
	win.Tools = []Tool{FunctionTool("move", "", json.RawMessage(`{"type":"object"}`))}
	loss := Trajectory{Reward: 0, Metrics: map[string]float64{"win": 0}}
	loss.AddMessage(UserMsg("日本語"))
	return []TrajectoryGroup{
		{Trajectories: []Trajectory{win, loss}, Metadata: map[string]any{"scenario_id": "s1"}, Metrics: map[string]float64{"judge_cost": 0.5}, Logs: []string{"g0"}},
		{Trajectories: []Trajectory{{Reward: 0.5}, {Reward: 0.5}}, Exceptions: []Exception{{Type: "panic", Message: "boom"}}, Metrics: map[string]float64{"judge_cost": 1.5}},
		{Exceptions: []Exception{{Type: "x", Message: "y"}}, Metrics: map[string]float64{"judge_cost": 100}}, // no trajectories: its metrics do not count
	}
}

func TestLogMetrics(t *testing.T) {
	got, dropped := logMetrics(sampleGroups(), "val", map[string]float64{
		"loss/train":    0.3,
		"custom":        2,
		"train/x":       1,
		"other/y":       4,
		"val/reward":    9, // extra metrics override the aggregates
		"nan":           math.NaN(),
		"time/step_s":   5,
		"costs/judge":   0.1,
		"val/groupless": 3,
	})
	want := map[string]float64{
		"val/reward":            9,
		"val/exception_rate":    2.0 / 6.0,
		"val/reward_std_dev":    0.25, // mean of std 0.5 and 0
		"val/win":               0.5,
		"val/completion_tokens": 4,
		"val/group_judge_cost":  1,
		"loss/train":            0.3,
		"val/custom":            2,
		"train/x":               1,
		"val/other/y":           4,
		"time/step_s":           5,
		"costs/judge":           0.1,
		"val/groupless":         3,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("logMetrics =\n%v\nwant\n%v", got, want)
	}
	if !reflect.DeepEqual(dropped, []string{"val/nan"}) {
		t.Fatalf("dropped %v, want [val/nan]", dropped)
	}
	// A custom split keeps its own prefix, and an explicit key wins over
	// one that gets the same name by prefixing.
	if got, _ := logMetrics(nil, "discarded", map[string]float64{"discarded/n": 1, "n": 2}); !reflect.DeepEqual(got, map[string]float64{"discarded/n": 1}) {
		t.Fatalf("custom split: %v", got)
	}
}

func TestModel_Log(t *testing.T) {
	m := &Model{Name: "gpt-4.1", Project: "ttt", BasePath: t.TempDir()}
	ctx := context.Background()
	if err := m.Log(ctx, sampleGroups(), LogOptions{}); err != nil {
		t.Fatal(err)
	}
	d, _ := m.Dir()
	rows, err := d.ReadTrajectories("val", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantRows := []store.TrajectoryRow{
		{
			GroupIndex: 0, GroupMetadata: `{"scenario_id":"s1"}`, GroupMetrics: `{"judge_cost":0.5}`, GroupLogs: []string{"g0"},
			Reward: 1, Metrics: `{"completion_tokens":4,"win":1}`, Metadata: `{"scenario_id":"s1"}`,
			Tools: `[{"type":"function","function":{"name":"move","parameters":{"type":"object"}}}]`,
			Logs:  []string{"won"},
			Messages: []store.MessageRow{
				{Role: "system", Content: "play"},
				{Role: "assistant", ToolCalls: `[{"id":"c1","type":"function","function":{"name":"move","arguments":"{\"x\":1}"}}]`, Trainable: true,
					Logprobs: []store.TokenRow{{TokenID: 1}}},
				{Role: "tool", Content: "ok", ToolCallID: "c1"},
			},
		},
		{GroupIndex: 0, GroupMetadata: `{"scenario_id":"s1"}`, GroupMetrics: `{"judge_cost":0.5}`, GroupLogs: []string{"g0"},
			Reward: 0, Metrics: `{"win":0}`, Messages: []store.MessageRow{{Role: "user", Content: "日本語"}}},
		{GroupIndex: 1, GroupMetrics: `{"judge_cost":1.5}`, Reward: 0.5},
		{GroupIndex: 1, GroupMetrics: `{"judge_cost":1.5}`, Reward: 0.5},
	}
	if !reflect.DeepEqual(rows, wantRows) {
		g, _ := json.MarshalIndent(rows, "", " ")
		w, _ := json.MarshalIndent(wantRows, "", " ")
		t.Fatalf("parquet rows:\n%s\nwant:\n%s", g, w)
	}

	hist, err := d.ReadHistory()
	if err != nil || len(hist) != 1 {
		t.Fatalf("history = %v, %v; want one row", hist, err)
	}
	h := hist[0]
	for k, want := range map[string]float64{"step": 0, "training_step": 0, "val/reward": 0.5, "val/reward_std_dev": 0.25, "val/group_judge_cost": 1} {
		if h[k] != want {
			t.Errorf("history[%q] = %v; want %v", k, h[k], want)
		}
	}
	if _, ok := h["time/wall_clock_sec"].(float64); !ok {
		t.Errorf("history lacks time/wall_clock_sec: %v", h)
	}
	if s, _ := h["recorded_at"].(string); !strings.HasSuffix(s, "Z") {
		t.Errorf("recorded_at %q; want an RFC 3339 UTC time", s)
	}

	// Metrics only: no parquet, one more row. Nothing: no row.
	step := 4
	if err := m.Log(ctx, nil, LogOptions{Split: "test", Step: &step, Metrics: map[string]float64{"acc": 0.9}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Log(ctx, nil, LogOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.TrajectoriesPath("test", 4)); !os.IsNotExist(err) {
		t.Fatalf("metrics-only Log wrote a parquet file (%v)", err)
	}
	hist, _ = d.ReadHistory()
	if len(hist) != 2 || hist[1]["test/acc"] != 0.9 || hist[1]["step"] != 4.0 {
		t.Fatalf("history = %v; want a second row with test/acc at step 4", hist)
	}

	bad := []struct {
		opts LogOptions
		want string
	}{
		{LogOptions{Split: "a/b"}, "split"},
		{LogOptions{Step: ptr(-1)}, "negative step"},
	}
	for _, tt := range bad {
		if err := m.Log(ctx, nil, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Log(%+v) = %v; want an error containing %q", tt.opts, err, tt.want)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.Log(canceled, sampleGroups(), LogOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Log with a cancelled context = %v; want context.Canceled", err)
	}
}

// Ensure the training loop of the package doc works end to end against the
// fake backend: train, log at the new step, resume from the stored step.
func TestTrainableModel_TrainAndLog(t *testing.T) {
	ctx := context.Background()
	m := newTrainable(t)
	b := newFakeBackend("http://127.0.0.1:1/v1")
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	groups := sampleGroups()
	res, err := m.Train(ctx, groups, TrainConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Step != 1 || res.Skipped || m.InferenceName(-1) != "agent-1@1" {
		t.Fatalf("Train = %+v serving %q; want step 1, not skipped, served as agent-1@1", res, m.InferenceName(-1))
	}
	// A step with nothing to learn still advances, and says so. Shaped
	// rewards train while the original groups are logged.
	flat := []TrajectoryGroup{{Trajectories: []Trajectory{{Reward: 1}, {Reward: 1}}}}
	shaped := []TrajectoryGroup{{Trajectories: []Trajectory{{Reward: 0}, {Reward: 0}}}}
	res, err = m.Train(ctx, shaped, TrainConfig{}, LogGroups(flat))
	if err != nil || res.Step != 2 || !res.Skipped || res.SkipReason == "" || m.InferenceName(-1) != "agent-1@2" {
		t.Fatalf("Train on equal rewards = %+v, %v; want step 2 skipped with a reason", res, err)
	}
	// Log defaults to the latest step.
	if err := m.Log(ctx, flat, LogOptions{Split: "val"}); err != nil {
		t.Fatal(err)
	}
	// Training through the backend directly shows after the next Step.
	if _, err := b.Train(ctx, m, groups, TrainConfig{}); err != nil {
		t.Fatal(err)
	}
	if step, err := m.Step(ctx); err != nil || step != 3 || m.InferenceName(-1) != "agent-1@3" {
		t.Fatalf("Step = %d, %v serving %q; want 3 and agent-1@3", step, err, m.InferenceName(-1))
	}

	d, _ := m.Dir()
	for _, p := range []struct {
		split string
		step  int
	}{{"train", 1}, {"train", 2}, {"val", 2}} {
		if _, err := d.ReadTrajectories(p.split, p.step); err != nil {
			t.Fatalf("%s parquet at step %d: %v", p.split, p.step, err)
		}
	}
	hist, _ := d.ReadHistory()
	if len(hist) != 3 || hist[0]["loss/train"] != 0.25 || hist[0]["train/reward"] != 0.5 || hist[0]["step"] != 1.0 ||
		hist[1]["step"] != 2.0 || hist[1]["train/reward"] != 1.0 || hist[2]["step"] != 2.0 || hist[2]["val/reward"] != 1.0 {
		t.Fatalf("history = %v", hist)
	}

	// A second process resumes where this one stopped.
	again := newTrainable(t)
	again.BasePath = m.BasePath
	if err := again.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	if step, _ := again.Step(ctx); step != 3 || again.InferenceName(-1) != "agent-1@3" {
		t.Fatalf("resumed at step %d serving %q; want 3 and agent-1@3", step, again.InferenceName(-1))
	}
}

// Ensure groups that Log would refuse, given as LogGroups or as the groups
// themselves, fail Train before anything is trained: no step saved, no
// parquet file, no history row, and the error says what is wrong.
func TestTrainableModel_TrainUnloggableGroupsTrainNothing(t *testing.T) {
	ctx := context.Background()
	good := []TrajectoryGroup{{Trajectories: []Trajectory{{Reward: 1}, {Reward: 0}}}}
	infReward := []TrajectoryGroup{{Trajectories: []Trajectory{{Reward: 1}, {Reward: math.Inf(1)}}}}
	nanMetric := []TrajectoryGroup{{Trajectories: []Trajectory{{Reward: 1}, {Reward: 0}}}, {Trajectories: []Trajectory{{Reward: 0}}, Metrics: map[string]float64{"judge": math.NaN()}}}
	tests := []struct {
		name   string
		groups []TrajectoryGroup
		opts   []TrainOption
		want   []string
	}{
		{"LogGroups with an infinite reward", good, []TrainOption{LogGroups(infReward)}, []string{"LogGroups", "group 0", "trajectory 1", "+Inf"}},
		{"LogGroups with a NaN group metric", good, []TrainOption{LogGroups(nanMetric)}, []string{"LogGroups", "group 1", "judge"}},
		{"groups with an infinite reward", infReward, nil, []string{"groups", "group 0", "+Inf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTrainable(t)
			b := newFakeBackend("http://x/v1")
			if err := m.Register(ctx, b); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Train(ctx, good, TrainConfig{}); err != nil { // step 1, logged
				t.Fatal(err)
			}
			d, _ := m.Dir()
			histBefore, _ := d.ReadHistory()
			res, err := m.Train(ctx, tt.groups, TrainConfig{}, tt.opts...)
			if err == nil {
				t.Fatalf("Train = %+v; want an error", res)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Train error %q; want it to contain %q", err, want)
				}
			}
			if b.trained != 1 || res.Step != 0 {
				t.Fatalf("Train failed but the backend trained %d steps (result %+v); want only the first", b.trained, res)
			}
			if step, err := m.Step(ctx); err != nil || step != 1 || m.InferenceName(-1) != "agent-1@1" {
				t.Fatalf("Step = %d, %v serving %q; want step 1 still", step, err, m.InferenceName(-1))
			}
			if _, err := os.Stat(d.TrajectoriesPath("train", 2)); !os.IsNotExist(err) {
				t.Fatalf("a train parquet file exists at step 2 (%v)", err)
			}
			if hist, _ := d.ReadHistory(); len(hist) != len(histBefore) {
				t.Fatalf("history went from %d to %d rows", len(histBefore), len(hist))
			}
			// The same call with loggable groups then trains step 2.
			if res, err := m.Train(ctx, good, TrainConfig{}, LogGroups(good)); err != nil || res.Step != 2 {
				t.Fatalf("Train after the failure = %+v, %v; want step 2", res, err)
			}
		})
	}
}

func TestTrainableModel_DeleteCheckpoints(t *testing.T) {
	ctx := context.Background()
	rows := []map[string]any{
		{"step": 1, "val/reward": 0.2},
		{"step": 2, "val/reward": 0.9},
		{"step": 2, "val/reward": 0.1}, // step 2 averages 0.5
		{"step": 3, "val/reward": 0.6},
		{"step": 3, "train/reward": 5}, // no val/reward: ignored for the mean
		{"step": 4, "train/reward": 9},
		{"step": 5, "val/reward": 0.6}, // ties with 3: the later wins
	}
	tests := []struct {
		name     string
		metric   string
		latest   int
		rows     []map[string]any
		corrupt  bool
		wantKeep []int // nil: an error containing each of wantErr, and nothing deleted
		wantWarn bool
		wantErr  []string
	}{
		{"best by val/reward", "", 7, rows, false, []int{7, 5}, false, nil},
		{"best is latest", "", 5, rows, false, []int{5}, false, nil},
		{"other metric", "train/reward", 7, rows, false, []int{7, 4}, false, nil},
		// A metric no row has (a typo) deletes nothing, where it used to
		// keep only the latest checkpoint.
		{"metric absent", "val/acc", 7, rows, false, nil, false, []string{`"val/acc"`, "nothing was deleted", `"val/reward"`, `"train/reward"`}},
		{"typo", "no/such", 7, rows, false, nil, false, []string{`"no/such"`, "nothing was deleted", `"val/reward"`}},
		// The default metric before any "val" split: ART's behaviour, the
		// latest kept, with a warning (a loop bounding disk use goes on).
		{"no history", "", 3, nil, false, []int{3}, true, nil},
		{"only train logged", "", 7, rows[5:6], false, []int{7}, true, nil},
		{"corrupted line", "", 7, rows[:2], true, []int{7, 2}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			m := newTrainable(t)
			m.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			b := newFakeBackend("http://x/v1")
			if err := m.Register(ctx, b); err != nil {
				t.Fatal(err)
			}
			b.steps[key(m)] = tt.latest
			d, _ := m.Dir()
			for _, r := range tt.rows {
				d.AppendHistory(r)
			}
			if tt.corrupt {
				f, _ := os.OpenFile(filepath.Join(d.Path(), store.HistoryFile), os.O_APPEND|os.O_WRONLY, 0)
				f.WriteString("garbage\n")
				f.Close()
			}
			err := m.DeleteCheckpoints(ctx, tt.metric)
			if tt.wantKeep == nil {
				if err == nil {
					t.Fatalf("DeleteCheckpoints(%q) succeeded, keeping %v; want an error", tt.metric, b.deleted)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("DeleteCheckpoints(%q) = %v; want an error containing %s", tt.metric, err, want)
					}
				}
				if len(b.deleted) != 0 {
					t.Fatalf("DeleteCheckpoints(%q) failed but deleted all but %v", tt.metric, b.deleted)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b.deleted) != 1 || !slices.Equal(b.deleted[0], tt.wantKeep) {
				t.Fatalf("kept %v; want %v", b.deleted, tt.wantKeep)
			}
			if warned := logs.Len() > 0; warned != tt.wantWarn {
				t.Fatalf("warned %v (%q); want %v", warned, logs.String(), tt.wantWarn)
			}
		})
	}

	m := newTrainable(t)
	b := newFakeBackend("http://x/v1")
	m.Register(ctx, b)
	b.failStep = errors.New("backend down")
	if err := m.DeleteCheckpoints(ctx, ""); err == nil || !strings.Contains(err.Error(), "backend down") {
		t.Fatalf("DeleteCheckpoints with a failing backend = %v; want its error", err)
	}
}

func TestModel_State(t *testing.T) {
	m := &Model{Name: "m", Project: "p", BasePath: t.TempDir()}
	if s, err := m.ReadState(); err != nil || s != nil {
		t.Fatalf("ReadState = %v, %v; want nil, nil", s, err)
	}
	if err := m.OverwriteState(map[string]any{"a": map[string]any{"x": 1.0}}); err != nil {
		t.Fatal(err)
	}
	merged, err := m.MergeState(map[string]any{"a": map[string]any{"y": 2.0}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": map[string]any{"x": 1.0, "y": 2.0}}
	if got, _ := m.ReadState(); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(merged, want) {
		t.Fatalf("state = %v (merge returned %v); want %v", got, merged, want)
	}
	bad := &Model{Name: "", Project: "p"}
	if _, err := bad.ReadState(); err == nil {
		t.Fatal("ReadState of a model without a name: got nil error")
	}
}

func TestTrajectory_Helpers(t *testing.T) {
	var tr Trajectory
	tr.Finish() // no start time: no duration
	if _, ok := tr.Metrics["duration"]; ok {
		t.Fatal("Finish without a start recorded a duration")
	}
	tr.AddMessage(SystemMsg("s"))
	if tr.StartTime.IsZero() {
		t.Fatal("AddMessage did not start the clock")
	}
	tr.AddChoice(Choice{Message: Message{Content: Text("c")}})
	tr.Logf("step %d of %s", 2, "game")
	tr.Finish()
	if d, ok := tr.Metrics["duration"]; !ok || d < 0 {
		t.Fatalf("duration = %v, %v; want >= 0", d, ok)
	}
	if !slices.Equal(tr.Logs, []string{"step 2 of game"}) {
		t.Fatalf("Logs = %q", tr.Logs)
	}
	want := []Message{SystemMsg("s"), AssistantMsg("c")}
	if got := tr.Messages(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Messages() = %+v; want %+v (a choice with no role becomes assistant)", got, want)
	}
	h := tr.History()
	h.AddMessage(UserMsg("u"))
	h.AddChoice(Choice{Message: AssistantMsg("a")})
	extra := History{MessagesAndChoices: []MessageOrChoice{{Message: ptr(UserMsg("x"))}}}
	with := Trajectory{MessagesAndChoices: tr.MessagesAndChoices, AdditionalHistories: []History{extra}}
	if hs := with.Histories(); len(hs) != 2 || len(hs[0].MessagesAndChoices) != 2 || !reflect.DeepEqual(hs[1], extra) {
		t.Fatalf("Histories() = %+v; want the main history, then the additional one", hs)
	}
	if got := h.Messages(); len(got) != 4 || got[3].Content.String() != "a" {
		t.Fatalf("History.Messages() = %+v", got)
	}
	parts := Content{Parts: []ContentPart{TextPart("a"), ImagePart("data:,"), TextPart("b")}}
	if got := parts.String(); got != "ab" {
		t.Fatalf("Content.String() = %q; want %q", got, "ab")
	}
}

// Ensure TrainSFT validates its config before calling the backend and logs
// the step's metrics as the train split at the new step.
func TestTrainableModel_TrainSFT(t *testing.T) {
	ctx := context.Background()
	m := newTrainable(t)
	b := newFakeBackend("http://127.0.0.1:1/v1")
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	trajs := sampleGroups()[0].Trajectories
	if _, err := m.TrainSFT(ctx, trajs, TrainSFTConfig{LearningRates: []float64{1e-4}, BatchSize: 1}); err == nil ||
		!strings.Contains(err.Error(), "LearningRates has 1 entries") {
		t.Fatalf("a schedule of the wrong length: err %v", err)
	}
	if step, _ := m.Step(ctx); step != 0 {
		t.Fatalf("a refused call advanced the step to %d", step)
	}
	res, err := m.TrainSFT(ctx, trajs, TrainSFTConfig{})
	if err != nil || res.Step != 1 || m.InferenceName(-1) != m.Name+"@1" {
		t.Fatalf("TrainSFT = %+v, %v; serving %q", res, err, m.InferenceName(-1))
	}
	d, _ := m.Dir()
	hist, _ := d.ReadHistory()
	if len(hist) != 1 || hist[0]["step"] != 1.0 || hist[0]["loss/train"] != 1.5 {
		t.Fatalf("history = %v", hist)
	}
}

func TestTrainSFTConfig_Validate(t *testing.T) {
	for _, c := range []struct {
		cfg  TrainSFTConfig
		n    int
		want string
	}{
		{TrainSFTConfig{}, 5, ""},
		{TrainSFTConfig{LearningRate: -1}, 5, "LearningRate"},
		{TrainSFTConfig{LearningRate: math.NaN()}, 5, "LearningRate"},
		{TrainSFTConfig{BatchSize: -2}, 5, "BatchSize"},
		{TrainSFTConfig{LearningRates: []float64{1, 0, 1}}, 5, "LearningRates[1]"},
		{TrainSFTConfig{LearningRates: []float64{1, 1, 1}}, 5, ""}, // 5 trajectories in batches of 2
		{TrainSFTConfig{LearningRates: []float64{1, 1}, BatchSize: 4}, 5, ""},
		{TrainSFTConfig{LearningRates: []float64{1, 1}}, 5, "3 batches of 2"},
	} {
		err := c.cfg.Validate(c.n)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v.Validate(%d) = %v; want %q", c.cfg, c.n, err, c.want)
		}
	}
}

// Ensure train logs carry ART's step and cumulative data metrics, and the
// totals survive a new Model value (a restart).
func TestLog_CumulativeDataMetrics(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	traj := func(scenario string, tokens int) Trajectory {
		var tr Trajectory
		tr.AddMessage(UserMsg("q"))
		c := Choice{Message: AssistantMsg("a")}
		for i := range tokens {
			c.Logprobs = append(c.Logprobs, TokenLogprob{TokenID: i, Logprob: -1})
		}
		tr.AddChoice(c)
		tr.Metadata = map[string]any{"scenario_id": scenario}
		return tr
	}
	logStep := func(step int, scenarios ...string) map[string]any {
		m := &Model{Name: "m", Project: "p", BasePath: base}
		var g TrajectoryGroup
		for _, s := range scenarios {
			g.Trajectories = append(g.Trajectories, traj(s, 3))
		}
		if err := m.Log(ctx, []TrajectoryGroup{g}, LogOptions{Split: "train", Step: &step,
			Metrics: map[string]float64{"data/step_trainer_tokens": 10, "time/step_trainer_s": 0.5}}); err != nil {
			t.Fatal(err)
		}
		d, _ := m.Dir()
		rows, _ := d.ReadHistory()
		return rows[len(rows)-1]
	}
	r1 := logStep(1, "a", "b", "a")
	r2 := logStep(2, "b", "c")
	for k, want := range map[string]float64{
		"data/step_num_scenarios": 2, "data/step_actor_tokens": 9, "data/cum/num_scenarios": 2,
		"data/cum/trainer_tokens": 10, "time/cum/trainer_s": 0.5, "data/cum/num_unique_scenarios": 2, "data/cum/actor_tokens": 9,
	} {
		if r1[k] != want {
			t.Errorf("step 1 %s = %v; want %v", k, r1[k], want)
		}
	}
	for k, want := range map[string]float64{
		"data/step_num_scenarios": 2, "data/step_actor_tokens": 6, "data/cum/num_scenarios": 4,
		"data/cum/trainer_tokens": 20, "time/cum/trainer_s": 1, "data/cum/num_unique_scenarios": 3, "data/cum/actor_tokens": 15,
	} {
		if r2[k] != want {
			t.Errorf("step 2 %s = %v; want %v", k, r2[k], want)
		}
	}
	val := 3
	m := &Model{Name: "m", Project: "p", BasePath: base}
	if err := m.Log(ctx, []TrajectoryGroup{{Trajectories: []Trajectory{traj("z", 1)}}}, LogOptions{Split: "val", Step: &val}); err != nil {
		t.Fatal(err)
	}
	d, _ := m.Dir()
	rows, _ := d.ReadHistory()
	if _, ok := rows[len(rows)-1]["data/cum/num_unique_scenarios"]; ok {
		t.Error("a val log counted towards the training totals")
	}
}

// Ensure a logged choice's sampled tokens come back from the parquet file.
func TestReadTrajectoryGroups_Logprobs(t *testing.T) {
	m := &Model{Name: "m", Project: "p", BasePath: t.TempDir()}
	tr := Trajectory{Reward: 1}
	tr.AddMessage(UserMsg("hi"))
	tr.AddChoice(Choice{Message: AssistantMsg("Hi!"), Logprobs: []TokenLogprob{
		{TokenID: 13048, Token: "Hi", Logprob: -0.5},
		{TokenID: 0, Bytes: []byte("!"), Logprob: -0.25}, // no text: its bytes are stored
		{TokenID: -1, Token: "?", Logprob: 0},
	}})
	tr.AddChoice(Choice{Message: AssistantMsg("no logprobs")})
	if err := m.Log(context.Background(), []TrajectoryGroup{{Trajectories: []Trajectory{tr}}}, LogOptions{Split: "train"}); err != nil {
		t.Fatal(err)
	}
	d, _ := m.Dir()
	groups, err := ReadTrajectoryGroups(d.TrajectoriesPath("train", 0))
	if err != nil {
		t.Fatal(err)
	}
	mc := groups[0].Trajectories[0].MessagesAndChoices
	want := []TokenLogprob{{TokenID: 13048, Token: "Hi", Logprob: -0.5}, {TokenID: 0, Token: "!", Logprob: -0.25}, {TokenID: -1, Token: "?", Logprob: 0}}
	if len(mc) != 3 || mc[1].Choice == nil || !reflect.DeepEqual(mc[1].Choice.Logprobs, want) {
		t.Fatalf("read back %+v; want the choice with logprobs %+v", mc, want)
	}
	if mc[2].Choice == nil || mc[2].Choice.Logprobs != nil {
		t.Fatalf("choice without logprobs read back as %+v", mc[2])
	}
}

// Ensure a Log whose metrics are not finite says which it left out (a
// history row holds no NaN), and still writes the rest; one with nothing
// else writes no row but still warns.
func TestModel_LogWarnsNonFinite(t *testing.T) {
	var buf bytes.Buffer
	m := &Model{Name: "m", Project: "p", BasePath: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	ctx := context.Background()
	step := 3
	if err := m.Log(ctx, nil, LogOptions{Step: &step, Metrics: map[string]float64{"ok": 1, "bad": math.NaN(), "worse": math.Inf(1)}}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "metrics left out") || !strings.Contains(out, "val/bad") || !strings.Contains(out, "val/worse") || strings.Contains(out, "val/ok") {
		t.Fatalf("warning %q; want val/bad and val/worse named, not val/ok", out)
	}
	buf.Reset()
	if err := m.Log(ctx, nil, LogOptions{Step: &step, Metrics: map[string]float64{"only": math.NaN()}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "val/only") {
		t.Fatalf("a Log of NaN alone said nothing: %q", buf.String())
	}
	d, _ := m.Dir()
	rows, err := d.ReadHistory()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0]["val/ok"] != 1.0 {
		t.Fatalf("history %v; want one row with val/ok", rows)
	}
}

// blockingBackend is a fakeBackend whose Train waits for release once it
// has said it started.
type blockingBackend struct {
	*fakeBackend
	started chan struct{}
	release chan struct{}
}

func (b *blockingBackend) Train(ctx context.Context, m *TrainableModel, groups []TrajectoryGroup, cfg TrainConfig) (TrainResult, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return TrainResult{}, ctx.Err()
	}
	return b.fakeBackend.Train(ctx, m, groups, cfg)
}

// Concurrent Train calls on one model take turns: each trains, logs its row
// and sets InferenceModelName before the next, so the history is in step
// order and the model names the last step (the field was written by every
// call at once: a data race under -race), and a call waiting its turn gives
// up when its context ends.
func TestTrainableModel_ConcurrentTrainTakesTurns(t *testing.T) {
	m := newTrainable(t)
	b := newFakeBackend("http://127.0.0.1:1/v1")
	ctx := context.Background()
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	const calls = 6
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := TrajectoryGroup{Trajectories: []Trajectory{{Reward: 1}, {Reward: 0}}}
			if _, err := m.Train(ctx, []TrajectoryGroup{g}, TrainConfig{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if want := fmt.Sprintf("agent-1@%d", calls); m.InferenceModelName != want || m.InferenceName(-1) != want {
		t.Errorf("after %d concurrent Train calls: InferenceModelName %q, InferenceName(-1) %q; want %q", calls, m.InferenceModelName, m.InferenceName(-1), want)
	}
	d, err := m.Dir()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := d.ReadHistory()
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, r := range rows {
		steps = append(steps, int(r["step"].(float64)))
	}
	if want := []int{1, 2, 3, 4, 5, 6}; !slices.Equal(steps, want) {
		t.Errorf("history steps %v; want %v (one row per step, in order)", steps, want)
	}

	bb := &blockingBackend{fakeBackend: b, started: make(chan struct{}, 2), release: make(chan struct{})}
	m2 := newTrainable(t)
	if err := m2.Register(ctx, bb); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := m2.Train(ctx, nil, TrainConfig{})
		first <- err
	}()
	<-bb.started
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := m2.Train(wctx, nil, TrainConfig{}); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "another Train") {
		t.Errorf("Train waiting behind a running one past its deadline = %v; want its deadline, saying what it waited for", err)
	}
	close(bb.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// Ensure the model methods that take a context refuse a nil one with an
// error, as Register and Log do: Train and TrainSFT panicked in tracing.
func TestTrainableModel_NilContext(t *testing.T) {
	m := newTrainable(t)
	if err := m.Register(context.Background(), newFakeBackend("http://127.0.0.1:1/v1")); err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	for name, call := range map[string]func() error{
		"Train":             func() error { _, err := m.Train(nilCtx, nil, TrainConfig{}); return err },
		"TrainSFT":          func() error { _, err := m.TrainSFT(nilCtx, nil, TrainSFTConfig{}); return err },
		"DeleteCheckpoints": func() error { return m.DeleteCheckpoints(nilCtx, "") },
		"Step":              func() error { _, err := m.Step(nilCtx); return err },
	} {
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("%s(nil context) panicked: %v", name, v)
				}
			}()
			if err := call(); err == nil || !strings.Contains(err.Error(), "nil context") {
				t.Errorf("%s(nil context) = %v; want an error saying so", name, err)
			}
		}()
	}
}
