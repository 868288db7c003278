package pretrain

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/train"
)

// writeTranscripts writes n echo transcripts ("say blue1" → "blue1") as
// JSONL; every fourth one answers with a tool call first, so tool-call
// turns are learned too.
func writeTranscripts(t *testing.T, path string, n int) {
	t.Helper()
	words := []string{"red", "green", "blue", "gold"}
	tool := art.FunctionTool("lookup", "", json.RawMessage(`{"type":"object"}`))
	var b strings.Builder
	for i := range n {
		w := fmt.Sprintf("%s%d", words[i%4], i%3)
		tr := art.Trajectory{}
		tr.AddMessage(art.UserMsg("say " + w))
		if i%4 == 0 {
			tr.Tools = []art.Tool{tool}
			tr.AddMessage(art.Message{Role: art.RoleAssistant, ToolCalls: []art.ToolCall{{ID: "c", Type: "function",
				Function: art.FunctionCall{Name: "lookup", Arguments: `{"w": "` + w + `"}`}}}})
			tr.AddMessage(art.ToolMsg("c", w))
		}
		tr.AddMessage(art.AssistantMsg(w))
		line, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Ensure pretraining lowers the held-out loss of a real tiny model and
// writes a loadable model folder whose weights give exactly that loss.
func TestRun_LossFalls(t *testing.T) {
	src := arttest.TinyModel(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data.jsonl")
	writeTranscripts(t, data, 48)
	out := filepath.Join(dir, "out")
	var steps int
	res, err := Run(context.Background(), Options{Model: src, Data: data, Out: out, Epochs: 6, BatchSize: 8, LR: 3e-3,
		HoldOut: 8, EvalEvery: 10, Progress: func(p Progress) { steps = p.Step }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.Steps != 30 || steps != 30 || res.Train != 40 || res.HeldOut != 8 {
		t.Fatalf("%d steps (progress saw %d) over %d transcripts, %d held out; want 30 over 40, 8", res.Steps, steps, res.Train, res.HeldOut)
	}
	if !(res.HeldOutAfter < res.HeldOutBefore/2) {
		t.Fatalf("held-out loss %.3f → %.3f; want it halved", res.HeldOutBefore, res.HeldOutAfter)
	}
	// The written folder holds the trained weights and the source's
	// tokenizer and template: its held-out loss is the one reported.
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	z, err := loadTokenizer(out)
	if err != nil {
		t.Fatal(err)
	}
	trajs, err := ReadTrajectories(data)
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := tokenize(z, trajs[40:], 4096)
	if err != nil {
		t.Fatal(err)
	}
	full, err := train.NewFullSFT(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := full.Loss(context.Background(), flatten(seqs))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-res.HeldOutAfter) > 1e-6 {
		t.Fatalf("reloaded model's held-out loss %v; the run reported %v", got, res.HeldOutAfter)
	}
}

// Ensure MaxSteps stops training before the epochs are done.
func TestRun_MaxSteps(t *testing.T) {
	src := arttest.TinyModel(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data.jsonl")
	writeTranscripts(t, data, 16)
	res, err := Run(context.Background(), Options{Model: src, Data: data, Out: filepath.Join(dir, "out"), Epochs: 10, MaxSteps: 3, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 3 || !math.IsNaN(res.HeldOutAfter) {
		t.Fatalf("%d steps, held-out loss %v; want 3 and NaN (nothing held out)", res.Steps, res.HeldOutAfter)
	}
}

// Ensure StopLoss ends training at the first held-out loss below it.
func TestRun_StopLoss(t *testing.T) {
	src := arttest.TinyModel(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data.jsonl")
	writeTranscripts(t, data, 24)
	var last Progress
	res, err := Run(context.Background(), Options{Model: src, Data: data, Out: filepath.Join(dir, "out"), Epochs: 50, BatchSize: 4,
		HoldOut: 4, EvalEvery: 2, StopLoss: 1, Progress: func(p Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.Steps >= 250 || res.Steps%2 != 0 || !(last.HeldOut < 1) || !(res.HeldOutAfter < 1) {
		t.Fatalf("stopped=%v after %d of 250 steps, last held-out loss %v, after %v; want a stop at an eval step below 1",
			res.Stopped, res.Steps, last.HeldOut, res.HeldOutAfter)
	}
}

// Ensure bad input is refused with an error naming the problem, before
// anything is written.
func TestRun_BadInput(t *testing.T) {
	src := arttest.TinyModel(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	writeTranscripts(t, good, 4)
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goodLine := strings.SplitN(string(mustRead(t, good)), "\n", 2)[0]
	exists := filepath.Join(dir, "exists")
	if err := os.Mkdir(exists, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		opt   Options
		want  string
		outOK bool // the output folder existed before
	}{
		{"empty file", Options{Data: file("empty.jsonl", "\n\n")}, "no transcripts", false},
		{"bad json line", Options{Data: file("bad.jsonl", goodLine+"\n\n{\"messages_and_choices\": [}\n")}, "line 3", false},
		{"not a trajectory", Options{Data: file("other.jsonl", `{"foo": 1}`+"\n")}, "line 1: no messages_and_choices", false},
		{"no assistant turn", Options{Data: file("user.jsonl", `{"messages_and_choices":[{"role":"user","content":"hi"}]}`+"\n")}, "transcript 1 has no assistant turn", false},
		{"missing data", Options{Data: filepath.Join(dir, "nope.jsonl")}, "no such file", false},
		{"missing model", Options{Model: filepath.Join(dir, "no-model")}, "no-model", false},
		{"output exists", Options{Out: exists}, "already exists", true},
		{"hold out everything", Options{HoldOut: 4}, "leaves none", false},
		{"bad learning rate", Options{LR: -1}, "learning rate", false},
		{"stop loss without hold-out", Options{StopLoss: 1, EvalEvery: 1}, "stop loss needs a held-out set", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := tt.opt
			if opt.Model == "" {
				opt.Model = src
			}
			if opt.Data == "" {
				opt.Data = good
			}
			if opt.Out == "" {
				opt.Out = filepath.Join(dir, "out-"+strings.ReplaceAll(tt.name, " ", "-"))
			}
			_, err := Run(context.Background(), opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v; want one containing %q", err, tt.want)
			}
			if _, err := os.Stat(opt.Out); !tt.outOK && err == nil {
				t.Fatalf("%s was written", opt.Out)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left a temporary folder %s", e.Name())
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Ensure a trajectories parquet file, as training logs it, reads as the
// same transcripts as the JSONL they came from: the same learning
// sequences, and a run on it trains.
func TestReadTrajectories_Parquet(t *testing.T) {
	src := arttest.TinyModel(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data.jsonl")
	writeTranscripts(t, data, 12)
	want, err := ReadTrajectories(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i].Reward = float64(i) / 12 // logged trajectories carry rewards
	}
	m := art.Model{Name: "m", Project: "p", BasePath: filepath.Join(dir, ".art")}
	step := 3
	groups := []art.TrajectoryGroup{{Trajectories: want[:5]}, {Trajectories: want[5:]}}
	if err := m.Log(context.Background(), groups, art.LogOptions{Split: "train", Step: &step}); err != nil {
		t.Fatal(err)
	}
	parquet := filepath.Join(dir, ".art", "p", "models", "m", "trajectories", "train", "0003.parquet")
	got, err := ReadTrajectories(parquet)
	if err != nil {
		t.Fatal(err)
	}
	z, err := loadTokenizer(src)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs, err := tokenize(z, want, 4096)
	if err != nil {
		t.Fatal(err)
	}
	gotSeqs, err := tokenize(z, got, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(gotSeqs) != len(wantSeqs) {
		t.Fatalf("%d transcripts from the parquet file; want %d", len(gotSeqs), len(wantSeqs))
	}
	for i := range wantSeqs {
		if fmt.Sprint(gotSeqs[i]) != fmt.Sprint(wantSeqs[i]) {
			t.Fatalf("transcript %d: sequences %v from the parquet file; want %v", i+1, gotSeqs[i], wantSeqs[i])
		}
	}
	res, err := Run(context.Background(), Options{Model: src, Data: parquet, Out: filepath.Join(dir, "out"), MaxSteps: 1, BatchSize: 4})
	if err != nil || res.Steps != 1 || res.Train != 12 {
		t.Fatalf("a run on the parquet file: %+v, %v; want 1 step over 12 transcripts", res, err)
	}
}
