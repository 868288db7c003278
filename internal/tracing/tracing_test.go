package tracing

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

func TestExtractRejectsBadIDs(t *testing.T) {
	for id, ok := range map[string]bool{"abc-123": true, "a b": false, "x\n": false, strings.Repeat("a", 129): false, "": false} {
		h := http.Header{}
		h.Set(TrajectoryHeader, id)
		if got := TrajectoryIDFrom(Extract(context.Background(), h)); (got == id && id != "") != ok {
			t.Errorf("header %q: extracted %q; accepted should be %v", id, got, ok)
		}
	}
}

type recordTransport struct{ req *http.Request }

func (r *recordTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.req = req
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}

// Ensure Transport adds the trajectory id to a copy of the request, never
// to the caller's, and adds nothing when the context has nothing to send.
func TestTransport(t *testing.T) {
	rec := &recordTransport{}
	rt := Transport(rec)
	req, _ := http.NewRequestWithContext(WithTrajectoryID(context.Background(), "t1"), "GET", "http://x/", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if rec.req.Header.Get(TrajectoryHeader) != "t1" || req.Header.Get(TrajectoryHeader) != "" {
		t.Errorf("sent %q, caller's request has %q", rec.req.Header.Get(TrajectoryHeader), req.Header.Get(TrajectoryHeader))
	}
	plain, _ := http.NewRequest("GET", "http://x/", nil)
	rt.RoundTrip(plain)
	if rec.req != plain || len(plain.Header) != 0 {
		t.Errorf("a request without trace context or trajectory id was changed: %v", rec.req.Header)
	}
}
