package ruler

import (
	"context"
	"strings"
	"testing"

	"github.com/artgo/art/internal/otlptest"
	"github.com/artgo/art/internal/tracing"
)

// TestJudgeSpans checks RULER's spans, exported over OTLP/HTTP to a
// loopback receiver: one ruler.score per group under the caller's span,
// one ruler.judge per call (a malformed answer and its retry) with tokens
// and, for a priced model, the cost; and the trace context on the judge's
// requests.
func TestJudgeSpans(t *testing.T) {
	recv, flush := otlptest.Install(t)
	s := newStandIn(t, "not json", scores(0.9, 0.1, 0.5))
	o := opts(t)
	ctx, parent := tracing.Start(context.Background(), "test.gather")
	if _, err := ScoreGroup(ctx, group(1, 2, 3), s.judge("o4-mini"), o); err != nil {
		t.Fatal(err)
	}
	parent.End()
	flush()
	scoreSpans, judges := recv.Named("ruler.score"), recv.Named("ruler.judge")
	if len(scoreSpans) != 1 || len(judges) != 2 {
		t.Fatalf("want 1 ruler.score and 2 ruler.judge spans; got:\n%s", recv)
	}
	sc := scoreSpans[0]
	if sc.ParentSpanID != parent.SpanContext().SpanID().String() || sc.Attrs["ruler.trajectories"] != "3" || sc.Error {
		t.Errorf("ruler.score span %+v", sc)
	}
	for _, j := range judges {
		if j.ParentSpanID != sc.SpanID || j.Attrs["gen_ai.usage.input_tokens"] != "1000" || j.Attrs["ruler.cost_usd"] == "" {
			t.Errorf("ruler.judge span %+v: want a child of ruler.score with tokens and cost", j)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, h := range s.headers {
		if tp := h.Get("Traceparent"); !strings.Contains(tp, sc.TraceID) {
			t.Errorf("judge request %d: traceparent %q; want trace %s", i, tp, sc.TraceID)
		}
	}
}

// TestTakeCostKeys checks ART's cost keys: train, or eval for any other
// split, and none for a model without a price.
func TestTakeCostKeys(t *testing.T) {
	s := newStandIn(t, scores(0.9, 0.1, 0.5))
	for _, c := range []struct {
		model, split, key string
	}{
		{"o4-mini", "train", "costs/train/judge/ruler"},
		{"o4-mini", "val", "costs/eval/judge/ruler"},
		{"o4-mini", "test", "costs/eval/judge/ruler"},
		{"my-local-judge", "train", ""},
	} {
		st := &Stats{}
		o := opts(t)
		o.Stats = st
		if _, err := ScoreGroup(context.Background(), group(1, 2, 3), s.judge(c.model), o); err != nil {
			t.Fatal(err)
		}
		m := st.Take(c.split)
		var keys []string
		for k := range m {
			if strings.HasPrefix(k, "costs/") {
				keys = append(keys, k)
			}
		}
		if c.key == "" && len(keys) != 0 || c.key != "" && (len(keys) != 1 || keys[0] != c.key || m[c.key] <= 0) {
			t.Errorf("%s on %s: cost metrics %v; want %q", c.model, c.split, keys, c.key)
		}
	}
}
