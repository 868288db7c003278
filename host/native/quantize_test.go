package native

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/host"
)

// Ensure a host opened with Quantize "q8" or "q4" samples and trains on
// the quantized base, exactly on-policy (the trainer's logprobs of the
// sampled tokens equal the sampler's: loss/rollout_logprob_abs_diff = 0),
// and resumes its checkpoint on the same quantized base without a warning
// and on another one with a warning that it is off-policy; an unknown
// value is refused before anything loads.
func TestOpen_Quantize(t *testing.T) {
	for _, q := range []string{"q8", "q4"} {
		t.Run(q, func(t *testing.T) { testOpenQuantize(t, q) })
	}
}

func testOpenQuantize(t *testing.T, quant string) {
	dir := filepath.Join(t.TempDir(), "base")
	if _, err := initmodel.Write(dir, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer, DType: kernels.BF16, Seed: 1, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	opt := Options{BaseModel: dir, Name: "agent", Project: "p", Path: filepath.Join(t.TempDir(), ".art"), Seed: 1, Quantize: "q5"}
	if _, err := Open(ctx, opt); err == nil || !strings.Contains(err.Error(), `unknown quantization "q5"`) {
		t.Fatalf("Quantize q5: err = %v, want an unknown-quantization error", err)
	}
	opt.Quantize = quant
	var logs bytes.Buffer
	opt.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err := Open(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if dt := s.model.W.Layers[0].Q.DType; dt.String() != strings.ToUpper(quant) {
		t.Fatalf("q_proj is %v, want %s", dt, quant)
	}
	seed := int64(3)
	resp, err := s.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, art.UserMsg("hi")), N: 4, MaxTokens: 6, Seed: &seed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var grp art.TrajectoryGroup
	for i, c := range resp.Choices {
		tr := art.Trajectory{Reward: float64(i % 2)}
		tr.AddMessage(art.UserMsg("hi"))
		tr.AddChoice(withModel(c, "agent@0"))
		grp.Trajectories = append(grp.Trajectories, tr)
	}
	res, err := s.Train(ctx, []art.TrajectoryGroup{grp}, art.TrainConfig{LearningRate: 1e-3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := res.Metrics["loss/rollout_logprob_abs_diff"]; !ok || d != 0 {
		t.Fatalf("loss/rollout_logprob_abs_diff = %v (logged %v); want exactly 0 on the quantized base", d, ok)
	}
	s2, err := Open(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Step() != 1 {
		t.Fatalf("reopened at step %d; want 1", s2.Step())
	}
	if _, err := s2.Chat(ctx, host.ChatRequest{Model: "agent@1", Messages: arttest.RawMessages(t, art.UserMsg("hi")), MaxTokens: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "off-policy") {
		t.Errorf("resuming on the same quantization warned:\n%s", logs.String())
	}
	// The checkpoint records its quantization; another one resumes, with
	// a warning.
	if q, ok, err := train.ReadCheckpointInfo(s2.CheckpointPath(1)); err != nil || !ok || string(q) != quant {
		t.Fatalf("checkpoint 1 records quantization %q (recorded %v, err %v); want %s", q, ok, err, quant)
	}
	opt.Quantize = "none"
	s3, err := Open(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if l := logs.String(); !strings.Contains(l, "off-policy") || !strings.Contains(l, "trained_quantize="+quant) || !strings.Contains(l, "quantize=none") {
		t.Errorf("resuming a %s checkpoint unquantized: no off-policy warning naming both in:\n%s", quant, l)
	}
}
