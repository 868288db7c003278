package remote

import "testing"

// Ensure only requests that may be sent twice are retried.
func TestIdempotent(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/v1/art/step?model=a", true},
		{"GET", "/v1/models/a@1", true},
		{"POST", "/v1/art/register", true},
		{"POST", "/v1/art/checkpoints/delete", true},
		{"POST", "/v1/art/log", true}, // with its call id
		{"POST", "/v1/art/train", false},
		{"POST", "/v1/art/train_sft", false},
	} {
		if got := idempotent(c.method, c.path); got != c.want {
			t.Errorf("idempotent(%s %s) = %v, want %v", c.method, c.path, got, c.want)
		}
	}
}
