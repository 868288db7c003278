package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/remote"
	"github.com/artgo/art/host"
	"github.com/artgo/art/server"
	"github.com/artgo/art/server/api"
)

// Ensure a training request on which the server goes quiet (after its
// headers, after a progress line, or before answering at all) fails with
// ErrStreamIdle soon after Options.IdleTimeout, and closes the connection
// (which cancels the step on the server), instead of waiting forever.
func TestTrain_IdleServer(t *testing.T) {
	const idle = 200 * time.Millisecond
	cases := []struct {
		name    string
		sft     bool
		headers bool   // send 200 and its headers before going quiet
		prelude string // lines written before going quiet
	}{
		{"AfterHeaders", false, true, ""},
		{"SFTAfterHeaders", true, true, ""},
		{"AfterProgressAndKeepAlives", false, true, "{\"type\":\"progress\",\"done\":1,\"total\":4}\n\n\n"},
		{"BeforeHeaders", false, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gone := make(chan struct{}, 1) // the handler saw the client go away
			release := make(chan struct{})
			quiet := func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if c.headers {
					w.Header().Set("Content-Type", "application/x-ndjson")
					w.WriteHeader(http.StatusOK)
					io.WriteString(w, c.prelude)
					http.NewResponseController(w).Flush()
				}
				select {
				case <-r.Context().Done():
					gone <- struct{}{}
				case <-release:
				}
			}
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/art/register", func(w http.ResponseWriter, r *http.Request) {
				json.NewEncoder(w).Encode(api.ModelInfo{Name: "agent", Project: "p"})
			})
			mux.HandleFunc("POST /v1/art/train", quiet)
			mux.HandleFunc("POST /v1/art/train_sft", quiet)
			ts := httptest.NewServer(mux)
			t.Cleanup(func() {
				close(release)
				ts.Close()
			})

			b, err := remote.New(remote.Options{BaseURL: ts.URL, Quiet: true, IdleTimeout: idle})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			// A deadline, so that a regression fails instead of hanging.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p", BasePath: t.TempDir()}, BaseModel: "tiny"}
			if err := b.Register(ctx, m); err != nil {
				t.Fatal(err)
			}
			tr := art.Trajectory{Reward: 1}
			tr.AddMessage(art.UserMsg("q"))
			start := time.Now()
			if c.sft {
				_, err = b.TrainSFT(ctx, m, []art.Trajectory{tr}, art.TrainSFTConfig{})
			} else {
				_, err = b.Train(ctx, m, []art.TrajectoryGroup{{Trajectories: []art.Trajectory{tr, tr}}}, art.TrainConfig{})
			}
			elapsed := time.Since(start)
			t.Logf("after %v: %v", elapsed.Round(time.Millisecond), err)
			if !errors.Is(err, remote.ErrStreamIdle) || !strings.Contains(err.Error(), "training stream idle for 200ms: the server stopped responding") ||
				!strings.Contains(err.Error(), "ask Step") {
				t.Fatalf("got %v; want ErrStreamIdle saying the stream was idle for 200ms and to ask Step", err)
			}
			if elapsed < idle || elapsed > 5*time.Second {
				t.Errorf("failed after %v; want soon after the idle timeout of %v", elapsed, idle)
			}
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
				t.Error("the server never saw the client disconnect")
			}
		})
	}
}

// slowTraining is a model whose training steps first wait delay, saying
// nothing (no progress), like a long step on a big model.
type slowTraining struct {
	host.Model
	delay time.Duration
}

func (s slowTraining) wait(ctx context.Context) error {
	select {
	case <-time.After(s.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowTraining) Train(ctx context.Context, groups []art.TrajectoryGroup, cfg art.TrainConfig, progress func(done, total int)) (art.TrainResult, error) {
	if err := s.wait(ctx); err != nil {
		return art.TrainResult{}, err
	}
	return s.Model.Train(ctx, groups, cfg, progress)
}

func (s slowTraining) TrainSFT(ctx context.Context, trajectories []art.Trajectory, cfg art.TrainSFTConfig, progress func(done, total int)) (art.TrainResult, error) {
	if err := s.wait(ctx); err != nil {
		return art.TrainResult{}, err
	}
	return s.Model.TrainSFT(ctx, trajectories, cfg, progress)
}

// Ensure a training step through `art serve` that is silent for longer
// than the client's idle timeout still succeeds: the server's keep-alives
// (empty lines) keep the stream alive, and the client skips them.
func TestTrain_SlowStepKeptAlive(t *testing.T) {
	const idle = time.Second
	env := arttest.NewEnv(t)
	cfg := server.Config{APIKey: apiKey, TrainKeepAlive: 50 * time.Millisecond}
	url, _ := serveWith(t, env, 0, cfg, func(m host.Model) host.Model { return slowTraining{m, 3 * idle} })
	b, err := remote.New(remote.Options{BaseURL: url, APIKey: apiKey, Quiet: true, IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := env.Model()
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	g := art.TrajectoryGroup{Trajectories: []art.Trajectory{{Reward: 1}, {Reward: 0}}}
	g.Trajectories[0].AddMessage(art.UserMsg("q"))
	g.Trajectories[1].AddMessage(art.UserMsg("q"))
	start := time.Now()
	res, err := b.Train(ctx, m, []art.TrajectoryGroup{g}, art.TrainConfig{LearningRate: 1e-3})
	if err != nil || res.Step != 1 {
		t.Fatalf("a step silent for %v with keep-alives every %v and an idle timeout of %v: %+v, %v",
			3*idle, cfg.TrainKeepAlive, idle, res, err)
	}
	if d := time.Since(start); d < 3*idle {
		t.Fatalf("the step took %v; the test model should have delayed it %v", d, 3*idle)
	}
}
