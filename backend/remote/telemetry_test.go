package remote_test

import (
	"context"
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/remote"
	"github.com/artgo/art/internal/otlptest"
)

// TestTraces checks that a training step over HTTP is one trace: the
// server's POST /v1/art/train span, exported over OTLP/HTTP to a loopback
// receiver, sits under the SDK's art.train span.
func TestTraces(t *testing.T) {
	recv, flush := otlptest.Install(t)
	env := arttest.NewEnv(t)
	url, _ := serve(t, env)
	b, _ := remote.New(remote.Options{BaseURL: url, APIKey: apiKey})
	defer b.Close()
	m := env.Model()
	ctx := context.Background()
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	g := art.TrajectoryGroup{Trajectories: []art.Trajectory{{Reward: 1}, {Reward: 0}}}
	g.Trajectories[0].AddMessage(art.UserMsg("q"))
	g.Trajectories[1].AddMessage(art.UserMsg("q"))
	if _, err := m.Train(ctx, []art.TrajectoryGroup{g}, art.TrainConfig{LearningRate: 1e-3}); err != nil {
		t.Fatal(err)
	}
	flush()
	trains, routes := recv.Named("art.train"), recv.Named("POST /v1/art/train")
	if len(trains) != 1 || len(routes) != 1 || routes[0].ParentSpanID != trains[0].SpanID || routes[0].TraceID != trains[0].TraceID {
		t.Fatalf("want POST /v1/art/train under art.train; got:\n%s", recv)
	}
}
