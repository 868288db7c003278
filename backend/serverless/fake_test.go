package serverless_test

// W&B Training cannot be reached from here (it is a paid service), so these
// tests run the client against fakeService: a loopback server that follows
// the protocol ART's ServerlessBackend speaks (art-behaviour.md §2.2) and
// trains for real underneath, on an in-process backend/local over
// arttest's tiny model. Only the wire protocol is a stand-in; the training,
// checkpoints and sampling are real.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
)

const (
	wandbKey    = "test-wandb-key"
	fakeEntity  = "fake-entity"
	artifactPfx = "wandb-artifact:///"
)

type fakeEvent struct {
	ID   string         `json:"id"`
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

type fakeJob struct {
	mu     sync.Mutex
	events []fakeEvent
}

func (j *fakeJob) add(typ string, data map[string]any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, fakeEvent{ID: strconv.Itoa(len(j.events) + 1), Type: typ, Data: data})
}

// fakeService is the stand-in for W&B Training described above.
type fakeService struct {
	t     *testing.T
	url   string
	local *local.Backend

	mu     sync.Mutex
	models map[string]*art.TrainableModel // by id
	jobs   map[string]*fakeJob
	// Knobs for the failure tests.
	failNext   string // the next job fails with this message
	hang       bool   // jobs never end
	endless    bool   // event pages always say has_more, with no events
	chatHang   bool   // chats start a stream and send nothing more
	onList     func() // called as each checkpoint listing is served
	unavailGET int    // the next GETs answer 503
	unavailAll int    // the next requests, POSTs too, answer 503
	requests   map[string]int
	lastChat   map[string]any // the last chat request as received
	// The last training job's experimental_config as sent, and the last
	// SFT job's config as read.
	lastConfig    json.RawMessage
	lastSFTConfig art.TrainSFTConfig
}

func newFakeService(t *testing.T) *fakeService {
	f := &fakeService{t: t, models: map[string]*art.TrainableModel{}, jobs: map[string]*fakeJob{}, requests: map[string]int{},
		local: local.New(local.Options{Path: filepath.Join(t.TempDir(), "cloud"), Quiet: true, Seed: 1})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/preview/models", f.register)
	mux.HandleFunc("GET /v1/preview/models/{id}/checkpoints", f.listCheckpoints)
	mux.HandleFunc("DELETE /v1/preview/models/{id}/checkpoints", f.deleteCheckpoints)
	mux.HandleFunc("POST /v1/preview/training-jobs", f.startTraining)
	mux.HandleFunc("POST /v1/preview/sft-training-jobs", f.startSFT)
	mux.HandleFunc("GET /v1/preview/training-jobs/{id}/events", f.events)
	mux.HandleFunc("GET /v1/preview/sft-training-jobs/{id}/events", f.events)
	mux.HandleFunc("POST /v1/chat/completions", f.chat)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+wandbKey {
			fakeError(w, http.StatusUnauthorized, "bad api key")
			return
		}
		f.mu.Lock()
		f.requests[r.Method+" "+r.URL.Path]++
		unavailable := f.unavailAll > 0 || (r.Method == http.MethodGet && f.unavailGET > 0)
		if unavailable {
			if f.unavailAll > 0 {
				f.unavailAll--
			} else {
				f.unavailGET--
			}
		}
		f.mu.Unlock()
		if unavailable {
			fakeError(w, http.StatusServiceUnavailable, "temporarily unavailable")
			return
		}
		mux.ServeHTTP(w, r)
	}))
	f.url = srv.URL + "/v1"
	t.Cleanup(func() {
		srv.Close()
		f.local.Close()
	})
	return f
}

func (f *fakeService) count(methodPath string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[methodPath]
}

func fakeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"detail": msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (f *fakeService) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Project, Name  string
		BaseModel      string `json:"base_model"`
		ReturnExisting bool   `json:"return_existing"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name == "" || req.Project == "" {
		fakeError(w, http.StatusBadRequest, "want project, name and base_model")
		return
	}
	id := req.Project + "." + req.Name
	f.mu.Lock()
	m, ok := f.models[id]
	f.mu.Unlock()
	if ok && !req.ReturnExisting {
		fakeError(w, http.StatusConflict, "model exists")
		return
	}
	if !ok {
		m = &art.TrainableModel{Model: art.Model{Name: req.Name, Project: req.Project}, BaseModel: req.BaseModel}
		if err := f.local.Register(r.Context(), m); err != nil {
			fakeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		f.mu.Lock()
		f.models[id] = m
		f.mu.Unlock()
	}
	writeJSON(w, map[string]any{"id": id, "entity": fakeEntity, "project": req.Project, "name": req.Name, "run_id": id})
}

func (f *fakeService) model(w http.ResponseWriter, id string) *art.TrainableModel {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.models[id]
	if m == nil {
		fakeError(w, http.StatusNotFound, "no model "+id)
	}
	return m
}

func (f *fakeService) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	onList := f.onList
	f.mu.Unlock()
	if onList != nil {
		onList()
		time.Sleep(100 * time.Millisecond) // the client sees what onList did first
	}
	m := f.model(w, r.PathValue("id"))
	if m == nil {
		return
	}
	d, err := m.Dir()
	if err != nil {
		fakeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	steps, err := d.ListCheckpoints()
	if err != nil {
		fakeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// A cursor page, as the service's (OpenAI-style) list: limit (default
	// fakePageSize), order asc (default) or desc, after an item's id;
	// has_more says there are more.
	q := r.URL.Query()
	limit := fakePageSize
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 {
			fakeError(w, http.StatusBadRequest, "bad limit")
			return
		}
	}
	if q.Get("order") == "desc" {
		slices.Reverse(steps)
	}
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(steps, func(s int) bool { return fakeCheckpointID(s) == after })
		steps = steps[i+1:] // i = -1 (gone) restarts the list, as good as any
	}
	more := len(steps) > limit
	steps = steps[:min(limit, len(steps))]
	data := []map[string]any{}
	for _, s := range steps {
		data = append(data, map[string]any{"id": fakeCheckpointID(s), "step": s, "metrics": map[string]float64{}})
	}
	writeJSON(w, map[string]any{"data": data, "has_more": more})
}

// fakePageSize is the fake's default page of checkpoints: small, so that
// a run of a few steps already spans pages.
const fakePageSize = 2

func fakeCheckpointID(step int) string { return "ckpt-" + strconv.Itoa(step) }

func (f *fakeService) deleteCheckpoints(w http.ResponseWriter, r *http.Request) {
	m := f.model(w, r.PathValue("id"))
	if m == nil {
		return
	}
	d, err := m.Dir()
	if err != nil {
		fakeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	var req struct {
		Steps []int `json:"steps"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fakeError(w, http.StatusUnprocessableEntity, "body: "+err.Error())
		return
	}
	all, _ := d.ListCheckpoints()
	drop := map[int]bool{}
	for _, s := range req.Steps {
		drop[s] = true
	}
	var keep []int
	for _, s := range all {
		if !drop[s] {
			keep = append(keep, s)
		}
	}
	if err := f.local.DeleteCheckpointsExcept(r.Context(), m, keep); err != nil {
		fakeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, map[string]any{"deleted_count": len(all) - len(keep), "not_found_steps": []int{}})
}

// startJob registers a job and runs train in the background, turning its
// outcome into events.
func (f *fakeService) startJob(w http.ResponseWriter, train func(ctx context.Context) (art.TrainResult, error), sequences int) {
	j := &fakeJob{}
	f.mu.Lock()
	id := "job-" + strconv.Itoa(len(f.jobs)+1)
	f.jobs[id] = j
	failMsg, hang := f.failNext, f.hang
	f.failNext = ""
	f.mu.Unlock()
	go func() {
		j.add("training_started", map[string]any{"num_sequences": sequences})
		switch {
		case hang:
			return
		case failMsg != "":
			j.add("training_failed", map[string]any{"error_message": failMsg})
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		res, err := train(ctx)
		if err != nil {
			j.add("training_failed", map[string]any{"error_message": err.Error()})
			return
		}
		j.add("gradient_step", map[string]any{"metrics": res.Metrics})
		j.add("training_ended", map[string]any{"skipped": res.Skipped, "skip_reason": res.SkipReason})
	}()
	writeJSON(w, map[string]any{"id": id, "status": "QUEUED"})
}

func (f *fakeService) startTraining(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ModelID string                `json:"model_id"`
		Groups  []art.TrajectoryGroup `json:"trajectory_groups"`
		Config  json.RawMessage       `json:"experimental_config"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fakeError(w, http.StatusBadRequest, err.Error())
		return
	}
	cfg, err := decodeExperimentalConfig(req.Config)
	if err != nil {
		fakeError(w, http.StatusUnprocessableEntity, "experimental_config: "+err.Error())
		return
	}
	f.mu.Lock()
	f.lastConfig = req.Config
	f.mu.Unlock()
	m := f.model(w, req.ModelID)
	if m == nil {
		return
	}
	n := 0
	for _, g := range req.Groups {
		n += len(g.Trajectories)
	}
	f.startJob(w, func(ctx context.Context) (art.TrainResult, error) {
		return f.local.Train(ctx, m, req.Groups, cfg)
	}, n)
}

// decodeExperimentalConfig reads ART's ExperimentalTrainingConfig (the
// keyword arguments of ART's backend.train) into an art.TrainConfig. A
// field ART does not have is an error: the real service would not apply it.
func decodeExperimentalConfig(raw json.RawMessage) (art.TrainConfig, error) {
	var ec struct {
		AdvantageBalance                             *float64 `json:"advantage_balance"`
		AllowTrainingWithoutLogprobs                 *bool    `json:"allow_training_without_logprobs"`
		Epsilon                                      *float64 `json:"epsilon"`
		EpsilonHigh                                  *float64 `json:"epsilon_high"`
		ImportanceSamplingLevel                      *string  `json:"importance_sampling_level"`
		KimiK2Tau                                    *float64 `json:"kimi_k2_tau"`
		KLPenaltyCoef                                *float64 `json:"kl_penalty_coef"`
		KLPenaltyReferenceStep                       *int     `json:"kl_penalty_reference_step"`
		KLPenaltySource                              *string  `json:"kl_penalty_source"`
		KLPenaltyStepLag                             *int     `json:"kl_penalty_step_lag"`
		KLRefAdapterPath                             *string  `json:"kl_ref_adapter_path"`
		LearningRate                                 *float64 `json:"learning_rate"`
		LogprobCalculationChunkSize                  *int     `json:"logprob_calculation_chunk_size"`
		LossFn                                       *string  `json:"loss_fn"`
		MaskProbRatio                                *bool    `json:"mask_prob_ratio"`
		MaxNegativeAdvantageImportanceSamplingWeight *float64 `json:"max_negative_advantage_importance_sampling_weight"`
		NormalizeAdvantages                          *bool    `json:"normalize_advantages"`
		NumTrajectoriesLearningRateMultiplierPower   *float64 `json:"num_trajectories_learning_rate_multiplier_power"`
		PackedSequenceLength                         *int     `json:"packed_sequence_length"`
		PlotTensors                                  *bool    `json:"plot_tensors"`
		PPO                                          *bool    `json:"ppo"`
		PrecalculateLogprobs                         *bool    `json:"precalculate_logprobs"`
		ScaleLearningRateByRewardStdDev              *bool    `json:"scale_learning_rate_by_reward_std_dev"`
		ScaleRewards                                 *bool    `json:"scale_rewards"`
		TruncatedImportanceSampling                  *float64 `json:"truncated_importance_sampling"`
	}
	var cfg art.TrainConfig
	if len(raw) == 0 || string(raw) == "null" {
		return cfg, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ec); err != nil {
		return cfg, err
	}
	f := func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p
	}
	b := func(p *bool, unset bool) bool {
		if p == nil {
			return unset
		}
		return *p
	}
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	cfg.AdvantageBalance = f(ec.AdvantageBalance)
	cfg.AllowTrainingWithoutLogprobs = b(ec.AllowTrainingWithoutLogprobs, false)
	cfg.Epsilon, cfg.EpsilonHigh = f(ec.Epsilon), f(ec.EpsilonHigh)
	cfg.ImportanceSamplingLevel = art.ImportanceSamplingLevel(s(ec.ImportanceSamplingLevel))
	cfg.KimiK2Tau, cfg.KLPenaltyCoef = f(ec.KimiK2Tau), f(ec.KLPenaltyCoef)
	cfg.KLPenaltyReferenceStep = ec.KLPenaltyReferenceStep
	cfg.KLPenaltySource = art.KLPenaltySource(s(ec.KLPenaltySource))
	cfg.LearningRate = f(ec.LearningRate)
	cfg.Loss = art.Loss(s(ec.LossFn))
	cfg.MaskProbRatio = b(ec.MaskProbRatio, false)
	cfg.MaxNegativeAdvantageImportanceSamplingWeight = f(ec.MaxNegativeAdvantageImportanceSamplingWeight)
	cfg.DisableAdvantageNormalization = !b(ec.NormalizeAdvantages, true)
	cfg.NumTrajectoriesLearningRateMultiplierPower = f(ec.NumTrajectoriesLearningRateMultiplierPower)
	if ec.PackedSequenceLength != nil {
		cfg.PackedSequenceLength = *ec.PackedSequenceLength
	}
	cfg.PrecalculateLogprobs = b(ec.PrecalculateLogprobs, false)
	cfg.DisableRewardScaling = !b(ec.ScaleRewards, true)
	cfg.TruncatedImportanceSampling = f(ec.TruncatedImportanceSampling)
	return cfg, nil
}

func (f *fakeService) startSFT(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ModelID string `json:"model_id"`
		DataURL string `json:"training_data_url"`
		Config  struct {
			BatchSize    int             `json:"batch_size"`
			LearningRate json.RawMessage `json:"learning_rate"` // a number or a per-batch list
		} `json:"config"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fakeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sft := art.TrainSFTConfig{BatchSize: req.Config.BatchSize}
	if lr := bytes.TrimSpace(req.Config.LearningRate); len(lr) > 0 && lr[0] == '[' {
		if err := json.Unmarshal(lr, &sft.LearningRates); err != nil {
			fakeError(w, http.StatusUnprocessableEntity, "config.learning_rate: "+err.Error())
			return
		}
	} else if len(lr) > 0 {
		if err := json.Unmarshal(lr, &sft.LearningRate); err != nil {
			fakeError(w, http.StatusUnprocessableEntity, "config.learning_rate: "+err.Error())
			return
		}
	}
	f.mu.Lock()
	f.lastSFTConfig = sft
	f.mu.Unlock()
	m := f.model(w, req.ModelID)
	if m == nil {
		return
	}
	data, err := os.ReadFile(strings.TrimPrefix(req.DataURL, "file://"))
	if err != nil {
		fakeError(w, http.StatusBadRequest, "read training data: "+err.Error())
		return
	}
	var trajs []art.Trajectory
	for line := range bytes.Lines(data) {
		var row struct {
			Messages []art.Message `json:"messages"`
			Tools    []art.Tool    `json:"tools"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			fakeError(w, http.StatusBadRequest, "train.jsonl: "+err.Error())
			return
		}
		tr := art.Trajectory{Tools: row.Tools}
		tr.AddMessage(row.Messages...)
		trajs = append(trajs, tr)
	}
	f.startJob(w, func(ctx context.Context) (art.TrainResult, error) { return f.local.TrainSFT(ctx, m, trajs, sft) }, len(trajs))
}

func (f *fakeService) events(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	j := f.jobs[r.PathValue("id")]
	f.mu.Unlock()
	if j == nil {
		fakeError(w, http.StatusNotFound, "no job")
		return
	}
	f.mu.Lock()
	endless := f.endless
	f.mu.Unlock()
	if endless {
		writeJSON(w, map[string]any{"data": []fakeEvent{}, "has_more": true})
		return
	}
	after, _ := strconv.Atoi(r.URL.Query().Get("after"))
	j.mu.Lock()
	defer j.mu.Unlock()
	data := []fakeEvent{}
	if after < len(j.events) {
		data = j.events[after:]
	}
	writeJSON(w, map[string]any{"data": data, "has_more": false})
}

// chat serves "wandb-artifact:///entity/project/name[:stepN]" from the
// local backend's "name[@N]" and names the checkpoint back the same way.
func (f *fakeService) chat(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		fakeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.mu.Lock()
	f.lastChat = maps.Clone(req)
	hang := f.chatHang
	f.mu.Unlock()
	if hang {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, ": started\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	name, _ := req["model"].(string)
	rest, ok := strings.CutPrefix(name, artifactPfx+fakeEntity+"/")
	project, model, _ := strings.Cut(rest, "/")
	model, step, hasStep := strings.Cut(model, ":step")
	m := f.modelOrNil(project + "." + model)
	if !ok || m == nil {
		fakeError(w, http.StatusNotFound, "no such artifact "+name)
		return
	}
	if hasStep {
		model += "@" + step
	}
	req["model"] = model
	ep, err := f.local.InferenceEndpoint(r.Context(), m, -1)
	if err != nil {
		fakeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	body, _ = json.Marshal(req)
	up, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, ep.BaseURL+"/chat/completions", bytes.NewReader(body))
	up.Header.Set("Authorization", "Bearer "+ep.APIKey)
	up.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(up)
	if err != nil {
		fakeError(w, http.StatusBadGateway, err.Error())
		return
	}
	defer resp.Body.Close()
	if stream, _ := req["stream"].(bool); stream && resp.StatusCode == http.StatusOK {
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		io.Copy(w, resp.Body) // chunks keep the local names: the test checks content only
		return
	}
	data, _ := io.ReadAll(resp.Body)
	var ans map[string]any
	if resp.StatusCode == http.StatusOK && json.Unmarshal(data, &ans) == nil {
		if served, ok := ans["model"].(string); ok {
			n, s, _ := strings.Cut(served, "@")
			ans["model"] = fmt.Sprintf("%s%s/%s/%s:step%s", artifactPfx, fakeEntity, project, n, s)
			data, _ = json.Marshal(ans)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	w.Write(data)
}

func (f *fakeService) modelOrNil(id string) *art.TrainableModel {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.models[id]
}
