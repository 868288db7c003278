// Package serverless is an art.Backend that trains on W&B Training (the
// "serverless" mode of ART): a thin REST client of the protocol ART's
// ServerlessBackend speaks. All GPU work happens on the service; this
// process only sends trajectories and polls job events.
//
//	b, err := serverless.New(serverless.Options{APIKey: os.Getenv("WANDB_API_KEY")})
//	err = model.Register(ctx, b) // the only line that changes from backend/local
//
// The protocol: Register POSTs /preview/models (return_existing, so
// registering again resumes); Train POSTs /preview/training-jobs and polls
// GET /preview/training-jobs/{id}/events?after= until training_ended or
// training_failed; checkpoints are listed and deleted at
// /preview/models/{id}/checkpoints; TrainSFT uploads a train.jsonl through
// Options.UploadSFT and POSTs /preview/sft-training-jobs. Training options
// go under ART's names (ExperimentalTrainingConfig, SFTTrainingConfig); an
// art.TrainConfig option the service lacks fails with errors.ErrUnsupported.
// The service serves
// checkpoints as "wandb-artifact:///{entity}/{project}/{name}:step{N}".
//
// So that a training loop written for backend/local runs unchanged, the
// backend serves each registered model on a loopback proxy that accepts the
// usual "name@step" (and bare "name") model ids, sends the service the
// wandb-artifact name, asks for logprobs, and maps the names in the answer
// back.
//
// Every wait is bounded: each request by Options.Timeout, each job by
// Options.JobTimeout. Idempotent reads and checkpoint deletion are retried
// a few times on 5xx answers and lost connections; creating calls (model
// registration, training and SFT jobs) are never retried, since a retry
// could start a second job.
package serverless

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/internal/httpurl"
)

// Defaults of Options.
const (
	DefaultBaseURL      = "https://api.training.wandb.ai/v1"
	DefaultTimeout      = time.Minute
	DefaultJobTimeout   = 2 * time.Hour
	DefaultPollInterval = time.Second
	// DefaultRetries is how many times an idempotent request is retried.
	DefaultRetries = 3
)

// Options configure a Backend.
type Options struct {
	// APIKey is the W&B API key (WANDB_API_KEY).
	APIKey string
	// BaseURL is the service's root, inference included ("" means
	// DefaultBaseURL).
	BaseURL string
	// Entity is the W&B entity (team or user); "" lets the service pick
	// the key's default entity.
	Entity string
	// Timeout bounds each request to the service (0 means
	// DefaultTimeout); an inference request through the proxy may take ten
	// times as long.
	Timeout time.Duration
	// JobTimeout bounds the wait for a training or SFT job (0 means
	// DefaultJobTimeout). When it passes the job may still be running on
	// the service: the error says so.
	JobTimeout time.Duration
	// PollInterval is the pause between event polls (0 means
	// DefaultPollInterval).
	PollInterval time.Duration
	// Retries is how many times an idempotent request is retried after a
	// 5xx answer or a lost connection (0 means DefaultRetries, < 0 none).
	Retries int
	// UploadSFT stores the train.jsonl of an SFT job where the service can
	// read it and returns its address (ART uploads it as a W&B dataset
	// artifact, which this package does not do). Without it TrainSFT fails
	// with errors.ErrUnsupported.
	UploadSFT func(ctx context.Context, m *art.TrainableModel, trainJSONL []byte) (string, error)
	// HTTPClient carries the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// Backend is a client of W&B Training. It is safe for concurrent use.
type Backend struct {
	opt  Options
	base string
	hc   *http.Client

	mu     sync.Mutex // guards models
	models map[string]*remoteModel
}

// remoteModel is a model registered with the service, with its proxy.
type remoteModel struct {
	ID, Entity, Project, Name, RunID string
	proxy                            *proxy
}

var (
	_ art.Backend           = (*Backend)(nil)
	_ art.SFTTrainer        = (*Backend)(nil)
	_ art.CheckpointDeleter = (*Backend)(nil)
)

// New returns a Backend for the service at opt.BaseURL. It does not contact
// the service; Register does.
func New(opt Options) (*Backend, error) {
	raw := opt.BaseURL
	if raw == "" {
		raw = DefaultBaseURL
	}
	u, err := httpurl.Parse(raw, DefaultBaseURL)
	if err != nil {
		return nil, fmt.Errorf("serverless: the service's base %w", err)
	}
	if opt.APIKey == "" {
		return nil, errors.New("serverless: no API key; set Options.APIKey (WANDB_API_KEY)")
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.JobTimeout <= 0 {
		opt.JobTimeout = DefaultJobTimeout
	}
	if opt.PollInterval <= 0 {
		opt.PollInterval = DefaultPollInterval
	}
	switch {
	case opt.Retries == 0:
		opt.Retries = DefaultRetries
	case opt.Retries < 0:
		opt.Retries = 0
	}
	hc := opt.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Backend{opt: opt, base: strings.TrimSuffix(u.String(), "/"), hc: hc, models: map[string]*remoteModel{}}, nil
}

// Error is an error answer of the service.
type Error struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *Error) Error() string {
	return fmt.Sprintf("serverless: %s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Message)
}

// ErrJobFailed wraps the error message of a job that the service reports
// as failed (a training_failed event). No checkpoint was saved.
var ErrJobFailed = errors.New("serverless: training job failed")

// ErrJobTimeout wraps a job that did not finish within Options.JobTimeout.
var ErrJobTimeout = errors.New("serverless: training job did not finish in time")

// callOnce sends one request with a JSON body (nil for none) and decodes a
// 2xx JSON answer into out (nil to ignore it).
func (b *Backend) callOnce(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, b.opt.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("serverless: %s %s: encode request: %w", method, path, err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, rd)
	if err != nil {
		return fmt.Errorf("serverless: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+b.opt.APIKey)
	resp, err := b.hc.Do(req)
	if err != nil {
		return fmt.Errorf("serverless: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		msg := strings.TrimSpace(string(data))
		var env struct {
			Detail  any    `json:"detail"`
			Message string `json:"message"`
			Error   struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &env) == nil {
			switch {
			case env.Error.Message != "":
				msg = env.Error.Message
			case env.Message != "":
				msg = env.Message
			case env.Detail != nil:
				msg = fmt.Sprint(env.Detail)
			}
		}
		return &Error{Method: method, Path: path, Status: resp.StatusCode, Message: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("serverless: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// call sends a request. Idempotent requests (GET, DELETE) are retried up to
// Options.Retries times after a 5xx answer or a transport error; POSTs,
// which create models and jobs, are sent once.
func (b *Backend) call(ctx context.Context, method, path string, body, out any) error {
	retries := 0
	if method == http.MethodGet || method == http.MethodDelete {
		retries = b.opt.Retries
	}
	wait := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := b.callOnce(ctx, method, path, body, out)
		var e *Error
		transient := err != nil && ctx.Err() == nil && (!errors.As(err, &e) || e.Status >= 500)
		if !transient || attempt >= retries {
			if err != nil && attempt > 0 {
				return fmt.Errorf("%w (after %d attempts)", err, attempt+1)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func key(m *art.TrainableModel) string { return m.Project + "/" + m.Name }

func (b *Backend) lookup(m *art.TrainableModel) (*remoteModel, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rm, ok := b.models[key(m)]
	if !ok {
		return nil, fmt.Errorf("serverless: model %q of project %q: %w", m.Name, m.Project, art.ErrNotRegistered)
	}
	return rm, nil
}

// Register creates the model on the service, or finds it if it exists
// (return_existing), and starts serving it on a loopback proxy. The
// service chooses the adapter's LoRA configuration: a TrainableModel.LoRA
// other than the default fails with errors.ErrUnsupported instead of
// being dropped.
func (b *Backend) Register(ctx context.Context, m *art.TrainableModel) error {
	if !reflect.DeepEqual(m.LoRA.WithDefaults(), art.LoRAConfig{}.WithDefaults()) {
		return fmt.Errorf("serverless: register model %q: the service chooses the adapter's LoRA configuration (rank, alpha, modules); leave TrainableModel.LoRA unset: %w", m.Name, errors.ErrUnsupported)
	}
	if _, err := b.lookup(m); err == nil {
		return nil
	}
	req := map[string]any{"project": m.Project, "name": m.Name, "base_model": m.BaseModel, "return_existing": true}
	if b.opt.Entity != "" {
		req["entity"] = b.opt.Entity
	}
	var rm remoteModel
	var ans struct {
		ID      string `json:"id"`
		Entity  string `json:"entity"`
		Project string `json:"project"`
		Name    string `json:"name"`
		RunID   string `json:"run_id"`
	}
	if err := b.call(ctx, http.MethodPost, "/preview/models", req, &ans); err != nil {
		return fmt.Errorf("serverless: register model %q: %w", m.Name, err)
	}
	if ans.ID == "" || ans.Entity == "" {
		return fmt.Errorf("serverless: register model %q: the service answered without a model id or entity", m.Name)
	}
	rm = remoteModel{ID: ans.ID, Entity: ans.Entity, Project: m.Project, Name: m.Name, RunID: ans.RunID}
	p, err := startProxy(b.base, b.opt.APIKey, b.hc, 10*b.opt.Timeout, m.Name, ArtifactName(rm.Entity, rm.Project, rm.Name, -1))
	if err != nil {
		return fmt.Errorf("serverless: register model %q: %w", m.Name, err)
	}
	rm.proxy = p
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.models[key(m)]; ok { // a concurrent Register won
		p.close()
		return nil
	}
	b.models[key(m)] = &rm
	return nil
}

// ArtifactName returns the service's inference name of a checkpoint:
// "wandb-artifact:///{entity}/{project}/{name}:step{N}", or the latest
// checkpoint's name (no ":step") when step < 0.
func ArtifactName(entity, project, name string, step int) string {
	s := "wandb-artifact:///" + entity + "/" + project + "/" + name
	if step >= 0 {
		s += ":step" + strconv.Itoa(step)
	}
	return s
}

// latest returns the highest of steps, 0 if there is none.
func latest(steps []int) int {
	l := 0
	for _, s := range steps {
		l = max(l, s)
	}
	return l
}

// checkpointPage is one page of the service's checkpoint list, a cursor
// page as in OpenAI's lists: the next page starts after the last item's id.
type checkpointPage struct {
	Data []struct {
		ID   string `json:"id"`
		Step int    `json:"step"`
	} `json:"data"`
	HasMore bool `json:"has_more"`
}

// maxCheckpointPages bounds the pages checkpoints reads, so that a service
// answering has_more for ever cannot keep it listing.
const maxCheckpointPages = 10000

// checkpoints lists the model's checkpoint steps: every page of the list,
// not only the first.
func (b *Backend) checkpoints(ctx context.Context, rm *remoteModel) ([]int, error) {
	base := "/preview/models/" + url.PathEscape(rm.ID) + "/checkpoints?limit=100"
	var steps []int
	after := ""
	for range maxCheckpointPages {
		path := base
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		var page checkpointPage
		if err := b.call(ctx, http.MethodGet, path, nil, &page); err != nil {
			return nil, fmt.Errorf("serverless: list checkpoints of %q: %w", rm.Name, err)
		}
		for _, c := range page.Data {
			steps = append(steps, c.Step)
		}
		if !page.HasMore {
			return steps, nil
		}
		if len(page.Data) == 0 || page.Data[len(page.Data)-1].ID == "" || page.Data[len(page.Data)-1].ID == after {
			return nil, fmt.Errorf("serverless: list checkpoints of %q: the service says there are more but gave no cursor to ask for them", rm.Name)
		}
		after = page.Data[len(page.Data)-1].ID
	}
	return nil, fmt.Errorf("serverless: list checkpoints of %q: more than %d pages", rm.Name, maxCheckpointPages)
}

// Step returns the latest checkpoint step on the service (0 if it has
// none): the first of the list in descending order, as ART asks for it.
func (b *Backend) Step(ctx context.Context, m *art.TrainableModel) (int, error) {
	rm, err := b.lookup(m)
	if err != nil {
		return 0, err
	}
	var page checkpointPage
	if err := b.call(ctx, http.MethodGet, "/preview/models/"+url.PathEscape(rm.ID)+"/checkpoints?limit=1&order=desc", nil, &page); err != nil {
		return 0, fmt.Errorf("serverless: latest checkpoint of %q: %w", rm.Name, err)
	}
	if len(page.Data) == 0 {
		return 0, nil
	}
	return page.Data[0].Step, nil
}

// InferenceEndpoint returns the model's loopback proxy, which serves
// "name@step" from the service's checkpoint at step.
func (b *Backend) InferenceEndpoint(ctx context.Context, m *art.TrainableModel, step int) (art.Endpoint, error) {
	rm, err := b.lookup(m)
	if err != nil {
		return art.Endpoint{}, err
	}
	steps, err := b.checkpoints(ctx, rm)
	if err != nil {
		return art.Endpoint{}, err
	}
	found := step < 0
	if found {
		step = latest(steps)
	}
	for _, s := range steps {
		found = found || s == step
	}
	if !found {
		return art.Endpoint{}, fmt.Errorf("serverless: model %q has no checkpoint at step %d (checkpoints %v)", m.Name, step, steps)
	}
	return art.Endpoint{BaseURL: rm.proxy.url + "/v1", APIKey: rm.proxy.key, Model: m.Name + "@" + strconv.Itoa(step)}, nil
}

// Train runs a training job on groups and waits for its end.
func (b *Backend) Train(ctx context.Context, m *art.TrainableModel, groups []art.TrajectoryGroup, cfg art.TrainConfig) (art.TrainResult, error) {
	rm, err := b.lookup(m)
	if err != nil {
		return art.TrainResult{}, err
	}
	ec, err := experimentalConfig(cfg)
	if err != nil {
		return art.TrainResult{}, fmt.Errorf("serverless: train %q: %w", m.Name, err)
	}
	req := map[string]any{"model_id": rm.ID, "trajectory_groups": groups, "experimental_config": ec}
	return b.runJob(ctx, rm, "/preview/training-jobs", req)
}

// experimentalConfig returns cfg as the service reads it: ART's
// ExperimentalTrainingConfig, whose field names are ART's keyword
// arguments (scale_rewards, normalize_advantages, ...), not the JSON names
// of art.TrainConfig. A field left at its zero value is left out, so the
// service applies ART's default. Options the service has no field for are
// an error wrapping errors.ErrUnsupported rather than dropped.
func experimentalConfig(cfg art.TrainConfig) (map[string]any, error) {
	var unsupported []string
	if cfg.EntropyCoef != 0 {
		unsupported = append(unsupported, fmt.Sprintf("EntropyCoef = %v", cfg.EntropyCoef))
	}
	if cfg.MaxGradNorm != 0 && cfg.MaxGradNorm != art.DefaultMaxGradNorm {
		unsupported = append(unsupported, fmt.Sprintf("MaxGradNorm = %v", cfg.MaxGradNorm))
	}
	if cfg.GradAccumulationSequences > 1 {
		unsupported = append(unsupported, fmt.Sprintf("GradAccumulationSequences = %d", cfg.GradAccumulationSequences))
	}
	if len(unsupported) > 0 {
		return nil, fmt.Errorf("TrainConfig.%s: W&B Training has no such option (ART's ExperimentalTrainingConfig), so nothing was sent; leave it 0 on this backend: %w",
			strings.Join(unsupported, ", TrainConfig."), errors.ErrUnsupported)
	}
	ec := map[string]any{}
	set := func(k string, v any, on bool) {
		if on {
			ec[k] = v
		}
	}
	set("learning_rate", cfg.LearningRate, cfg.LearningRate != 0)
	set("loss_fn", cfg.Loss, cfg.Loss != "")
	set("epsilon", cfg.Epsilon, cfg.Epsilon != 0)
	set("epsilon_high", cfg.EpsilonHigh, cfg.EpsilonHigh != 0)
	set("scale_rewards", false, cfg.DisableRewardScaling)
	set("normalize_advantages", false, cfg.DisableAdvantageNormalization)
	set("advantage_balance", cfg.AdvantageBalance, cfg.AdvantageBalance != 0)
	set("importance_sampling_level", cfg.ImportanceSamplingLevel, cfg.ImportanceSamplingLevel != "")
	set("max_negative_advantage_importance_sampling_weight", cfg.MaxNegativeAdvantageImportanceSamplingWeight, cfg.MaxNegativeAdvantageImportanceSamplingWeight != 0)
	set("mask_prob_ratio", true, cfg.MaskProbRatio)
	set("kimi_k2_tau", cfg.KimiK2Tau, cfg.KimiK2Tau != 0)
	set("kl_penalty_coef", cfg.KLPenaltyCoef, cfg.KLPenaltyCoef != 0)
	// ART's serverless client asks for the sampled logprobs when the
	// penalty is on and no source was chosen (the local default is the
	// learner's own).
	klSource := cfg.KLPenaltySource
	if klSource == "" && cfg.KLPenaltyCoef > 0 {
		klSource = art.KLSample
	}
	set("kl_penalty_source", klSource, klSource != "")
	if s := cfg.KLPenaltyReferenceStep; s != nil {
		ec["kl_penalty_reference_step"] = *s
	}
	set("precalculate_logprobs", true, cfg.PrecalculateLogprobs)
	set("truncated_importance_sampling", cfg.TruncatedImportanceSampling, cfg.TruncatedImportanceSampling != 0)
	set("allow_training_without_logprobs", true, cfg.AllowTrainingWithoutLogprobs)
	set("num_trajectories_learning_rate_multiplier_power", cfg.NumTrajectoriesLearningRateMultiplierPower, cfg.NumTrajectoriesLearningRateMultiplierPower != 0)
	set("packed_sequence_length", cfg.PackedSequenceLength, cfg.PackedSequenceLength != 0)
	return ec, nil
}

// sftConfig returns cfg as the service reads it: ART's SFTTrainingConfig,
// whose learning_rate is a number or the per-batch schedule.
func sftConfig(cfg art.TrainSFTConfig) map[string]any {
	sc := map[string]any{}
	switch {
	case len(cfg.LearningRates) > 0:
		sc["learning_rate"] = cfg.LearningRates
	case cfg.LearningRate != 0:
		sc["learning_rate"] = cfg.LearningRate
	}
	if cfg.BatchSize != 0 {
		sc["batch_size"] = cfg.BatchSize
	}
	return sc
}

// TrainSFT uploads trajectories as a train.jsonl through Options.UploadSFT
// and runs an SFT job on it.
func (b *Backend) TrainSFT(ctx context.Context, m *art.TrainableModel, trajectories []art.Trajectory, cfg art.TrainSFTConfig) (art.TrainResult, error) {
	rm, err := b.lookup(m)
	if err != nil {
		return art.TrainResult{}, err
	}
	if b.opt.UploadSFT == nil {
		return art.TrainResult{}, fmt.Errorf("serverless: SFT needs Options.UploadSFT to store the training data (W&B artifact upload is not built in): %w", errors.ErrUnsupported)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range trajectories {
		line := struct {
			Messages []art.Message `json:"messages"`
			Tools    []art.Tool    `json:"tools,omitempty"`
		}{trajectories[i].Messages(), trajectories[i].Tools}
		if err := enc.Encode(line); err != nil {
			return art.TrainResult{}, fmt.Errorf("serverless: SFT: encode trajectory %d: %w", i, err)
		}
	}
	dataURL, err := b.opt.UploadSFT(ctx, m, buf.Bytes())
	if err != nil {
		return art.TrainResult{}, fmt.Errorf("serverless: SFT: upload train.jsonl: %w", err)
	}
	req := map[string]any{"model_id": rm.ID, "training_data_url": dataURL, "config": sftConfig(cfg)}
	return b.runJob(ctx, rm, "/preview/sft-training-jobs", req)
}

// event is one event of a job.
type event struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// runJob creates a job at path (once: never retried), polls its events
// until it ends, fails, or Options.JobTimeout passes, and returns the new
// checkpoint's step with the mean of the gradient steps' metrics.
func (b *Backend) runJob(ctx context.Context, rm *remoteModel, path string, req any) (art.TrainResult, error) {
	var job struct {
		ID string `json:"id"`
	}
	if err := b.call(ctx, http.MethodPost, path, req, &job); err != nil {
		return art.TrainResult{}, fmt.Errorf("serverless: start job for %q (not retried; check Step before trying again): %w", rm.Name, err)
	}
	deadline := time.Now().Add(b.opt.JobTimeout)
	var res art.TrainResult
	sums, counts := map[string]float64{}, map[string]float64{}
	after, last := "", "none"
	for {
		var page struct {
			Data    []event `json:"data"`
			HasMore bool    `json:"has_more"`
		}
		q := path + "/" + url.PathEscape(job.ID) + "/events?after=" + url.QueryEscape(after)
		if err := b.call(ctx, http.MethodGet, q, nil, &page); err != nil {
			return art.TrainResult{}, fmt.Errorf("serverless: job %s of %q: poll events: %w", job.ID, rm.Name, err)
		}
		for _, ev := range page.Data {
			after, last = ev.ID, ev.Type
			switch ev.Type {
			case "gradient_step":
				var d struct {
					Metrics map[string]float64 `json:"metrics"`
				}
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					return art.TrainResult{}, fmt.Errorf("serverless: job %s: decode %s event: %w", job.ID, ev.Type, err)
				}
				for k, v := range d.Metrics {
					sums[k] += v
					counts[k]++
				}
			case "training_failed":
				var d struct {
					ErrorMessage string `json:"error_message"`
				}
				json.Unmarshal(ev.Data, &d) //nolint:errcheck // a malformed message still fails the job
				if d.ErrorMessage == "" {
					d.ErrorMessage = "(no message)"
				}
				return art.TrainResult{}, fmt.Errorf("%w: job %s of %q: %s", ErrJobFailed, job.ID, rm.Name, d.ErrorMessage)
			case "training_ended":
				// skipped and skip_reason are optional: the service may not
				// send them, and then the metrics alone tell.
				var d struct {
					Skipped    bool   `json:"skipped"`
					SkipReason string `json:"skip_reason"`
				}
				json.Unmarshal(ev.Data, &d) //nolint:errcheck // both fields are optional
				res.Skipped, res.SkipReason = d.Skipped, d.SkipReason
				// The job ended and its checkpoint is saved: its step is
				// asked for even if ctx ended meanwhile (each request is
				// still bounded by Timeout), or the step would go unlogged.
				steps, err := b.checkpoints(context.WithoutCancel(ctx), rm)
				if err != nil {
					return art.TrainResult{}, fmt.Errorf("serverless: job %s of %q ended: %w", job.ID, rm.Name, err)
				}
				res.Step = latest(steps)
				res.Metrics = make(map[string]float64, len(sums))
				for k, s := range sums {
					res.Metrics[k] = s / counts[k]
				}
				return res, nil
			}
		}
		// The deadline is checked on every page, not only between polls:
		// a service answering has_more page after page must not keep us
		// here past JobTimeout.
		if time.Now().After(deadline) {
			return art.TrainResult{}, fmt.Errorf("%w: job %s of %q still running after %v (last event: %s); it may finish on the service: check Step before training again", ErrJobTimeout, job.ID, rm.Name, b.opt.JobTimeout, last)
		}
		if page.HasMore && len(page.Data) > 0 {
			continue // an empty page that says has_more waits like any other
		}
		select {
		case <-ctx.Done():
			return art.TrainResult{}, fmt.Errorf("serverless: job %s of %q: %w (the job may still run on the service)", job.ID, rm.Name, ctx.Err())
		case <-time.After(b.opt.PollInterval):
		}
	}
}

// DeleteCheckpointsExcept deletes the model's checkpoints on the service
// whose steps are not in keep, never the latest.
func (b *Backend) DeleteCheckpointsExcept(ctx context.Context, m *art.TrainableModel, keep []int) error {
	rm, err := b.lookup(m)
	if err != nil {
		return err
	}
	steps, err := b.checkpoints(ctx, rm)
	if err != nil {
		return err
	}
	kept := map[int]bool{latest(steps): true}
	for _, s := range keep {
		kept[s] = true
	}
	drop := []int{}
	for _, s := range steps {
		if !kept[s] {
			drop = append(drop, s)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	// The steps go in the body, as ART's client sends them.
	path := "/preview/models/" + url.PathEscape(rm.ID) + "/checkpoints"
	if err := b.call(ctx, http.MethodDelete, path, map[string]any{"steps": drop}, nil); err != nil {
		return fmt.Errorf("serverless: delete checkpoints of %q: %w", m.Name, err)
	}
	return nil
}

// Close stops the models' proxies. The models stay on the service.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for k, rm := range b.models {
		errs = append(errs, rm.proxy.close())
		delete(b.models, k)
	}
	return errors.Join(errs...)
}
