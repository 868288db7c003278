package serverless

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRequestBytes bounds a chat request read by the proxy.
const maxRequestBytes = 64 << 20

// proxy serves one model on loopback: it accepts "name@step" and "name",
// forwards to the service under the wandb-artifact name and maps the
// answer's model back, so code written for the other backends runs as is.
type proxy struct {
	url, key string
	upstream string // the service's base URL, ending in /v1
	apiKey   string // the W&B key, sent upstream only
	hc       *http.Client
	timeout  time.Duration
	name     string // the model's name
	artifact string // its wandb-artifact name without ":stepN"
	srv      *http.Server
}

func startProxy(upstream, apiKey string, hc *http.Client, timeout time.Duration, name, artifact string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start the inference proxy: %w", err)
	}
	var k [16]byte
	rand.Read(k[:])
	p := &proxy{url: "http://" + ln.Addr().String(), key: "art-serverless-" + hex.EncodeToString(k[:]),
		upstream: upstream, apiKey: apiKey, hc: hc, timeout: timeout, name: name, artifact: artifact}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln) //nolint:errcheck // Serve returns ErrServerClosed on close
	return p, nil
}

// closeGrace is how long close lets requests in flight finish.
const closeGrace = 5 * time.Second

// close stops the proxy, letting requests in flight finish for closeGrace,
// then cutting them: a stream the service keeps open would otherwise hold
// its connection and goroutines for the proxy's whole request bound.
func (p *proxy) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		p.srv.Close()
		return fmt.Errorf("stop the inference proxy: requests still in flight after %s were cut off: %w", closeGrace, err)
	}
	return nil
}

// toService maps a model id of ours to the service's name; other ids pass
// unchanged.
func (p *proxy) toService(model string) string {
	if model == p.name {
		return p.artifact
	}
	if rest, ok := strings.CutPrefix(model, p.name+"@"); ok {
		if n, err := strconv.Atoi(rest); err == nil && n >= 0 {
			return p.artifact + ":step" + rest
		}
	}
	return model
}

// fromService maps the service's name back to ours.
func (p *proxy) fromService(model string) string {
	if model == p.artifact {
		return p.name
	}
	if rest, ok := strings.CutPrefix(model, p.artifact+":step"); ok {
		if _, err := strconv.Atoi(rest); err == nil {
			return p.name + "@" + rest
		}
	}
	return model
}

func proxyError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "serverless_proxy_error"}}) //nolint:errcheck
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+p.key {
		proxyError(w, http.StatusUnauthorized, "serverless proxy: wrong or missing API key; use the key of the model's endpoint")
		return
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok {
		proxyError(w, http.StatusNotFound, "serverless proxy: only /v1/ is served")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil || len(body) > maxRequestBytes {
		proxyError(w, http.StatusBadRequest, "serverless proxy: cannot read the request body (at most 64 MiB)")
		return
	}
	if len(body) > 0 {
		var req map[string]json.RawMessage
		if json.Unmarshal(body, &req) == nil {
			var model string
			if json.Unmarshal(req["model"], &model) == nil && model != "" {
				req["model"], _ = json.Marshal(p.toService(model))
			}
			if _, set := req["logprobs"]; !set && path == "chat/completions" {
				req["logprobs"] = json.RawMessage("true") // every choice must be trainable
			}
			body, _ = json.Marshal(req)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	defer cancel()
	up, err := http.NewRequestWithContext(ctx, r.Method, p.upstream+"/"+path, bytes.NewReader(body))
	if err != nil {
		proxyError(w, http.StatusBadRequest, "serverless proxy: "+err.Error())
		return
	}
	up.URL.RawQuery = r.URL.RawQuery
	up.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	up.Header.Set("Accept", r.Header.Get("Accept"))
	up.Header.Set("Authorization", "Bearer "+p.apiKey)
	resp, err := p.hc.Do(up)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusGatewayTimeout
		}
		proxyError(w, status, fmt.Sprintf("serverless proxy: %s %s: %v", r.Method, path, err))
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		// Streams pass through as they come (their chunks keep the
		// service's model name).
		w.WriteHeader(resp.StatusCode)
		flushCopy(w, resp.Body)
		return
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		proxyError(w, http.StatusBadGateway, "serverless proxy: read the service's answer: "+err.Error())
		return
	}
	var ans map[string]json.RawMessage
	if json.Unmarshal(data, &ans) == nil {
		var model string
		if json.Unmarshal(ans["model"], &model) == nil && model != "" {
			ans["model"], _ = json.Marshal(p.fromService(model))
			data, _ = json.Marshal(ans)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(data) //nolint:errcheck // the client went away
}

// flushCopy copies a stream, flushing after each read so events arrive
// as the service sends them.
func flushCopy(w http.ResponseWriter, r io.Reader) {
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
