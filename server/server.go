// Package server serves one trainable model (any host.Model) over HTTP:
// an OpenAI-compatible inference API, ART's training API and operational
// endpoints.
//
//	POST /v1/chat/completions         chat completions, plain or streamed (SSE)
//	POST /v1/responses                the Responses API, plain or streamed
//	POST /v1/completions              legacy text completions
//	GET  /v1/models, /v1/models/{id}  the served ids, "name@step" per checkpoint
//	/v1/art/...                       the training API (package server/api)
//	GET  /healthz                     liveness, never needs the API key
//	GET  /metrics                     Prometheus text format
//	/dashboard/                       the dashboard, if Config.Dashboard is set
//
// # Model names
//
// Every checkpoint is served as "NAME@STEP" until it is deleted. A bare
// "NAME" means the latest step at the moment the request arrives; the
// response's "model" field always says which "NAME@STEP" answered, so a
// rollout can record exactly which policy sampled it. An unknown name or a
// step without a checkpoint is a 404 whose message lists what is served.
//
// # Logprobs and token ids
//
// Every choice carries its sampled tokens' logprobs and token ids whether
// or not the client asked (see package openai), so any client's responses
// are trainable: art.ChoiceFromOpenAI turns an openai-go choice into an
// art.Choice with its token ids.
//
// # Training and inference
//
// A training step (POST /v1/art/train, or Server.Train in process) runs
// while inference keeps serving: requests for earlier steps, and bare-name
// requests that arrive before the step ends, are answered by the previous
// adapter; the new "NAME@STEP+1" is served the moment its checkpoint is on
// disk. Nothing waits on a lock held by training, so there is no deadlock;
// the two only share the CPU. Training steps run one at a time.
//
// # Limits and errors
//
// Errors use OpenAI's envelope {"error":{"message","type","param","code"}}
// with 400 for invalid requests (including unsupported features, such as
// a response_format schema keyword the grammar cannot enforce), 401 for a missing or wrong API key, 404 for
// unknown models and routes, 413 for bodies over Config.MaxBodyBytes, 504
// when a request exceeds Config.RequestTimeout, and 500 for server faults.
// A client that disconnects cancels its generation. The server keeps
// serving after any bad request.
package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/host"
	"github.com/artgo/art/openai"
)

// Defaults of Config.
const (
	DefaultAddr              = "127.0.0.1:7999"
	DefaultMaxBodyBytes      = 32 << 20
	DefaultRequestTimeout    = 10 * time.Minute
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 5 * time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultTrainKeepAlive    = 10 * time.Second
	DefaultWriteStall        = time.Minute
)

// Config configures a Server. The zero value serves without an API key
// with the defaults above.
type Config struct {
	// APIKey, if set, must be sent as "Authorization: Bearer KEY" on every
	// route but /healthz and the dashboard's, which checks the key itself
	// (see Dashboard).
	APIKey string
	// MaxBodyBytes bounds request bodies (0 means DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// RequestTimeout bounds each inference request, streams included (0
	// means DefaultRequestTimeout, < 0 means none). Training requests are
	// not bounded: they end with the step or when the client goes away.
	RequestTimeout time.Duration
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout configure the
	// http.Server of Serve (0 means the defaults above).
	ReadHeaderTimeout, ReadTimeout, IdleTimeout time.Duration
	// TrainKeepAlive is how often a training stream gets a keep-alive (an
	// empty line) while its step runs, so that a client can tell a long
	// step from a server that stopped answering (0 means
	// DefaultTrainKeepAlive). It must stay well under the clients' idle
	// timeout (remote.Options.IdleTimeout, 1 min by default) and any
	// proxy's.
	TrainKeepAlive time.Duration
	// WriteStall bounds each write of a response: a client that reads
	// nothing for this long (its socket buffers full) loses its
	// connection, which cancels the generation or training step behind
	// the response (0 means DefaultWriteStall, < 0 none). Without it, a
	// stream to such a client blocked its handler for good.
	WriteStall time.Duration
	// Logger receives request errors and lifecycle messages; nil means
	// slog.Default().
	Logger *slog.Logger
	// Dashboard, if set, is served under DashboardPath (package dashboard
	// built with the same API key). It authenticates its own requests (a
	// browser cannot send the Bearer header), so the server's key check
	// does not apply there.
	Dashboard http.Handler
}

// DashboardPath is where Config.Dashboard is mounted.
const DashboardPath = "/dashboard/"

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.TrainKeepAlive <= 0 {
		c.TrainKeepAlive = DefaultTrainKeepAlive
	}
	if c.WriteStall == 0 {
		c.WriteStall = DefaultWriteStall
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Server serves one host.Model over HTTP. Create it with New; its
// methods are safe for concurrent use.
type Server struct {
	cfg     Config
	model   *host.Meter // the hosted model, its training counted for /metrics
	log     *slog.Logger
	keyHash [sha256.Size]byte
	created int64 // the "created" time of the served models
	metrics metrics
	handler http.Handler
	routes  map[string][]string // path → methods, for 405 answers
	// responses keeps recent Responses API answers for
	// previous_response_id and item_reference.
	responses *art.ResponsesConversation

	baseCtx    context.Context // parent of every request's context
	cancelBase context.CancelFunc

	mu     sync.Mutex // guards hs, closed, active and idle
	hs     *http.Server
	closed bool
	active int           // requests in flight
	idle   chan struct{} // closed when active drops to 0, if someone waits
}

// New returns a Server for m configured by cfg. If m is a *host.Meter its
// counts are the ones /metrics reports (so training that bypasses the
// server through the same Meter is counted); otherwise m is wrapped in one.
func New(cfg Config, m host.Model) *Server {
	cfg = cfg.withDefaults()
	meter, ok := m.(*host.Meter)
	if !ok {
		meter = host.NewMeter(m)
	}
	s := &Server{cfg: cfg, model: meter, log: cfg.Logger, created: time.Now().Unix(), routes: map[string][]string{},
		responses: art.NewResponsesConversation(maxStoredResponses)}
	s.keyHash = sha256.Sum256([]byte(cfg.APIKey))
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.handler = s.routesHandler()
	return s
}

func (s *Server) routesHandler() http.Handler {
	mux := http.NewServeMux()
	handle := func(method, path string, h http.HandlerFunc) {
		mux.Handle(method+" "+path, s.traced(method, path, h))
		s.routes[path] = append(s.routes[path], method)
	}
	handle("POST", "/v1/chat/completions", s.handleChatCompletions)
	handle("POST", "/v1/responses", s.handleResponses)
	handle("POST", "/v1/completions", s.handleCompletions)
	handle("GET", "/v1/models", s.handleModels)
	handle("GET", "/v1/models/{id}", s.handleModel)
	handle("GET", "/healthz", s.handleHealth)
	handle("GET", "/metrics", s.handleMetrics)
	handle("POST", "/v1/art/register", s.handleRegister)
	handle("GET", "/v1/art/model", s.handleInfo)
	handle("GET", "/v1/art/step", s.handleStep)
	handle("GET", "/v1/art/checkpoints", s.handleCheckpoints)
	handle("POST", "/v1/art/checkpoints/delete", s.handleDeleteCheckpoints)
	handle("POST", "/v1/art/checkpoints/restore", s.handleRestoreCheckpoint)
	handle("POST", "/v1/art/train", s.handleTrain)
	handle("POST", "/v1/art/train_sft", s.handleTrainSFT)
	handle("POST", "/v1/art/log", s.handleLog)
	if s.cfg.Dashboard != nil {
		mux.Handle(DashboardPath, s.cfg.Dashboard)
	}
	mux.HandleFunc("/", s.handleNotFound)
	return s.track(s.recover(s.boundWrites(s.auth(mux))))
}

// boundWrites gives every write of a response, and the final flush
// net/http makes after the handler returns, Config.WriteStall to go out.
// A write that times out fails the connection, and net/http then cancels
// the request's context: what the handler was doing for the client stops.
func (s *Server) boundWrites(h http.Handler) http.Handler {
	stall := s.cfg.WriteStall
	if stall < 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// A kept-alive connection still has the last request's deadline;
		// nothing bounds writes until this one's first.
		rc.SetWriteDeadline(time.Time{}) // errors: a writer without deadlines (a test recorder) stays unbounded
		h.ServeHTTP(&stallWriter{ResponseWriter: w, rc: rc, stall: stall}, r)
		rc.SetWriteDeadline(time.Now().Add(stall))
	})
}

// stallWriter sets a write deadline stall ahead before each write and
// flush of its ResponseWriter.
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

func (w *stallWriter) Write(b []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.stall))
	return w.ResponseWriter.Write(b)
}

// FlushError is what http.ResponseController.Flush calls.
func (w *stallWriter) FlushError() error {
	w.rc.SetWriteDeadline(time.Now().Add(w.stall))
	return w.rc.Flush()
}

// Flush serves handlers that assert http.Flusher.
func (w *stallWriter) Flush() { w.FlushError() }

func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Handler returns the server's routes with authentication, panic recovery
// and request tracking applied. It can be mounted in any http.Server (as
// httptest.NewServer does); Serve uses it.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve accepts connections on l until Shutdown or Close, with the
// configured timeouts. It returns http.ErrServerClosed after a shutdown.
func (s *Server) Serve(l net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return s.baseCtx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return http.ErrServerClosed
	}
	s.hs = hs
	s.mu.Unlock()
	return hs.Serve(l)
}

// shutdownGrace is how long Shutdown waits for cancelled requests to
// return after its context expired.
const shutdownGrace = 10 * time.Second

// Shutdown stops accepting connections and waits for the requests in
// flight (a training step included) to finish. If ctx ends first, the
// remaining requests are cancelled (a cancelled training step saves no
// checkpoint) and Shutdown waits briefly for them to return before
// returning ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	hs := s.hs
	s.mu.Unlock()
	var err error
	if hs != nil {
		err = hs.Shutdown(ctx)
	}
	if err == nil {
		err = s.waitHandlers(ctx)
	}
	if err != nil {
		s.cancelBase()
		if hs != nil {
			hs.Close()
		}
		grace, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if werr := s.waitHandlers(grace); werr != nil {
			s.log.Warn("server: requests still running after shutdown", "err", werr)
		}
	}
	s.cancelBase()
	return err
}

// Close stops the server at once, cancelling the requests in flight.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	hs := s.hs
	s.mu.Unlock()
	s.cancelBase()
	if hs != nil {
		return hs.Close()
	}
	return nil
}

// waitHandlers waits until no request is in flight, or ctx ends.
func (s *Server) waitHandlers(ctx context.Context) error {
	s.mu.Lock()
	if s.active == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) begin() {
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
}

func (s *Server) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active--; s.active == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// track counts the requests in flight, for Shutdown, and ties each
// request's context to the server's life (for handlers mounted elsewhere
// than Serve).
func (s *Server) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.begin()
		defer s.end()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(s.baseCtx, cancel)
		defer stop()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// recover turns a panic in a handler into a 500 answer and a log entry, so
// one bad request cannot take the server down.
func (s *Server) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("server: panic in handler", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeError(w, &apiError{Status: http.StatusInternalServerError, Type: openai.ErrServer, Msg: fmt.Sprintf("internal error: %v", v)})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// auth checks the API key on every route but /healthz and the dashboard's. The key is compared
// in constant time (through hashes, so its length does not leak either).
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || s.cfg.Dashboard != nil && strings.HasPrefix(r.URL.Path, DashboardPath) {
			next.ServeHTTP(w, r)
			return
		}
		h := r.Header.Get("Authorization")
		key, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			writeError(w, &apiError{Status: http.StatusUnauthorized, Type: openai.ErrAuthentication, Code: "missing_api_key",
				Msg: "missing API key: send it as the header \"Authorization: Bearer KEY\""})
			return
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(key)))
		if subtle.ConstantTimeCompare(got[:], s.keyHash[:]) != 1 {
			writeError(w, &apiError{Status: http.StatusUnauthorized, Type: openai.ErrAuthentication, Code: "invalid_api_key",
				Msg: "incorrect API key"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	if methods, ok := s.routes[r.URL.Path]; ok {
		w.Header().Set("Allow", strings.Join(methods, ", "))
		writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: openai.ErrInvalidRequest, Code: "method_not_allowed",
			Msg: fmt.Sprintf("%s %s is not supported; use %s", r.Method, r.URL.Path, strings.Join(methods, " or "))})
		return
	}
	writeError(w, &apiError{Status: http.StatusNotFound, Type: openai.ErrNotFound, Code: "unknown_route",
		Msg: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	ids, err := host.ModelIDs(s.model)
	if err != nil {
		writeError(w, internalError(err))
		return
	}
	list := openai.ModelList{Object: openai.ObjectList, Data: make([]openai.Model, 0, len(ids))}
	for _, id := range ids {
		list.Data = append(list.Data, s.modelEntry(id))
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	step, err := s.model.Resolve(id)
	if err != nil {
		writeError(w, hostError(err, "model"))
		return
	}
	m := s.modelEntry(s.modelID(step))
	m.ID = id
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) modelEntry(id string) openai.Model {
	info := s.model.Info()
	m := openai.Model{ID: id, Object: openai.ObjectModel, Created: s.created, OwnedBy: "art",
		Parent: info.BaseModel, MaxModelLen: info.MaxModelLen}
	if step, err := s.model.Resolve(id); err == nil {
		m.Root = s.model.CheckpointPath(step)
	}
	return m
}

func (s *Server) modelID(step int) string { return s.model.Info().ModelID(step) }

// apiError is an error answer: status, OpenAI error type, optional param
// and code, and the message.
type apiError struct {
	Status int
	Type   string
	Param  string
	Code   string
	Msg    string
}

func (e *apiError) Error() string { return e.Msg }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: openai.ErrInvalidRequest, Param: param, Code: "invalid_value", Msg: fmt.Sprintf(format, args...)}
}

func unsupported(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: openai.ErrInvalidRequest, Param: param, Code: "unsupported_feature", Msg: fmt.Sprintf(format, args...)}
}

func internalError(err error) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Type: openai.ErrServer, Msg: err.Error()}
}

// hostError maps an error of the hosted model to its answer; param names the
// request field that chose the model.
func hostError(err error, modelParam string) *apiError {
	var re *host.RequestError
	switch {
	case errors.Is(err, host.ErrUnknownModel):
		return &apiError{Status: http.StatusNotFound, Type: openai.ErrNotFound, Param: modelParam, Code: "model_not_found", Msg: trimPrefix(err.Error())}
	case errors.As(err, &re):
		code := re.Code
		if code == "" {
			code = "invalid_value"
		}
		return &apiError{Status: http.StatusBadRequest, Type: openai.ErrInvalidRequest, Param: re.Param, Code: code, Msg: trimPrefix(re.Msg)}
	}
	return internalError(err)
}

// trimPrefix drops the Go packages' prefixes ("native: ", a prompt's
// "train: render chat: chat: ") from a message meant for API users: to
// them a prompt error prefixed "train:" reads as a failed training step.
func trimPrefix(msg string) string {
	for _, p := range []string{"native: ", "generate: ", "train: render chat: ", "chat: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

func errorBody(e *apiError) openai.ErrorResponse {
	body := openai.ErrorResponse{Error: openai.ErrorBody{Message: e.Msg, Type: e.Type}}
	if e.Param != "" {
		body.Error.Param = &e.Param
	}
	if e.Code != "" {
		body.Error.Code = &e.Code
	}
	return body
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, errorBody(e))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody(internalError(fmt.Errorf("encode response: %w", err))))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads a JSON body of at most MaxBodyBytes into v. Unknown fields
// are ignored.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) *apiError {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	if err == nil {
		// Only whitespace may follow the value.
		if _, terr := dec.Token(); terr == nil {
			err = errTrailingData
		} else if !errors.Is(terr, io.EOF) {
			err = terr
		}
	}
	if err == nil {
		return nil
	}
	var mbe *http.MaxBytesError
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	var fe *openai.FieldError
	switch {
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: openai.ErrInvalidRequest, Code: "request_too_large",
			Msg: fmt.Sprintf("request body exceeds the server's limit of %d bytes", mbe.Limit)}
	case errors.As(err, &ute) && ute.Field == "":
		return &apiError{Status: http.StatusBadRequest, Type: openai.ErrInvalidRequest, Code: "invalid_type",
			Msg: fmt.Sprintf("invalid request: the request body must be a JSON object, got JSON %s", ute.Value)}
	case errors.As(err, &ute):
		return &apiError{Status: http.StatusBadRequest, Type: openai.ErrInvalidRequest, Param: ute.Field, Code: "invalid_type",
			Msg: fmt.Sprintf("invalid request: field %q must be %s, got JSON %s", ute.Field, jsonKind(ute.Type), ute.Value)}
	case errors.Is(err, io.EOF):
		return &apiError{Status: http.StatusBadRequest, Type: openai.ErrInvalidRequest, Code: "invalid_json", Msg: "request body is empty; expected a JSON object"}
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, errTrailingData):
		return &apiError{Status: http.StatusBadRequest, Type: openai.ErrInvalidRequest, Code: "invalid_json",
			Msg: fmt.Sprintf("request body is not valid JSON: %v", err)}
	case errors.As(err, &fe):
		return &apiError{Status: http.StatusBadRequest, Type: openai.ErrInvalidRequest, Param: fe.Field, Code: "invalid_value",
			Msg: "invalid request: " + fe.Msg}
	}
	// A field's own decoder refused its value.
	return &apiError{Status: http.StatusBadRequest, Type: openai.ErrInvalidRequest, Code: "invalid_value",
		Msg: fmt.Sprintf("invalid request: %v", err)}
}

var errTrailingData = errors.New("unexpected data after the JSON value")

// jsonKind names the JSON values a Go type decodes, for errors: a client
// knows "an integer", not "int64" or "[]json.RawMessage".
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("an integer (%d-bit)", t.Bits())
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value of another type"
}

// checkModel checks a model name given to the training API: empty, the
// served name, or one of its "name@step" ids.
func (s *Server) checkModel(name string) *apiError {
	served := s.model.Info().Name
	if name == "" || name == served {
		return nil
	}
	if before, _, ok := strings.Cut(name, "@"); ok && before == served {
		return nil
	}
	ids, _ := host.ModelIDs(s.model)
	return &apiError{Status: http.StatusNotFound, Type: openai.ErrNotFound, Param: "model", Code: "model_not_found",
		Msg: fmt.Sprintf("this server trains %q, not %q (served: %s)", served, name, strings.Join(ids, ", "))}
}
