package art

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// rolloutKey is the context key of a gathered rollout's identity.
type rolloutKey struct{}

// rolloutID identifies one rollout of a gather: the run's seed, its group
// and its index in the group. calls counts the requests it has seeded.
type rolloutID struct {
	seed, group, index int64
	calls              atomic.Int64
}

// withRollout returns ctx carrying the identity of rollout index of group.
func withRollout(ctx context.Context, seed int64, group, index int) context.Context {
	return context.WithValue(ctx, rolloutKey{}, &rolloutID{seed: seed, group: int64(group), index: int64(index)})
}

// RolloutSeed returns a seed for the randomness of the rollout running in
// ctx (an environment's opponent, a shuffled scenario): a function of
// GatherOptions.Seed, the rollout's group and its index in the group, the
// same in every run of the same program. The model step is not part of it:
// mix it in if the environment should differ from step to step. ok is
// false outside a gathered rollout.
func RolloutSeed(ctx context.Context) (seed int64, ok bool) {
	id, ok := ctx.Value(rolloutKey{}).(*rolloutID)
	if !ok {
		return 0, false
	}
	return positive(mix(uint64(id.seed), uint64(id.group), uint64(id.index))), true
}

// requestSeed returns the seed of the next chat request the rollout in ctx
// makes to model: a function of the run's seed, model (its id names the
// step, "agent@3"), the rollout's group and index, and how many requests
// the rollout has made before. ok is false outside a gathered rollout.
func requestSeed(ctx context.Context, model string) (seed int64, ok bool) {
	id, ok := ctx.Value(rolloutKey{}).(*rolloutID)
	if !ok {
		return 0, false
	}
	call := id.calls.Add(1) - 1
	return positive(mix(uint64(id.seed), fnv64(model), uint64(id.group), uint64(id.index), uint64(call))), true
}

// mix hashes its arguments with SplitMix64's finaliser, in order.
func mix(vs ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, v := range vs {
		h ^= v
		h += 0x9e3779b97f4a7c15
		h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
		h = (h ^ h>>27) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// fnv64 is the FNV-1a hash of s.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// positive keeps a seed in [0, 2^63): some servers refuse negative seeds.
func positive(h uint64) int64 { return int64(h >> 1) }

// seedable reports whether a request is a chat completion, whose body
// takes a "seed" at every OpenAI-compatible server. (OpenAI's responses
// API refuses one, so those requests are sent as they are.)
func seedable(req *http.Request) bool {
	return req.Method == http.MethodPost && req.Body != nil && strings.HasSuffix(req.URL.Path, "/chat/completions")
}

// seedBody returns body with "seed" set to the rollout's request seed (see
// requestSeed) when the rollout in ctx made it and it has no seed of its
// own; otherwise body unchanged. The seed is added at the end of the JSON
// object, so the rest of the body keeps its bytes.
func seedBody(ctx context.Context, body []byte) []byte {
	var head struct {
		Model string          `json:"model"`
		Seed  json.RawMessage `json:"seed"`
	}
	if json.Unmarshal(body, &head) != nil || (len(head.Seed) > 0 && !bytes.Equal(head.Seed, []byte("null"))) {
		return body // not a JSON object, or the caller's own seed wins
	}
	seed, ok := requestSeed(ctx, head.Model)
	if !ok {
		return body
	}
	trimmed := bytes.TrimRight(body, " \t\r\n")
	if !bytes.HasSuffix(trimmed, []byte("}")) {
		return body
	}
	open := bytes.TrimSpace(trimmed[:len(trimmed)-1])
	sep := ","
	if bytes.Equal(open, []byte("{")) {
		sep = ""
	}
	if len(head.Seed) > 0 { // "seed": null: drop it by decoding and re-encoding
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			return body
		}
		obj["seed"] = json.RawMessage(fmt.Sprint(seed))
		out, err := json.Marshal(obj)
		if err != nil {
			return body
		}
		return out
	}
	return fmt.Appendf(append(open[:len(open):len(open)], sep...), `"seed":%d}`, seed)
}

// withBody reads req's body and returns a copy of req that sends edit's
// version of it and can be replayed (GetBody), with the bytes it sends.
// The seeding transport and the Recorder build their requests with it.
func withBody(req *http.Request, edit func([]byte) []byte) (*http.Request, []byte, error) {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("read request body: %w", err)
	}
	if edit != nil {
		body = edit(body)
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	return out, body, nil
}

// seedingTransport fills in the seed of the chat requests a gathered
// rollout makes without one (see GatherOptions.Seed).
type seedingTransport struct{ next http.RoundTripper }

func (t seedingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !seedable(req) || req.Context().Value(rolloutKey{}) == nil {
		return t.next.RoundTrip(req)
	}
	out, _, err := withBody(req, func(b []byte) []byte { return seedBody(req.Context(), b) })
	if err != nil {
		return nil, fmt.Errorf("art: seed request: %w", err)
	}
	return t.next.RoundTrip(out)
}
