package art

import (
	"context"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/artgo/art/internal/tracing"
)

// Tracing: the SDK makes OpenTelemetry spans (package telemetry turns their
// export on) for each gather ("art.gather"), rollout ("art.rollout", with
// its trajectory id), chat request its clients send ("art.chat") and
// training step ("art.train", "art.train_sft").

// WithTrajectoryID returns ctx carrying a trajectory id. The clients of
// OpenAIClient (and a Recorder) send it with each request in the
// X-ART-Trajectory-ID header, with the W3C trace context, so the server's
// spans and logs name the trajectory; spans started under ctx carry it.
// The gather functions give each rollout a fresh id; use WithTrajectoryID
// for rollouts run without them.
func WithTrajectoryID(ctx context.Context, id string) context.Context {
	return tracing.WithTrajectoryID(ctx, id)
}

// TrajectoryID returns the trajectory id ctx carries, or "". Inside a
// rollout run by a gather function it names the rollout.
func TrajectoryID(ctx context.Context) string { return tracing.TrajectoryIDFrom(ctx) }

// chatMiddleware wraps each request of an OpenAIClient client in an
// "art.chat" client span and sends the span's trace context and the
// trajectory id with it.
func chatMiddleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	ctx, span := tracing.Start(req.Context(), "art.chat",
		attribute.String("http.request.method", req.Method), attribute.String("url.full", req.URL.Redacted()))
	req = req.WithContext(ctx)
	tracing.Inject(ctx, req.Header)
	resp, err := next(req)
	if err == nil {
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	}
	tracing.End(span, err)
	return resp, err
}

// startSpan starts one of the SDK's spans; its caller ends it with
// tracing.End.
func startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracing.Start(ctx, name, attrs...)
}

// startRollout starts the span of one gather task: "art.rollout" with a
// fresh trajectory id in the context, or "art.group" for a Run function
// (which makes a whole group).
func startRollout(ctx context.Context, tk task) (context.Context, trace.Span) {
	if tk.index < 0 {
		return startSpan(ctx, "art.group", tracing.Group.Int(tk.group))
	}
	ctx = tracing.WithTrajectoryID(ctx, tracing.NewTrajectoryID())
	return startSpan(ctx, "art.rollout", tracing.Group.Int(tk.group), tracing.Rollout.Int(tk.index))
}

// gatherTime is when a group's gather ran: Log turns it into
// time/step_actor_s (split "train") or time/step_eval_s (other splits).
type gatherTime struct{ start, end time.Time }

// stampGathered records on each group the interval of the gather that
// produced it.
func stampGathered(groups []TrajectoryGroup, start, end time.Time) {
	for i := range groups {
		groups[i].gathered = gatherTime{start, end}
	}
}

// gatherSeconds returns the wall time from the earliest gather start to
// the latest gather end among groups, and false when no group was stamped
// by a gather.
func gatherSeconds(groups []TrajectoryGroup) (float64, bool) {
	var first, last time.Time
	for _, g := range groups {
		if g.gathered.start.IsZero() {
			continue
		}
		if first.IsZero() || g.gathered.start.Before(first) {
			first = g.gathered.start
		}
		if g.gathered.end.After(last) {
			last = g.gathered.end
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return last.Sub(first).Seconds(), true
}
