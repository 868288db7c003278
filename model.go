package art

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/artgo/art/store"
)

// Timeouts of the clients returned by OpenAIClient, as in ART: a completion
// may take a long time on a busy server, a connection should not.
const (
	RequestTimeout = 20 * time.Minute
	ConnectTimeout = 5 * time.Second
)

// Model is a model that rollouts call through an OpenAI-compatible API and
// whose results are logged under <BasePath>/<Project>/models/<Name>. Use it
// directly for a prompted model to compare against (OpenAI, OpenRouter, a
// local server): set the Inference fields by hand. TrainableModel embeds it
// and fills them in at Register.
//
// The methods of a Model are safe for concurrent use as long as its fields
// are not changed meanwhile.
type Model struct {
	// Name and Project identify the model; they are path elements, so they
	// must pass store.ValidateName (letters, digits, '.', '_', '-').
	Name    string `json:"name"`
	Project string `json:"project"`
	// BasePath is the root of the logs ("" means ".art").
	BasePath string `json:"base_path,omitempty"`

	// InferenceBaseURL, InferenceAPIKey and InferenceModelName say where
	// OpenAIClient sends requests and which model id to ask for. The API key
	// is never written to disk.
	InferenceBaseURL   string `json:"inference_base_url,omitempty"`
	InferenceAPIKey    string `json:"-"`
	InferenceModelName string `json:"inference_model_name,omitempty"`

	// HTTPClient, if set, carries the requests of OpenAIClient (for example
	// one with a recording RoundTripper). Nil means a shared client with a
	// large connection pool.
	HTTPClient *http.Client `json:"-"`
	// Logger receives warnings; nil means slog.Default().
	Logger *slog.Logger `json:"-"`
}

func (m *Model) validate() error {
	if err := store.ValidateName(m.Name); err != nil {
		return fmt.Errorf("art: model name: %w", err)
	}
	if err := store.ValidateName(m.Project); err != nil {
		return fmt.Errorf("art: model %q: project: %w", m.Name, err)
	}
	return nil
}

func (m *Model) logger() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.Default()
}

// Dir returns the model's directory in the store.
func (m *Model) Dir() (*store.ModelDir, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	return store.New(m.BasePath, m.Project, m.Name)
}

// InferenceName returns the model id to request: InferenceModelName if set,
// otherwise Name, with "@step" appended when step >= 0.
func (m *Model) InferenceName(step int) string {
	name := m.InferenceModelName
	if name == "" {
		name = m.Name
	}
	if step >= 0 {
		name += "@" + strconv.Itoa(step)
	}
	return name
}

// OpenAIClient returns an openai-go client for the model's endpoint, with a
// 20-minute request timeout and a 5-second connect timeout. Clients share
// one connection pool, so making one per rollout is cheap.
//
// Only the model's own API key is sent: OPENAI_API_KEY from the environment
// is never sent to InferenceBaseURL.
func (m *Model) OpenAIClient() (openai.Client, error) {
	if m.InferenceBaseURL == "" {
		return openai.Client{}, fmt.Errorf("art: model %q has no InferenceBaseURL; set it (and InferenceAPIKey) to call a prompted model", m.Name)
	}
	return m.openAIClient(), nil
}

func (m *Model) openAIClient() openai.Client {
	hc := m.HTTPClient
	if hc == nil {
		hc = sharedHTTPClient()
	}
	return openai.NewClient(
		option.WithBaseURL(m.InferenceBaseURL),
		option.WithAPIKey(m.InferenceAPIKey),
		option.WithAdminAPIKey(""), // never forward OPENAI_ADMIN_KEY either
		option.WithHTTPClient(hc),
		option.WithRequestTimeout(RequestTimeout),
	)
}

// sharedHTTPClient is the default client of OpenAIClient. Rollouts run by
// the hundred against one server, so it keeps many idle connections per host
// instead of net/http's default of two. It is built once and never changed.
var sharedHTTPClient = sync.OnceValue(func() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		t = t.Clone()
	} else { // replaced by the program: start from the usual settings
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true, IdleConnTimeout: 90 * time.Second}
	}
	t.DialContext = (&net.Dialer{Timeout: ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.MaxIdleConns = 0 // no limit
	t.MaxIdleConnsPerHost = 1024
	return &http.Client{Transport: t}
})

// Step returns 0: a prompted model has no training steps.
func (m *Model) Step(ctx context.Context) (int, error) { return 0, nil }

// ReadState returns the model's state.json, or nil if none was written.
func (m *Model) ReadState() (map[string]any, error) {
	d, err := m.Dir()
	if err != nil {
		return nil, err
	}
	return d.ReadState()
}

// MergeState deep-merges patch into state.json and returns the result.
func (m *Model) MergeState(patch map[string]any) (map[string]any, error) {
	d, err := m.Dir()
	if err != nil {
		return nil, err
	}
	return d.MergeState(patch)
}

// OverwriteState replaces state.json with state.
func (m *Model) OverwriteState(state map[string]any) error {
	d, err := m.Dir()
	if err != nil {
		return err
	}
	return d.OverwriteState(state)
}

// TrainableModel is a model trained by a Backend: a LoRA adapter on
// BaseModel whose checkpoints are served as "name@step".
//
// Register must return before the other methods are called; after that the
// methods are safe for concurrent use.
type TrainableModel struct {
	Model
	// BaseModel is the Hugging Face model folder to train on (config.json,
	// *.safetensors, tokenizer.json), or a PEFT adapter directory to start
	// from (for example after SFT).
	BaseModel string `json:"base_model"`
	// LoRA configures the adapter; the zero value is ART's default.
	LoRA LoRAConfig `json:"lora_config"`

	backend Backend // set by Register
}

// modelRecord is the content of model.json.
type modelRecord struct {
	*TrainableModel
	Trainable bool `json:"trainable"`
}

// Register validates the model, registers it with b (which loads or creates
// its latest checkpoint and serves it), points the Inference fields at the
// backend's endpoint for the latest step, and writes model.json.
func (m *TrainableModel) Register(ctx context.Context, b Backend) error {
	if b == nil {
		return errors.New("art: register: nil backend")
	}
	if err := m.validate(); err != nil {
		return err
	}
	if m.BaseModel == "" {
		return fmt.Errorf("art: model %q: BaseModel is empty; give a Hugging Face model folder or an adapter directory", m.Name)
	}
	if err := m.LoRA.Validate(); err != nil {
		return fmt.Errorf("art: model %q: %w", m.Name, err)
	}
	if err := b.Register(ctx, m); err != nil {
		return fmt.Errorf("art: register model %q: %w", m.Name, err)
	}
	ep, err := b.InferenceEndpoint(ctx, m, -1)
	if err != nil {
		return fmt.Errorf("art: register model %q: inference endpoint: %w", m.Name, err)
	}
	m.InferenceBaseURL, m.InferenceAPIKey, m.InferenceModelName = ep.BaseURL, ep.APIKey, ep.Model
	d, err := m.Dir() // after b.Register, which may have set BasePath
	if err != nil {
		return err
	}
	if err := d.WriteModel(modelRecord{m, true}); err != nil {
		return fmt.Errorf("art: register model %q: %w", m.Name, err)
	}
	m.backend = b
	return nil
}

func (m *TrainableModel) registered() (Backend, error) {
	if m.backend == nil {
		return nil, fmt.Errorf("model %q: %w", m.Name, ErrNotRegistered)
	}
	return m.backend, nil
}

// OpenAIClient returns an openai-go client for the backend's endpoint (see
// Model.OpenAIClient). It fails with ErrNotRegistered before Register.
func (m *TrainableModel) OpenAIClient() (openai.Client, error) {
	if _, err := m.registered(); err != nil {
		return openai.Client{}, err
	}
	return m.Model.OpenAIClient()
}

// InferenceName returns the model id that serves the checkpoint at step,
// "name@step". For step < 0 it returns InferenceModelName, which Register set
// to the latest step at that time (after training, ask Step for the newest),
// or "name@0" before Register.
func (m *TrainableModel) InferenceName(step int) string {
	if step < 0 && m.InferenceModelName != "" {
		return m.InferenceModelName
	}
	return m.Name + "@" + strconv.Itoa(max(step, 0))
}

// Step returns the latest checkpoint step, 0 before any training. Start a
// training loop there to resume.
func (m *TrainableModel) Step(ctx context.Context) (int, error) {
	b, err := m.registered()
	if err != nil {
		return 0, err
	}
	step, err := b.Step(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("art: model %q: step: %w", m.Name, err)
	}
	return step, nil
}

// TrainSFT fine-tunes the model on trajectories by supervised learning (see
// Backend.TrainSFT and TrainSFTConfig), then logs the step's metrics to
// history.jsonl as the "train" split at the new step, as ART's
// model.train_sft does, and makes InferenceName(-1) name the new step.
// Assistant messages and choices are learned; the trajectories' rewards are
// ignored.
func (m *TrainableModel) TrainSFT(ctx context.Context, trajectories []Trajectory, cfg TrainSFTConfig) (TrainResult, error) {
	b, err := m.registered()
	if err != nil {
		return TrainResult{}, err
	}
	if err := cfg.Validate(len(trajectories)); err != nil {
		return TrainResult{}, err
	}
	res, err := b.TrainSFT(ctx, m, trajectories, cfg)
	if err != nil {
		return TrainResult{}, fmt.Errorf("art: model %q: train sft: %w", m.Name, err)
	}
	step := res.Step
	m.InferenceModelName = m.InferenceName(step) // InferenceName(-1) is the new step from now on
	if err := m.Log(ctx, nil, LogOptions{Split: "train", Step: &step, Metrics: res.Metrics}); err != nil {
		return res, err
	}
	return res, nil
}

// DefaultBestCheckpointMetric is the metric DeleteCheckpoints keeps the best
// step by when given none.
const DefaultBestCheckpointMetric = "val/reward"

// DeleteCheckpoints deletes every checkpoint but the latest and the best one.
// The best step is the one with the highest value of metric (""
// means "val/reward") averaged over its history.jsonl rows; if no row has
// the metric, only the latest is kept and a warning is logged.
func (m *TrainableModel) DeleteCheckpoints(ctx context.Context, metric string) error {
	b, err := m.registered()
	if err != nil {
		return err
	}
	if metric == "" {
		metric = DefaultBestCheckpointMetric
	}
	latest, err := m.Step(ctx)
	if err != nil {
		return err
	}
	keep := []int{latest}
	d, err := m.Dir()
	if err != nil {
		return err
	}
	rows, err := d.ReadHistory()
	if cerr := (*store.CorruptLinesError)(nil); errors.As(err, &cerr) {
		m.logger().Warn("art: reading history for the best checkpoint", "model", m.Name, "err", err)
	} else if err != nil {
		return fmt.Errorf("art: model %q: delete checkpoints: %w", m.Name, err)
	}
	if best, ok := bestStep(rows, metric); ok {
		if best != latest {
			keep = append(keep, best)
		}
	} else {
		m.logger().Warn("art: no history row has the metric; keeping only the latest checkpoint",
			"model", m.Name, "metric", metric, "latest", latest)
	}
	if err := b.DeleteCheckpoints(ctx, m, keep); err != nil {
		return fmt.Errorf("art: model %q: delete checkpoints: %w", m.Name, err)
	}
	return nil
}

// bestStep returns the step whose rows have the highest mean of metric. Ties
// go to the later step.
func bestStep(rows []map[string]any, metric string) (int, bool) {
	type acc struct{ sum, n float64 }
	per := map[int]*acc{}
	for _, r := range rows {
		s, ok1 := r["step"].(float64)
		v, ok2 := r[metric].(float64)
		if !ok1 || !ok2 || s != float64(int(s)) {
			continue
		}
		a := per[int(s)]
		if a == nil {
			a = &acc{}
			per[int(s)] = a
		}
		a.sum += v
		a.n++
	}
	best, bestMean, found := 0, 0.0, false
	for s, a := range per {
		mean := a.sum / a.n
		if !found || mean > bestMean || mean == bestMean && s > best {
			best, bestMean, found = s, mean, true
		}
	}
	return best, found
}
