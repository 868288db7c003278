// Package remote is an art.Backend that talks to `art serve` over HTTP:
// the server holds the engine and the checkpoints, this client registers
// the model, runs training steps (streaming their progress) and points the
// model's OpenAI client at the server's /v1 endpoint.
//
//	b, err := remote.New(remote.Options{BaseURL: "http://gpu-box:7999", APIKey: key})
//	model := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "demo"}, BaseModel: "Qwen2.5-0.5B-Instruct"}
//	err = model.Register(ctx, b) // checks the server trains "agent" on that base model
//
// One `art serve` process trains one model, so Register fails unless the
// server's model has the same name and project and (when the model gives
// one) a base model folder of the same name. The server's adapter
// configuration is the one it was started with; the model's LoRA field is
// not sent. Trajectories and history logged with model.Log stay on the
// client; Backend.Log writes them on the server instead.
//
// Every request carries ctx; requests other than training also time out
// after Options.Timeout. A training step has no time limit of its own, as
// it may rightly take minutes, but its stream does: the server writes at
// least a keep-alive line every 10 s while the step runs, and a stream
// silent for Options.IdleTimeout (1 min) fails with ErrStreamIdle.
// Cancelling ctx, or an idle stream, disconnects, which cancels the step
// on the server (no checkpoint is written).
package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/internal/httpurl"
	"github.com/artgo/art/internal/tracing"
	"github.com/artgo/art/internal/trainbar"
	"github.com/artgo/art/openai"
	"github.com/artgo/art/server/api"
)

// Defaults of Options.
const (
	DefaultBaseURL = "http://127.0.0.1:7999"
	DefaultTimeout = time.Minute
	// DefaultRetryFor is how long idempotent requests are retried while
	// the server cannot be reached.
	DefaultRetryFor = 10 * time.Second
	// ConnectTimeout bounds dialing the server.
	ConnectTimeout = 5 * time.Second
	// DefaultIdleTimeout is how long a training request may go without a
	// byte either way (the request sent, then its stream) before it fails
	// with ErrStreamIdle: six of the server's keep-alives
	// (server.DefaultTrainKeepAlive, 10 s).
	DefaultIdleTimeout = time.Minute
)

// Options configure a Backend.
type Options struct {
	// BaseURL is the server's root ("" means DefaultBaseURL); a trailing
	// "/v1" is accepted.
	BaseURL string
	// APIKey is the server's --api-key, if it has one.
	APIKey string
	// Timeout bounds each request but training steps (0 means
	// DefaultTimeout).
	Timeout time.Duration
	// IdleTimeout bounds the silence on a training request: once no byte
	// has been sent or received for this long, the step fails with
	// ErrStreamIdle and the connection is closed, which cancels it on the
	// server (0 means DefaultIdleTimeout, < 0 no bound). The server sends
	// a keep-alive every server.Config.TrainKeepAlive (10 s) while a step
	// runs; an `art serve` older than that sends only progress lines, one
	// per trained sequence, so against it use an IdleTimeout longer than
	// the slowest sequence and the checkpoint save, or < 0.
	IdleTimeout time.Duration
	// RetryFor bounds how long an idempotent request (reads, Register,
	// checkpoint deletion, Log with its call ID) is retried while the
	// server cannot be reached, e.g. while it restarts, or its answer was
	// lost (0 means DefaultRetryFor, < 0 no retries). Training is never
	// retried: the error says to ask Step.
	RetryFor time.Duration
	// HTTPClient carries the requests; nil means a client with a 5-second
	// connect timeout. Its own Timeout, if any, also applies to training.
	HTTPClient *http.Client
	// Quiet turns the training progress bar off. It is off anyway when
	// ProgressWriter (nil: os.Stderr) is not a terminal.
	Quiet          bool
	ProgressWriter io.Writer
}

// Backend is a client of `art serve`. It is safe for concurrent use.
type Backend struct {
	opt  Options
	base string // root URL without a trailing slash or /v1
	hc   *http.Client

	mu     sync.Mutex // guards models
	models map[string]bool
}

// The backend has every optional capability of art.Backend.
var (
	_ art.Backend            = (*Backend)(nil)
	_ art.SFTTrainer         = (*Backend)(nil)
	_ art.CheckpointDeleter  = (*Backend)(nil)
	_ art.CheckpointRestorer = (*Backend)(nil)
)

// New returns a Backend for the server at opt.BaseURL. It does not contact
// the server; Register does.
func New(opt Options) (*Backend, error) {
	raw := opt.BaseURL
	if raw == "" {
		raw = DefaultBaseURL
	}
	base, err := httpurl.Base(raw, "http://host:7999")
	if err != nil {
		return nil, fmt.Errorf("remote: the art server's base %w", err)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.IdleTimeout == 0 {
		opt.IdleTimeout = DefaultIdleTimeout
	}
	switch {
	case opt.RetryFor == 0:
		opt.RetryFor = DefaultRetryFor
	case opt.RetryFor < 0:
		opt.RetryFor = 0
	}
	hc := opt.HTTPClient
	if hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		hc = &http.Client{Transport: tracing.Transport(t)} // the server's spans continue the caller's trace
	}
	return &Backend{opt: opt, base: base, hc: hc, models: map[string]bool{}}, nil
}

// Error is an error answer of the server, in OpenAI's envelope.
type Error struct {
	Method, Path string
	Status       int
	Type         string
	Param        string
	Code         string
	Message      string
}

func (e *Error) Error() string {
	return fmt.Sprintf("remote: %s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Message)
}

// ErrUnreachable wraps failures to connect to the server: the request was
// not sent.
var ErrUnreachable = errors.New("remote: cannot reach the art server")

// ErrConnectionLost wraps a connection that broke after the request was
// sent and before an answer came: whether it took effect is unknown.
var ErrConnectionLost = errors.New("remote: the connection to the art server broke before an answer; whether the request took effect is unknown")

// ErrStreamIdle wraps a training request on which nothing was sent or
// received for Options.IdleTimeout: the server stopped answering (or the
// network dropped the connection without closing it). Whether the step
// was saved is unknown; ask Step.
var ErrStreamIdle = errors.New("remote: training stream idle")

// do sends a request with a JSON body (nil for none) and returns the
// response if its status is 200; other answers become an *Error.
func (b *Backend) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	return b.doWatched(ctx, method, path, body, nil)
}

// doWatched is do calling touch (if not nil) whenever a part of the
// request body is sent.
func (b *Backend) doWatched(ctx context.Context, method, path string, body any, touch func()) (*http.Response, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("remote: %s %s: encode request: %w", method, path, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("remote: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(activityReader{bytes.NewReader(payload), touch}), nil
		}
		req.Body, _ = req.GetBody()
		req.ContentLength = int64(len(payload))
		req.Header.Set("Content-Type", "application/json")
	}
	if b.opt.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.opt.APIKey)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("remote: %s %s: %w", method, path, ctx.Err())
		}
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			return nil, fmt.Errorf("%w at %s (is `art serve` running there?): %s %s: %v", ErrUnreachable, b.base, method, path, err)
		}
		return nil, fmt.Errorf("%w: %s %s: %v", ErrConnectionLost, method, path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &Error{Method: method, Path: path, Status: resp.StatusCode}
	var env openai.ErrorResponse
	if json.Unmarshal(data, &env) == nil && env.Error.Message != "" {
		e.Type, e.Message = env.Error.Type, env.Error.Message
		if env.Error.Param != nil {
			e.Param = *env.Error.Param
		}
		if env.Error.Code != nil {
			e.Code = *env.Error.Code
		}
	} else {
		e.Message = strings.TrimSpace(string(data))
		if e.Message == "" {
			e.Message = "(empty body)"
		}
	}
	return nil, e
}

// call sends a request with the backend's timeout and decodes the JSON
// answer into out. An idempotent request that cannot reach the server is
// retried for up to Options.RetryFor (a restarting server comes back);
// anything else fails at once.
func (b *Backend) call(ctx context.Context, method, path string, body, out any) error {
	retryUntil := time.Now().Add(b.opt.RetryFor)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := b.callOnce(ctx, method, path, body, out)
		lost := errors.Is(err, ErrUnreachable) || errors.Is(err, ErrConnectionLost)
		if err == nil || !lost || !idempotent(method, path) || time.Now().Add(wait).After(retryUntil) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// idempotent reports whether sending a request twice does what sending it
// once does: reads, registration, deleting checkpoints by a keep list, and
// logging (Log sends a call ID the server logs once). Training is not: a
// retry could train a step twice.
func idempotent(method, path string) bool {
	path, _, _ = strings.Cut(path, "?")
	return method == http.MethodGet || path == "/v1/art/register" || path == "/v1/art/checkpoints/delete" || path == "/v1/art/log"
}

func (b *Backend) callOnce(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, b.opt.Timeout)
	defer cancel()
	resp, err := b.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("remote: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

func (b *Backend) registered(m *art.TrainableModel) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.models[m.Project+"/"+m.Name] {
		return fmt.Errorf("remote: model %s/%s: %w", m.Project, m.Name, art.ErrNotRegistered)
	}
	return nil
}

func query(m *art.TrainableModel) string { return "?model=" + url.QueryEscape(m.Name) }

// Register checks that the server trains m (same name and project, and a
// base model folder of the same name when m gives one).
func (b *Backend) Register(ctx context.Context, m *art.TrainableModel) error {
	var info api.ModelInfo
	req := api.RegisterRequest{Name: m.Name, Project: m.Project, BaseModel: m.BaseModel}
	if !m.LoRA.IsZero() {
		req.LoRA = &m.LoRA // the server refuses a model whose adapter differs
	}
	if err := b.call(ctx, http.MethodPost, "/v1/art/register", req, &info); err != nil {
		return err
	}
	b.mu.Lock()
	b.models[m.Project+"/"+m.Name] = true
	b.mu.Unlock()
	return nil
}

// Info returns what the server says about the model it trains.
func (b *Backend) Info(ctx context.Context, m *art.TrainableModel) (api.ModelInfo, error) {
	var info api.ModelInfo
	err := b.call(ctx, http.MethodGet, "/v1/art/model"+query(m), nil, &info)
	return info, err
}

// Step returns the model's latest checkpoint step on the server.
func (b *Backend) Step(ctx context.Context, m *art.TrainableModel) (int, error) {
	if err := b.registered(m); err != nil {
		return 0, err
	}
	var resp api.StepResponse
	if err := b.call(ctx, http.MethodGet, "/v1/art/step"+query(m), nil, &resp); err != nil {
		return 0, err
	}
	return resp.Step, nil
}

// Train runs one training step on the server, showing its progress as a
// bar on a terminal. A stream cut off before its result is an error saying
// the step's outcome is unknown.
func (b *Backend) Train(ctx context.Context, m *art.TrainableModel, groups []art.TrajectoryGroup, cfg art.TrainConfig) (art.TrainResult, error) {
	if err := b.registered(m); err != nil {
		return art.TrainResult{}, err
	}
	return b.stream(ctx, "/v1/art/train", api.TrainRequest{Model: m.Name, Groups: groups, Config: cfg}, "train "+m.Name)
}

// TrainSFT runs supervised fine-tuning on the server, like Train.
func (b *Backend) TrainSFT(ctx context.Context, m *art.TrainableModel, trajectories []art.Trajectory, cfg art.TrainSFTConfig) (art.TrainResult, error) {
	if err := b.registered(m); err != nil {
		return art.TrainResult{}, err
	}
	return b.stream(ctx, "/v1/art/train_sft", api.TrainSFTRequest{Model: m.Name, Trajectories: trajectories, Config: cfg}, "sft "+m.Name)
}

// stream posts a training request and follows its NDJSON answer (see
// api.TrainEvent) to the result. Empty lines (the server's keep-alives)
// are skipped; a request silent either way for Options.IdleTimeout fails
// with ErrStreamIdle.
func (b *Backend) stream(ctx context.Context, path string, body any, label string) (art.TrainResult, error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wd := watch(b.opt.IdleTimeout, cancel)
	defer wd.stop()
	idleErr := func() error {
		return fmt.Errorf("%w for %v: the server stopped responding (POST %s); whether the step was saved is unknown (ask Step)",
			ErrStreamIdle, b.opt.IdleTimeout, path)
	}
	resp, err := b.doWatched(ctx, http.MethodPost, path, body, wd.touch)
	if err != nil {
		if wd.fired() && parent.Err() == nil {
			return art.TrainResult{}, idleErr()
		}
		return art.TrainResult{}, err
	}
	defer resp.Body.Close()
	wd.touch()
	bar := trainbar.New(b.opt.ProgressWriter, b.opt.Quiet, label)
	sc := bufio.NewScanner(activityReader{resp.Body, wd.touch})
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev api.TrainEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			bar.Abort()
			return art.TrainResult{}, fmt.Errorf("remote: POST %s: bad progress line %.80q: %w", path, line, err)
		}
		switch ev.Type {
		case api.EventProgress:
			bar.Update(ev.Done, ev.Total)
		case api.EventResult:
			bar.Finish()
			if ev.Result.Metrics == nil {
				ev.Result.Metrics = map[string]float64{}
			}
			return ev.Result, nil
		case api.EventError:
			bar.Abort()
			return art.TrainResult{}, fmt.Errorf("remote: POST %s: training failed on the server: %s", path, ev.Message)
		}
	}
	bar.Abort()
	if wd.fired() && parent.Err() == nil {
		return art.TrainResult{}, idleErr()
	}
	err = sc.Err()
	if parent.Err() != nil {
		err = parent.Err()
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return art.TrainResult{}, fmt.Errorf("remote: POST %s: the stream ended without a result, so whether the step was saved is unknown (ask Step): %w", path, err)
}

// activityReader calls touch (if not nil) after every read that got
// bytes.
type activityReader struct {
	r     io.Reader
	touch func()
}

func (a activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 && a.touch != nil {
		a.touch()
	}
	return n, err
}

// watchdog calls onIdle once when touch has not been called for idle. Its
// timer runs no goroutine while it waits.
type watchdog struct {
	idle   time.Duration
	onIdle func()
	start  time.Time
	last   atomic.Int64 // time of the last touch, since start
	bit    atomic.Bool  // onIdle was called

	mu      sync.Mutex // guards t and stopped
	t       *time.Timer
	stopped bool
}

// watch starts a watchdog; idle <= 0 means one that never fires.
func watch(idle time.Duration, onIdle func()) *watchdog {
	w := &watchdog{idle: idle, onIdle: onIdle, start: time.Now()}
	if idle > 0 {
		w.mu.Lock()
		w.t = time.AfterFunc(idle, w.check)
		w.mu.Unlock()
	}
	return w
}

func (w *watchdog) touch() { w.last.Store(int64(time.Since(w.start))) }

func (w *watchdog) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if quiet := time.Since(w.start) - time.Duration(w.last.Load()); quiet < w.idle {
		w.t.Reset(w.idle - quiet)
		return
	}
	w.stopped = true
	w.bit.Store(true)
	w.onIdle()
}

// fired reports whether onIdle was called.
func (w *watchdog) fired() bool { return w.bit.Load() }

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.t != nil {
		w.t.Stop()
	}
}

// DeleteCheckpointsExcept deletes every checkpoint on the server whose step is
// not in keep, except the latest.
func (b *Backend) DeleteCheckpointsExcept(ctx context.Context, m *art.TrainableModel, keep []int) error {
	if err := b.registered(m); err != nil {
		return err
	}
	if keep == nil {
		keep = []int{}
	}
	var resp api.CheckpointsResponse
	return b.call(ctx, http.MethodPost, "/v1/art/checkpoints/delete", api.DeleteCheckpointsRequest{Model: m.Name, Keep: keep}, &resp)
}

// RestoreCheckpoint has the server serve the checkpoint at step again as
// the next step, from which training goes on (see art.CheckpointRestorer).
// It is not retried: a retry could restore twice.
func (b *Backend) RestoreCheckpoint(ctx context.Context, m *art.TrainableModel, step int) (int, error) {
	if err := b.registered(m); err != nil {
		return 0, err
	}
	var resp api.StepResponse
	if err := b.call(ctx, http.MethodPost, "/v1/art/checkpoints/restore", api.RestoreCheckpointRequest{Model: m.Name, Step: &step}, &resp); err != nil {
		return 0, err
	}
	return resp.Step, nil
}

// Checkpoints lists the steps whose checkpoints are on the server.
func (b *Backend) Checkpoints(ctx context.Context, m *art.TrainableModel) ([]int, error) {
	var resp api.CheckpointsResponse
	if err := b.call(ctx, http.MethodGet, "/v1/art/checkpoints"+query(m), nil, &resp); err != nil {
		return nil, err
	}
	return resp.Steps, nil
}

// InferenceEndpoint returns the server's /v1 endpoint and "name@step" (the
// latest step when step < 0). A step without a checkpoint is an error.
func (b *Backend) InferenceEndpoint(ctx context.Context, m *art.TrainableModel, step int) (art.Endpoint, error) {
	if err := b.registered(m); err != nil {
		return art.Endpoint{}, err
	}
	if step < 0 {
		s, err := b.Step(ctx, m)
		if err != nil {
			return art.Endpoint{}, err
		}
		step = s
	} else {
		var model openai.Model
		if err := b.call(ctx, http.MethodGet, "/v1/models/"+url.PathEscape(m.Name+"@"+strconv.Itoa(step)), nil, &model); err != nil {
			return art.Endpoint{}, err
		}
	}
	return art.Endpoint{BaseURL: b.base + "/v1", APIKey: b.opt.APIKey, Model: m.Name + "@" + strconv.Itoa(step)}, nil
}

// Log writes groups and metrics to the server's store (trajectories
// parquet and history.jsonl), as m.Log does locally. The step defaults to
// the latest. It returns the step logged at. The request carries a call ID
// (opts.CallID, or a fresh one), so a request whose answer was lost is sent
// again like a read: the server logs it once.
func (b *Backend) Log(ctx context.Context, m *art.TrainableModel, groups []art.TrajectoryGroup, opts art.LogOptions) (int, error) {
	if err := b.registered(m); err != nil {
		return 0, err
	}
	if opts.CallID == "" {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return 0, fmt.Errorf("remote: log: call id: %w", err)
		}
		opts.CallID = hex.EncodeToString(id[:])
	}
	var resp api.LogResponse
	req := api.LogRequest{Model: m.Name, Groups: groups, Split: opts.Split, Step: opts.Step, Metrics: opts.Metrics, CallID: opts.CallID}
	if err := b.call(ctx, http.MethodPost, "/v1/art/log", req, &resp); err != nil {
		return 0, err
	}
	return resp.Step, nil
}

// Close releases idle connections. The server keeps running.
func (b *Backend) Close() error {
	b.hc.CloseIdleConnections()
	return nil
}
