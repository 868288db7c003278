package art

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel/attribute"

	"github.com/artgo/art/internal/tracing"
	"github.com/artgo/art/internal/turn"
	"github.com/artgo/art/store"
)

// Timeouts of the clients returned by OpenAIClient, as in ART: a completion
// may take a long time on a busy server, a connection should not.
const (
	requestTimeout = 20 * time.Minute
	connectTimeout = 5 * time.Second
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
	// is never written to disk. A TrainableModel's Train and TrainSFT set
	// InferenceModelName to the new step: while one may be running, read
	// the latest model id with TrainableModel.InferenceName(-1), which is
	// safe to call from any goroutine, not from the field.
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
//
// In a gathered rollout, a chat request without a seed gets one derived
// from GatherOptions.Seed, the model id (which names the step), the
// rollout's group and index and the number of requests it made before, so
// the same program samples the same tokens run after run. A request's own
// seed wins.
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
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	seeded := *hc
	seeded.Transport = seedingTransport{next}
	hc = &seeded
	return openai.NewClient(
		option.WithBaseURL(m.InferenceBaseURL),
		option.WithAPIKey(m.InferenceAPIKey),
		option.WithAdminAPIKey(""), // never forward OPENAI_ADMIN_KEY either
		option.WithHTTPClient(hc),
		option.WithRequestTimeout(requestTimeout),
		option.WithMiddleware(chatMiddleware),
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
	t.DialContext = (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext
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
// methods are safe for concurrent use. Concurrent Train and TrainSFT calls
// on one model run one at a time, in turn: each trains, logs and updates
// InferenceModelName before the next starts.
type TrainableModel struct {
	Model
	// BaseModel is the Hugging Face model folder to train on (config.json,
	// *.safetensors, tokenizer.json), or a PEFT adapter directory to start
	// from (for example after SFT).
	BaseModel string `json:"base_model"`
	// LoRA configures the adapter; the zero value is ART's default.
	LoRA LoRAConfig `json:"lora_config"`
	// Watch is the collapse watch Train runs after each step; the zero
	// value warns with the default thresholds (see Watch).
	Watch Watch `json:"-"`

	backend Backend      // set by Register
	latest  atomic.Int64 // the latest step this model has seen: at Register, Step, Train and TrainSFT
	// training is held by one Train or TrainSFT call at a time (made by
	// Register), so concurrent calls train, log and move the latest step
	// in order.
	training turn.Turn
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
	if ctx == nil {
		return errNilContext("register")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("art: register: %w", err) // before a checkpoint is written
	}
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
	step, err := b.Step(ctx, m)
	if err != nil {
		return fmt.Errorf("art: register model %q: step: %w", m.Name, err)
	}
	ep, err := b.InferenceEndpoint(ctx, m, step)
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
	m.latest.Store(int64(step))
	if m.training == nil {
		m.training = turn.New()
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
// "name@step", or at the latest step if step < 0, as ART's
// get_inference_name. The latest step is the newest one this model has
// seen: Register, Step, Train and TrainSFT keep it current (a step trained
// by calling the Backend directly shows only after the next Step call).
// Before Register it is "name@0". Train and TrainSFT also set
// InferenceModelName to it.
func (m *TrainableModel) InferenceName(step int) string {
	if step < 0 {
		step = int(m.latest.Load())
	}
	return m.Name + "@" + strconv.Itoa(step)
}

// Step returns the latest checkpoint step, 0 before any training. Start a
// training loop there to resume.
func (m *TrainableModel) Step(ctx context.Context) (int, error) {
	if ctx == nil {
		return 0, errNilContext("step")
	}
	b, err := m.registered()
	if err != nil {
		return 0, err
	}
	step, err := b.Step(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("art: model %q: step: %w", m.Name, err)
	}
	m.latest.Store(int64(step))
	return step, nil
}

// takeTraining waits for this model's Train and TrainSFT calls before it
// (or for ctx to end) and returns the function that lets the next one go.
func (m *TrainableModel) takeTraining(ctx context.Context, what string) (func(), error) {
	release, err := m.training.Take(ctx)
	if err != nil {
		return nil, fmt.Errorf("art: model %q: %s: gave up waiting for another Train or TrainSFT call on this model to finish: %w", m.Name, what, err)
	}
	return release, nil
}

// setLatest records step, just trained, as the latest one served.
func (m *TrainableModel) setLatest(step int) {
	m.latest.Store(int64(step))
	m.InferenceModelName = m.Name + "@" + strconv.Itoa(step)
}

// A TrainOption adjusts TrainableModel.Train.
type TrainOption func(*trainOptions)

type trainOptions struct {
	logGroups    []TrajectoryGroup
	logGroupsSet bool
}

// LogGroups makes Train log groups instead of the groups it trains on: for
// reward shaping meant for training only, train on the shaped groups and
// log the original ones, whose rewards keep their meaning.
func LogGroups(groups []TrajectoryGroup) TrainOption {
	return func(o *trainOptions) { o.logGroups, o.logGroupsSet = groups, true }
}

// Train runs one GRPO training step on groups (see Backend.Train and
// TrainConfig), which saves and serves the next checkpoint, then logs the
// step as ART's model.train does: the groups to
// trajectories/train/<step>.parquet and one history.jsonl row with their
// aggregate metrics and the step's training metrics, under the "train"
// split at the new step (see Log). From then on InferenceName(-1) names the
// new step.
//
// A step with nothing to train is still saved and logged, with
// TrainResult.Skipped set. The groups to log (LogGroups, or else groups)
// are checked as Log checks them before training starts, so ones that
// cannot be logged (a non-finite reward or metric, say) are an error with
// nothing trained or saved. If training succeeds but logging fails
// otherwise (a disk error, say), Train returns the result and the logging
// error.
//
// The model's Watch then judges the step (see Watch): a step that looks
// like the start of a collapse is warned about, and with Watch.Recovery
// the best checkpoint is served again as the next step, whose number
// TrainResult.Step then holds.
func (m *TrainableModel) Train(ctx context.Context, groups []TrajectoryGroup, cfg TrainConfig, opts ...TrainOption) (_ TrainResult, err error) {
	if ctx == nil {
		return TrainResult{}, errNilContext("train")
	}
	ctx, span := startSpan(ctx, "art.train", tracing.Model.String(m.Name), attribute.Int("art.groups", len(groups)))
	defer func() { tracing.End(span, err) }()
	b, err := m.registered()
	if err != nil {
		return TrainResult{}, err
	}
	var o trainOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return TrainResult{}, err
	}
	if err := m.Watch.Validate(); err != nil {
		return TrainResult{}, err
	}
	var restorer CheckpointRestorer
	if m.Watch.Recovery != nil && !m.Watch.Off {
		var ok bool
		if restorer, ok = b.(CheckpointRestorer); !ok {
			return TrainResult{}, unsupported(m, b, "rolling back to a checkpoint (Watch.Recovery)", "CheckpointRestorer")
		}
	}
	d, err := m.Dir()
	if err != nil {
		return TrainResult{}, err
	}
	release, err := m.takeTraining(ctx, "train")
	if err != nil {
		return TrainResult{}, err
	}
	defer release()
	var rows []map[string]any // the history before this step, for the watch
	if !m.Watch.Off {
		rows, err = d.ReadHistory()
		if cerr := (*store.CorruptLinesError)(nil); errors.As(err, &cerr) {
			m.logger().Warn("art: reading history for the collapse watch", "model", m.Name, "err", err)
		} else if err != nil {
			return TrainResult{}, fmt.Errorf("art: model %q: train: %w", m.Name, err)
		}
	}
	lrScale := m.Watch.learningRateScale(rows)
	if lrScale != 1 {
		cfg.LearningRate = cfg.WithDefaults().LearningRate * lrScale
	}
	// The groups to log must pass Log's checks before anything is trained:
	// a step trained and saved whose log then fails would leave a
	// checkpoint without its history row.
	logged, what := groups, "groups"
	if o.logGroupsSet {
		logged, what = o.logGroups, "LogGroups"
	}
	if _, err := trajectoryRows(logged); err != nil {
		return TrainResult{}, fmt.Errorf("art: model %q: train: %s cannot be logged, so nothing was trained: %w", m.Name, what, err)
	}
	res, err := b.Train(ctx, m, groups, cfg)
	if err != nil {
		return TrainResult{}, fmt.Errorf("art: model %q: train: %w", m.Name, err)
	}
	m.setLatest(res.Step)
	span.SetAttributes(tracing.Step.Int(res.Step), attribute.Bool("art.skipped", res.Skipped))
	flagged := false
	if !m.Watch.Off {
		if res.Metrics == nil {
			res.Metrics = map[string]float64{}
		}
		row, _ := logMetrics(logged, "train", res.Metrics) // Log below warns of what it leaves out
		flagged = m.watchStep(rows, &res, row)
		for k, v := range row {
			if strings.HasPrefix(k, "watch/") {
				res.Metrics[k] = v
			}
		}
		if restorer != nil {
			res.Metrics["watch/lr_scale"] = lrScale
		}
	}
	step := res.Step
	// The step is saved and served: its log must not be lost to a context
	// that ended as it landed (a resumed loop starts after it).
	if err := m.Log(context.WithoutCancel(ctx), logged, LogOptions{Split: "train", Step: &step, Metrics: res.Metrics}); err != nil {
		return res, err
	}
	if flagged && restorer != nil {
		if err := m.rollBack(ctx, restorer, d, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// TrainSFT fine-tunes the model on trajectories by supervised learning (see
// SFTTrainer and TrainSFTConfig), which saves and serves the next
// checkpoint, then logs the step's training metrics to history.jsonl under
// the "train" split at the new step, as ART's model.train_sft does. From
// then on InferenceName(-1) names the new step. Assistant messages and
// choices are learned; the trajectories' rewards are ignored.
//
// It fails with an error wrapping errors.ErrUnsupported if the backend is
// not an SFTTrainer.
func (m *TrainableModel) TrainSFT(ctx context.Context, trajectories []Trajectory, cfg TrainSFTConfig) (_ TrainResult, err error) {
	if ctx == nil {
		return TrainResult{}, errNilContext("train sft")
	}
	ctx, span := startSpan(ctx, "art.train_sft", tracing.Model.String(m.Name), attribute.Int("art.trajectories", len(trajectories)))
	defer func() { tracing.End(span, err) }()
	b, err := m.registered()
	if err != nil {
		return TrainResult{}, err
	}
	sft, ok := b.(SFTTrainer)
	if !ok {
		return TrainResult{}, unsupported(m, b, "supervised fine-tuning", "SFTTrainer")
	}
	if err := cfg.Validate(len(trajectories)); err != nil {
		return TrainResult{}, err
	}
	release, err := m.takeTraining(ctx, "train sft")
	if err != nil {
		return TrainResult{}, err
	}
	defer release()
	res, err := sft.TrainSFT(ctx, m, trajectories, cfg)
	if err != nil {
		return TrainResult{}, fmt.Errorf("art: model %q: train sft: %w", m.Name, err)
	}
	m.setLatest(res.Step)
	step := res.Step
	// Saved and served: logged whatever happened to ctx meanwhile, as in Train.
	if err := m.Log(context.WithoutCancel(ctx), nil, LogOptions{Split: "train", Step: &step, Metrics: res.Metrics}); err != nil {
		return res, err
	}
	return res, nil
}

func unsupported(m *TrainableModel, b Backend, what, iface string) error {
	return fmt.Errorf("art: model %q: backend %T does not support %s (it does not implement art.%s): %w",
		m.Name, b, what, iface, errors.ErrUnsupported)
}

// defaultBestCheckpointMetric is the metric DeleteCheckpoints keeps the best
// step by when given none.
const defaultBestCheckpointMetric = "val/reward"

// DeleteCheckpoints deletes every checkpoint but the latest and the best
// one, as ART's model.delete_checkpoints does. The best step is the one with
// the highest value of metric ("" means "val/reward") averaged over its
// history.jsonl rows.
//
// If no history row has a metric the caller named (a typo), it deletes
// nothing and returns an error naming the metric and some that the history
// does have. For the default, before any "val" split is logged, it keeps
// just the latest checkpoint and logs a warning, as ART does: a training
// loop that calls it every step to bound disk use keeps working.
//
// It fails with an error wrapping errors.ErrUnsupported if the backend is
// not a CheckpointDeleter.
func (m *TrainableModel) DeleteCheckpoints(ctx context.Context, metric string) error {
	if ctx == nil {
		return errNilContext("delete checkpoints")
	}
	b, err := m.registered()
	if err != nil {
		return err
	}
	del, ok := b.(CheckpointDeleter)
	if !ok {
		return unsupported(m, b, "deleting checkpoints", "CheckpointDeleter")
	}
	defaulted := metric == ""
	if defaulted {
		metric = defaultBestCheckpointMetric
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
	best, ok := bestStep(rows, metric)
	if !ok && defaulted {
		m.logger().Warn("art: delete checkpoints: no history row has the default metric; keeping only the latest checkpoint", "model", m.Name, "metric", metric, "latest", latest)
		best, ok = latest, true
	}
	if !ok {
		return fmt.Errorf("art: model %q: delete checkpoints: no history row has the metric %q, so nothing was deleted; %s",
			m.Name, metric, historyMetrics(rows, metric))
	}
	if best != latest {
		keep = append(keep, best)
	}
	if err := del.DeleteCheckpointsExcept(ctx, m, keep); err != nil {
		return fmt.Errorf("art: model %q: delete checkpoints: %w", m.Name, err)
	}
	return nil
}

// historyMetrics describes the numeric metrics of the history rows that
// bestStep reads, for the error of a metric they lack: at most 8, those
// sharing metric's last path element (the "reward" of "val/reward") first,
// then those ending in "/reward", then the others in order.
func historyMetrics(rows []map[string]any, metric string) string {
	seen := map[string]bool{}
	for _, r := range rows {
		if s, ok := r["step"].(float64); !ok || s != float64(int(s)) {
			continue // bestStep ignores it
		}
		for k, v := range r {
			if _, ok := v.(float64); ok && k != "step" && k != "training_step" {
				seen[k] = true
			}
		}
	}
	if len(seen) == 0 {
		if len(rows) == 0 {
			return "the history has no rows"
		}
		return "the history has no metrics"
	}
	last := metric[strings.LastIndex(metric, "/")+1:]
	rank := func(k string) int {
		switch {
		case k[strings.LastIndex(k, "/")+1:] == last:
			return 0
		case strings.HasSuffix(k, "/reward"):
			return 1
		}
		return 2
	}
	names := make([]string, 0, len(seen))
	for k := range seen {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	const shown = 8
	if len(names) <= shown {
		return "the history has " + quoteAll(names)
	}
	return fmt.Sprintf("the history has %s and %d more", quoteAll(names[:shown]), len(names)-shown)
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
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
