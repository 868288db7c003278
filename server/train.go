package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/host"
	"github.com/artgo/art/openai"
	"github.com/artgo/art/server/api"
	"github.com/artgo/art/store"
)

func (s *Server) info() (api.ModelInfo, error) {
	ids, err := host.ModelIDs(s.model)
	if err != nil {
		return api.ModelInfo{}, err
	}
	o := s.model.Info()
	lora := o.LoRA.WithDefaults()
	return api.ModelInfo{Name: o.Name, Project: o.Project, BaseModel: o.BaseModel, Step: s.model.Step(), Models: ids,
		MaxModelLen: o.MaxModelLen, LoRA: &lora}, nil
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) { getJSON(s, w, r, s.info) }

// getJSON answers a GET about the model named by the "model" query
// parameter (empty means this server's) with what get returns.
func getJSON[T any](s *Server, w http.ResponseWriter, r *http.Request, get func() (T, error)) {
	if e := s.checkModel(r.URL.Query().Get("model")); e != nil {
		writeError(w, e)
		return
	}
	v, err := get()
	if err != nil {
		writeError(w, internalError(err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// handleRegister answers whether this server hosts the model described in
// the request (name, and project and base model when given).
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	var req api.RegisterRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	o := s.model.Info()
	conflict := func(param, format string, args ...any) {
		writeError(w, &apiError{Status: http.StatusConflict, Type: openai.ErrInvalidRequest, Param: param, Code: "model_mismatch", Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case req.Name != o.Name:
		if req.Name == "" {
			writeError(w, badRequest("name", "name is required; this server trains %q", o.Name))
			return
		}
		writeError(w, &apiError{Status: http.StatusNotFound, Type: openai.ErrNotFound, Param: "name", Code: "model_not_found",
			Msg: fmt.Sprintf("this server trains %q, not %q; start `art serve --name %s` for it", o.Name, req.Name, req.Name)})
		return
	case req.Project != "" && req.Project != o.Project:
		conflict("project", "model %q is served in project %q, not %q", o.Name, o.Project, req.Project)
		return
	case req.BaseModel != "" && !sameBaseModel(req.BaseModel, o.BaseModel):
		conflict("base_model", "model %q is trained on base model %q, not %q", o.Name, o.BaseModel, req.BaseModel)
		return
	case req.LoRA != nil && !req.LoRA.SameAdapter(o.LoRA):
		conflict("lora_config", "model %q has an adapter with LoRA config %s, not %s; its checkpoints keep the config they were created with (use another name for a new adapter)",
			o.Name, o.LoRA, *req.LoRA)
		return
	}
	info, err := s.info()
	if err != nil {
		writeError(w, internalError(err))
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// sameBaseModel reports whether a base model named by a client is the
// server's: the same path, or a folder with the same name (the client's
// path may be on another machine, or a Hugging Face id "org/name").
func sameBaseModel(client, server string) bool {
	c, s := filepath.Clean(client), filepath.Clean(server)
	return c == s || filepath.Base(c) == filepath.Base(s)
}

func (s *Server) handleStep(w http.ResponseWriter, r *http.Request) {
	getJSON(s, w, r, func() (api.StepResponse, error) { return api.StepResponse{Step: s.model.Step()}, nil })
}

func (s *Server) checkpoints() (api.CheckpointsResponse, error) {
	steps, err := s.model.Checkpoints()
	if err != nil {
		return api.CheckpointsResponse{}, err
	}
	ids := make([]string, len(steps))
	for i, st := range steps {
		ids[i] = s.modelID(st)
	}
	return api.CheckpointsResponse{Steps: steps, Models: ids}, nil
}

func (s *Server) handleCheckpoints(w http.ResponseWriter, r *http.Request) {
	getJSON(s, w, r, s.checkpoints)
}

func (s *Server) handleDeleteCheckpoints(w http.ResponseWriter, r *http.Request) {
	var req api.DeleteCheckpointsRequest
	if !s.decodeFor(w, r, &req, &req.Model) {
		return
	}
	for i, st := range req.Keep {
		if st < 0 {
			writeError(w, badRequest(fmt.Sprintf("keep[%d]", i), "keep[%d] = %d: steps are >= 0", i, st))
			return
		}
	}
	if err := s.model.DeleteCheckpoints(req.Keep); err != nil {
		writeError(w, internalError(err))
		return
	}
	resp, err := s.checkpoints()
	if err != nil {
		writeError(w, internalError(err))
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// handleRestoreCheckpoint serves an earlier checkpoint again as the next
// step (see host.Training.RestoreCheckpoint).
func (s *Server) handleRestoreCheckpoint(w http.ResponseWriter, r *http.Request) {
	var req api.RestoreCheckpointRequest
	if !s.decodeFor(w, r, &req, &req.Model) {
		return
	}
	if req.Step == nil || *req.Step < 0 {
		writeError(w, badRequest("step", "step is required: the checkpoint step (>= 0) to restore"))
		return
	}
	step, err := s.model.RestoreCheckpoint(r.Context(), *req.Step)
	if errors.Is(err, host.ErrUnknownModel) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: openai.ErrNotFound, Param: "step", Code: "checkpoint_not_found", Msg: trimPrefix(err.Error())})
		return
	}
	if err != nil {
		writeError(w, internalError(err))
		return
	}
	writeJSON(w, http.StatusOK, api.StepResponse{Step: step})
}

// handleTrain runs a training step and streams its progress as NDJSON
// (see api.TrainEvent). Invalid requests are answered with a JSON error
// before the stream starts; once it has started, failures are an "error"
// line. A client that disconnects cancels the step (no checkpoint is
// written).
func (s *Server) handleTrain(w http.ResponseWriter, r *http.Request) {
	var req api.TrainRequest
	if !s.decodeFor(w, r, &req, &req.Model) {
		return
	}
	if err := req.Config.Validate(); err != nil {
		writeError(w, badRequest("config", "%v", err))
		return
	}
	if e := validateGroups(req.Groups); e != nil {
		writeError(w, e)
		return
	}
	s.streamTraining(w, r, func(progress func(done, total int)) (art.TrainResult, error) {
		return s.model.Train(r.Context(), req.Groups, req.Config, progress)
	})
}

// handleTrainSFT runs supervised fine-tuning and streams its progress
// (one line per batch) like handleTrain.
func (s *Server) handleTrainSFT(w http.ResponseWriter, r *http.Request) {
	var req api.TrainSFTRequest
	if !s.decodeFor(w, r, &req, &req.Model) {
		return
	}
	if len(req.Trajectories) == 0 {
		writeError(w, badRequest("trajectories", "trajectories is empty: nothing to learn"))
		return
	}
	if err := req.Config.Validate(len(req.Trajectories)); err != nil {
		writeError(w, badRequest("config", "%v", err))
		return
	}
	for i := range req.Trajectories {
		if err := req.Trajectories[i].Validate(); err != nil {
			writeError(w, badRequest(fmt.Sprintf("trajectories[%d]", i), "trajectories[%d]: %v", i, err))
			return
		}
	}
	s.streamTraining(w, r, func(progress func(done, total int)) (art.TrainResult, error) {
		return s.model.TrainSFT(r.Context(), req.Trajectories, req.Config, progress)
	})
}

// streamTraining answers a validated training request with an NDJSON
// stream (see api.TrainEvent): run's progress lines, then its result or
// error, with an empty line every Config.TrainKeepAlive meanwhile so that
// the client knows the server is still there during a long step. A client
// that disconnects cancels the run (no checkpoint is written).
func (s *Server) streamTraining(w http.ResponseWriter, r *http.Request, run func(progress func(done, total int)) (art.TrainResult, error)) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()

	var mu sync.Mutex // guards writes to w
	write := func(line []byte) {
		mu.Lock()
		defer mu.Unlock()
		w.Write(line)
		rc.Flush()
	}
	emit := func(ev api.TrainEvent) {
		b, err := json.Marshal(ev)
		if err != nil {
			b, _ = json.Marshal(api.TrainEvent{Type: api.EventError, Message: fmt.Sprintf("encode %s event: %v", ev.Type, err)})
		}
		write(append(b, '\n'))
	}
	stop := s.keepAlive(r.Context(), func() { write([]byte{'\n'}) })
	res, err := run(func(done, total int) {
		emit(api.TrainEvent{Type: api.EventProgress, Done: done, Total: total})
	})
	stop()
	if err != nil {
		if r.Context().Err() != nil {
			s.log.Warn("server: training step cancelled (client gone or shutdown); no checkpoint written", "err", err)
			return
		}
		s.log.Error("server: training step failed", "err", err)
		emit(api.TrainEvent{Type: api.EventError, Message: trimPrefix(err.Error())})
		return
	}
	emit(api.TrainEvent{Type: api.EventResult, Result: res})
}

// keepAlive calls beat every Config.TrainKeepAlive until ctx ends or the
// returned stop is called; stop returns once beat is no longer running.
func (s *Server) keepAlive(ctx context.Context, beat func()) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(s.cfg.TrainKeepAlive)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// handleLog logs trajectory groups and metrics in the server's store, as
// art.Model.Log does on the client side.
func (s *Server) handleLog(w http.ResponseWriter, r *http.Request) {
	var req api.LogRequest
	if !s.decodeFor(w, r, &req, &req.Model) {
		return
	}
	if e := validateGroups(req.Groups); e != nil {
		writeError(w, e)
		return
	}
	step := s.model.Step()
	if req.Step != nil {
		if *req.Step < 0 {
			writeError(w, badRequest("step", "step must be >= 0, got %d", *req.Step))
			return
		}
		step = *req.Step
	}
	split := req.Split
	if split == "" {
		split = art.DefaultSplit
	}
	if err := store.ValidateName(split); err != nil {
		writeError(w, badRequest("split", "split: %v", err))
		return
	}
	if req.CallID != "" {
		if err := store.ValidateCallID(req.CallID); err != nil {
			writeError(w, badRequest("call_id", "%v", err))
			return
		}
	}
	o := s.model.Info()
	m := art.Model{Name: o.Name, Project: o.Project, BasePath: o.Path, Logger: s.log}
	var (
		done bool
		err  error
	)
	if req.CallID != "" {
		// A repeat of a call that completed answers the step it logged at
		// (the latest step may have moved since).
		step, done, err = loggedCall(m, req.CallID, step)
	}
	if err == nil && !done {
		err = m.Log(r.Context(), req.Groups, art.LogOptions{Split: split, Step: &step, Metrics: req.Metrics, CallID: req.CallID})
		if err == nil {
			s.model.ObserveRewards(split, req.Groups)
			if req.CallID != "" {
				// Another request with this id may have logged it first.
				step, _, err = loggedCall(m, req.CallID, step)
			}
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		writeError(w, internalError(fmt.Errorf("log: %w", err)))
		return
	}
	writeJSON(w, http.StatusOK, api.LogResponse{Step: step})
}

// loggedCall returns the step m's Log call named id logged at, and
// whether it completed; otherwise step itself.
func loggedCall(m art.Model, id string, step int) (int, bool, error) {
	d, err := m.Dir()
	if err != nil {
		return step, false, err
	}
	s, done, err := d.LoggedCall(id)
	if err != nil || !done {
		return step, false, err
	}
	return s, true, nil
}

// decodeFor decodes a training-API request body into req and checks that
// *model (its model field, read after decoding) names the served model. On
// failure it has answered with the error and returns false.
func (s *Server) decodeFor(w http.ResponseWriter, r *http.Request, req any, model *string) bool {
	if e := s.decode(w, r, req); e != nil {
		writeError(w, e)
		return false
	}
	if e := s.checkModel(*model); e != nil {
		writeError(w, e)
		return false
	}
	return true
}

// validateGroups checks every trajectory group of a request, naming the
// first bad one.
func validateGroups(groups []art.TrajectoryGroup) *apiError {
	for i := range groups {
		if err := groups[i].Validate(); err != nil {
			return badRequest(fmt.Sprintf("groups[%d]", i), "groups[%d]: %v", i, err)
		}
	}
	return nil
}
