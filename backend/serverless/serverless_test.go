package serverless_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/serverless"
)

// newBackend returns a client of f with quick polls and, for SFT, an
// upload that writes train.jsonl to a file the fake reads (the real
// service would get a W&B artifact).
func newBackend(t *testing.T, f *fakeService, opt serverless.Options) *serverless.Backend {
	t.Helper()
	opt.BaseURL, opt.APIKey = f.url, wandbKey
	if opt.PollInterval == 0 {
		opt.PollInterval = 20 * time.Millisecond
	}
	dir := t.TempDir()
	opt.UploadSFT = func(_ context.Context, m *art.TrainableModel, data []byte) (string, error) {
		p := filepath.Join(dir, m.Name+"-train.jsonl")
		return "file://" + p, os.WriteFile(p, data, 0o644)
	}
	b, err := serverless.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The conformance suite, against the fake service (see fake_test.go).
// Rolling back to a checkpoint (Watch.Recovery) is not offered: the
// checkpoints live on the service, not in the local store.
func TestConformance(t *testing.T) {
	var f *fakeService
	arttest.RunBackendTests(t, func(t *testing.T, env arttest.Env) art.Backend {
		if f == nil { // one service for both backends the suite asks for
			f = newFakeService(t)
		}
		return newBackend(t, f, serverless.Options{})
	}, arttest.SFT, arttest.DeleteCheckpoints)
}

// registered returns a backend and a model registered on a fresh fake.
func registered(t *testing.T, opt serverless.Options) (*fakeService, *serverless.Backend, *art.TrainableModel) {
	t.Helper()
	f := newFakeService(t)
	b := newBackend(t, f, opt)
	t.Cleanup(func() { b.Close() })
	m := arttest.NewEnv(t).Model()
	if err := m.Register(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return f, b, m
}

func group() []art.TrajectoryGroup {
	var g art.TrajectoryGroup
	for i := range 2 {
		tr := art.Trajectory{Reward: float64(i)}
		tr.AddMessage(art.UserMsg("hi"), art.AssistantMsg("yo"))
		g.Trajectories = append(g.Trajectories, tr)
	}
	return []art.TrajectoryGroup{g}
}

// Ensure a job the service reports failed gives its message and saves
// nothing.
func TestTrainJobFailed(t *testing.T) {
	f, b, m := registered(t, serverless.Options{})
	f.mu.Lock()
	f.failNext = "CUDA out of memory"
	f.mu.Unlock()
	ctx := context.Background()
	_, err := b.Train(ctx, m, group(), art.TrainConfig{})
	if !errors.Is(err, serverless.ErrJobFailed) || !strings.Contains(err.Error(), "CUDA out of memory") {
		t.Fatalf("Train = %v; want ErrJobFailed with the service's message", err)
	}
	if step, err := b.Step(ctx, m); err != nil || step != 0 {
		t.Fatalf("Step after a failed job = %d, %v; want 0", step, err)
	}
}

// Ensure a job that never ends is given up after JobTimeout with a clear
// error, promptly.
func TestTrainJobTimeout(t *testing.T) {
	f, b, m := registered(t, serverless.Options{JobTimeout: 300 * time.Millisecond})
	f.mu.Lock()
	f.hang = true
	f.mu.Unlock()
	start := time.Now()
	_, err := b.Train(context.Background(), m, group(), art.TrainConfig{})
	if !errors.Is(err, serverless.ErrJobTimeout) || !strings.Contains(err.Error(), "check Step") || !strings.Contains(err.Error(), "training_started") {
		t.Fatalf("Train = %v; want ErrJobTimeout naming the last event and what to do", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("Train gave up after %v; want about 300ms", d)
	}
}

// Ensure JobTimeout bounds a job whose event pages never end (a service
// answering has_more with nothing more, page after page): the client must
// not poll for ever, whatever the pages say.
func TestTrainJobTimeout_EndlessPages(t *testing.T) {
	f, b, m := registered(t, serverless.Options{JobTimeout: 300 * time.Millisecond})
	f.mu.Lock()
	f.endless = true
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := b.Train(ctx, m, group(), art.TrainConfig{})
	if !errors.Is(err, serverless.ErrJobTimeout) {
		t.Fatalf("Train = %v after %v; want ErrJobTimeout after about 300ms", err, time.Since(start))
	}
}

// Ensure a job that ended is reported with its step even when the
// caller's context ends as the client asks for that step: the checkpoint
// is saved on the service, and an error would leave it unlogged.
func TestTrain_CancelledAsTheJobEnds(t *testing.T) {
	f, b, m := registered(t, serverless.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.mu.Lock()
	f.onList = cancel
	f.mu.Unlock()
	res, err := b.Train(ctx, m, group(), art.TrainConfig{})
	if err != nil || res.Step != 1 {
		t.Fatalf("Train = %+v, %v; want step 1: the job ended", res, err)
	}
}

// Ensure reads are retried over transient 5xx answers, a bounded number of
// times, and that creating calls are sent once.
func TestRetries(t *testing.T) {
	f, b, m := registered(t, serverless.Options{Retries: 2})
	ctx := context.Background()
	path := "GET /v1/preview/models/" + m.Project + "." + m.Name + "/checkpoints"

	f.mu.Lock()
	f.unavailGET = 2
	f.mu.Unlock()
	before := f.count(path)
	if step, err := b.Step(ctx, m); err != nil || step != 0 {
		t.Fatalf("Step over two 503s = %d, %v; want 0 after retries", step, err)
	}
	if n := f.count(path) - before; n != 3 {
		t.Errorf("Step sent %d requests; want 3 (two retries)", n)
	}

	f.mu.Lock()
	f.unavailGET = 10
	f.mu.Unlock()
	before = f.count(path)
	if _, err := b.Step(ctx, m); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("Step over ten 503s = %v; want a 503 error after 3 attempts", err)
	}
	if n := f.count(path) - before; n != 3 {
		t.Errorf("Step sent %d requests; want 3", n)
	}
	f.mu.Lock()
	f.unavailGET = 0
	f.unavailAll = 1
	f.mu.Unlock()
	if _, err := b.Train(ctx, m, group(), art.TrainConfig{}); err == nil || !strings.Contains(err.Error(), "not retried") {
		t.Fatalf("Train over a 503 = %v; want an error saying it was not retried", err)
	}
	if n := f.count("POST /v1/preview/training-jobs"); n != 1 {
		t.Errorf("Train sent %d job requests; want 1", n)
	}
	if step, err := b.Step(ctx, m); err != nil || step != 0 {
		t.Fatalf("Step = %d, %v; want 0", step, err)
	}
}

// Ensure SFT without an upload function says it is unsupported, and names
// map both ways.
func TestSFTNeedsUpload(t *testing.T) {
	f := newFakeService(t)
	b, err := serverless.New(serverless.Options{BaseURL: f.url, APIKey: wandbKey})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := arttest.NewEnv(t).Model()
	if err := m.Register(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	var tr art.Trajectory
	tr.AddMessage(art.UserMsg("ping"), art.AssistantMsg("pong"))
	if _, err := m.TrainSFT(context.Background(), []art.Trajectory{tr}, art.TrainSFTConfig{}); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "UploadSFT") {
		t.Fatalf("TrainSFT without UploadSFT = %v; want ErrUnsupported naming UploadSFT", err)
	}
	if got := serverless.ArtifactName("e", "p", "agent", 3); got != "wandb-artifact:///e/p/agent:step3" {
		t.Errorf("ArtifactName = %q", got)
	}
}

// Ensure a LoRA configuration the service would not apply is refused at
// Register, and the default one, spelled out or not, is accepted.
func TestRegister_LoRAUnsupported(t *testing.T) {
	b := newBackend(t, newFakeService(t), serverless.Options{})
	defer b.Close()
	m := arttest.NewEnv(t).Model()
	m.LoRA = art.LoRAConfig{Rank: 32}
	if err := m.Register(context.Background(), b); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "TrainableModel.LoRA") {
		t.Fatalf("Register with rank 32 = %v; want ErrUnsupported naming TrainableModel.LoRA", err)
	}
	m.LoRA = art.LoRAConfig{}.WithDefaults()
	if err := m.Register(context.Background(), b); err != nil {
		t.Fatalf("Register with the default LoRA spelled out: %v", err)
	}
}

func TestNewNeedsKey(t *testing.T) {
	if _, err := serverless.New(serverless.Options{}); err == nil || !strings.Contains(err.Error(), "WANDB_API_KEY") {
		t.Fatalf("New without a key = %v; want an error naming WANDB_API_KEY", err)
	}
}

// Ensure Close ends a stream through the proxy that the service keeps open
// without sending anything: after the grace period, the connection is cut
// instead of being left open (with its goroutines) until the proxy's
// 10-minute request bound.
func TestClose_CutsHangingStreams(t *testing.T) {
	f, b, m := registered(t, serverless.Options{})
	f.mu.Lock()
	f.chatHang = true
	f.mu.Unlock()
	ep, err := b.InferenceEndpoint(context.Background(), m, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ep.BaseURL+"/chat/completions", strings.NewReader(`{"model":"agent@0","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+ep.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); ended <- err }()
	time.Sleep(100 * time.Millisecond) // the stream is under way
	closed := time.Now()
	b.Close()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatalf("a hanging stream is still open %s after Close", time.Since(closed))
	}
}

// Ensure the proxy sends the service the wandb-artifact name with logprobs
// asked for, maps the answer back, and refuses requests without its key.
func TestProxy(t *testing.T) {
	f, b, m := registered(t, serverless.Options{})
	ctx := context.Background()
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: m.InferenceName(0),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(2)})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	sent := f.lastChat
	f.mu.Unlock()
	want := serverless.ArtifactName(fakeEntity, m.Project, m.Name, 0)
	if sent["model"] != want || sent["logprobs"] != true || resp.Model != m.InferenceName(0) {
		t.Fatalf("the service got model %v, logprobs %v; the client got %q; want %q, true, %q", sent["model"], sent["logprobs"], resp.Model, want, m.InferenceName(0))
	}
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: m.Name,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(3)})
	chunks := 0
	for stream.Next() {
		chunks++
	}
	if err := stream.Err(); err != nil || chunks == 0 {
		t.Fatalf("streaming through the proxy: %d chunks, %v; want chunks", chunks, err)
	}
	ep, err := b.InferenceEndpoint(ctx, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := http.Post(ep.BaseURL+"/chat/completions", "application/json", strings.NewReader(`{"model":"agent@0"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("request without the proxy's key: status %d; want 401", r.StatusCode)
	}
	if _, err := b.InferenceEndpoint(ctx, m, 5); err == nil || !strings.Contains(err.Error(), "no checkpoint at step 5") {
		t.Fatalf("InferenceEndpoint(5) = %v; want no checkpoint at step 5", err)
	}
}

// Ensure the training options reach the service under ART's names (its
// ExperimentalTrainingConfig and SFTTrainingConfig), not art.TrainConfig's
// JSON names, which the service does not know: DisableRewardScaling was
// sent as "disable_reward_scaling" and an SFT schedule as "learning_rates",
// both silently ignored. An option the service lacks fails before a job
// starts.
func TestTrainConfig_ARTFieldNames(t *testing.T) {
	f, _, m := registered(t, serverless.Options{})
	ctx := context.Background()
	cfg := art.TrainConfig{LearningRate: 1e-5, Loss: art.LossPPO, DisableRewardScaling: true, MaskProbRatio: true}
	if _, err := m.Train(ctx, group(), cfg); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got := string(f.lastConfig)
	f.mu.Unlock()
	if want := `{"learning_rate":0.00001,"loss_fn":"ppo","mask_prob_ratio":true,"scale_rewards":false}`; got != want {
		t.Errorf("experimental_config sent %s; want %s", got, want)
	}

	// A KL penalty without a source asks for the sampled logprobs, as
	// ART's serverless client does; a chosen source is sent as chosen.
	for _, c := range []struct {
		cfg  art.TrainConfig
		want string
	}{
		{art.TrainConfig{KLPenaltyCoef: 0.1}, `{"kl_penalty_coef":0.1,"kl_penalty_source":"sample"}`},
		{art.TrainConfig{KLPenaltyCoef: 0.1, KLPenaltySource: art.KLCurrentLearner}, `{"kl_penalty_coef":0.1,"kl_penalty_source":"current_learner"}`},
	} {
		if _, err := m.Train(ctx, group(), c.cfg); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		got := string(f.lastConfig)
		f.mu.Unlock()
		if got != c.want {
			t.Errorf("experimental_config sent %s; want %s", got, c.want)
		}
	}

	jobs := f.count("POST /v1/preview/training-jobs")
	_, err := m.Train(ctx, group(), art.TrainConfig{EntropyCoef: 0.01})
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "EntropyCoef") {
		t.Errorf("Train with EntropyCoef = %v; want ErrUnsupported naming the field", err)
	}
	if n := f.count("POST /v1/preview/training-jobs"); n != jobs {
		t.Errorf("a job was started for a config the service cannot apply")
	}

	var trajs []art.Trajectory
	for range 2 {
		var tr art.Trajectory
		tr.AddMessage(art.UserMsg("hi"), art.AssistantMsg("yo"))
		trajs = append(trajs, tr)
	}
	sched := []float64{1e-4, 5e-5}
	if _, err := m.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRates: sched, BatchSize: 1}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	sft := f.lastSFTConfig
	f.mu.Unlock()
	if !slices.Equal(sft.LearningRates, sched) || sft.BatchSize != 1 {
		t.Errorf("the service read SFT config %+v; want the schedule %v and batch size 1", sft, sched)
	}
}

// Ensure the checkpoint list is read as the service pages it (the fake's
// pages hold 2): Step asks for the latest (order=desc, limit=1) as ART
// does, listing follows has_more, and deletion sends its steps in the
// body as ART's client does. Step read only the first page (step 1 of 3)
// and the steps to delete went in the query.
func TestCheckpoints_Paged(t *testing.T) {
	f, b, m := registered(t, serverless.Options{})
	ctx := context.Background()
	for range 3 {
		if _, err := b.Train(ctx, m, group(), art.TrainConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	if step, err := b.Step(ctx, m); err != nil || step != 3 {
		t.Fatalf("Step = %d, %v; want 3", step, err)
	}
	if ep, err := b.InferenceEndpoint(ctx, m, -1); err != nil || ep.Model != m.Name+"@3" {
		t.Fatalf("InferenceEndpoint(-1) = %+v, %v; want %s@3", ep, err, m.Name)
	}
	if err := b.DeleteCheckpointsExcept(ctx, m, []int{1}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	cloud := f.models[m.Project+"."+m.Name]
	f.mu.Unlock()
	d, err := cloud.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if steps, err := d.ListCheckpoints(); err != nil || !slices.Equal(steps, []int{1, 3}) {
		t.Fatalf("checkpoints on the service after keeping 1 = %v, %v; want [1 3]", steps, err)
	}
}
