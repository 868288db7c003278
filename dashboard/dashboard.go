// Package dashboard serves a web dashboard of the runs under a data folder:
// projects → models → steps, curves of every logged metric (several models
// overlaid), checkpoints with their val/reward, and a trajectory browser per
// step and split (messages, tool calls, rewards, RULER explanations, the
// logprob of every sampled token). It updates live while training runs,
// through server-sent events fed by polling the store.
//
// It reads the store only (history.jsonl, the trajectory parquet files,
// the checkpoint folders) and needs no engine: `art dashboard` serves it on
// its own and `art serve` mounts it at /dashboard/. The page's assets are
// embedded in the binary, so it works offline, with no CDN.
package dashboard

import (
	"compress/gzip"
	"embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

//go:embed assets
var assets embed.FS

// Defaults of Config.
const (
	DefaultBasePath     = "/dashboard/"
	DefaultPollInterval = time.Second
	// DefaultStreamLifetime bounds one event stream; the browser's
	// EventSource reconnects on its own after it ends.
	DefaultStreamLifetime = 10 * time.Minute
)

// Config configures a Dashboard.
type Config struct {
	// Root is the data folder holding <project>/models/<name> (a folder
	// holding .art works too); it may not exist yet.
	Root string
	// BasePath is the URL path the dashboard is served under, with a
	// trailing slash (DefaultBasePath when empty). Requests reach the
	// handler with the prefix still on their path.
	BasePath string
	// APIKey, if set, is required: as "Authorization: Bearer KEY", or once
	// as ?key=KEY, which sets a cookie (scoped to BasePath) holding an HMAC
	// of the key, so the key itself is neither stored nor kept in the URL.
	APIKey string
	// PollInterval is how often event streams look for changes in the
	// store (DefaultPollInterval when 0).
	PollInterval time.Duration
	// StreamLifetime bounds each event stream (DefaultStreamLifetime when 0).
	StreamLifetime time.Duration
	// Logger receives errors; nil means slog.Default().
	Logger *slog.Logger
}

// Dashboard is the dashboard's http.Handler. Create it with New; it is safe
// for concurrent use.
type Dashboard struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	cookie  string // the auth cookie's value: an HMAC of the API key
	cache   *fileCache
	done    chan struct{} // closed by Close: event streams end
	closeMu sync.Once
}

// New returns a Dashboard of the runs under cfg.Root.
func New(cfg Config) *Dashboard {
	if cfg.BasePath == "" {
		cfg.BasePath = DefaultBasePath
	}
	if !strings.HasSuffix(cfg.BasePath, "/") {
		cfg.BasePath += "/"
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.StreamLifetime <= 0 {
		cfg.StreamLifetime = DefaultStreamLifetime
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Dashboard{cfg: cfg, log: cfg.Logger, cache: newFileCache(4), done: make(chan struct{})}
	if cfg.APIKey != "" {
		d.cookie = cookieValue(cfg.APIKey)
	}
	b := cfg.BasePath
	d.mux = http.NewServeMux()
	d.mux.HandleFunc("GET "+b+"{$}", d.handleIndex)
	d.mux.Handle("GET "+b+"assets/", http.StripPrefix(strings.TrimSuffix(b, "/"), http.FileServerFS(assets)))
	d.mux.HandleFunc("GET "+b+"api/runs", d.handleRuns)
	d.mux.HandleFunc("GET "+b+"api/run", d.handleRun)
	d.mux.HandleFunc("GET "+b+"api/trajectories", d.handleTrajectories)
	d.mux.HandleFunc("GET "+b+"api/trajectory", d.handleTrajectory)
	d.mux.HandleFunc("GET "+b+"api/events", d.handleEvents)
	d.mux.HandleFunc(b, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no dashboard route for %s %s", r.Method, r.URL.Path))
	})
	return d
}

// ServeHTTP serves the page, its assets and its JSON API.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !d.authorized(w, r) {
		return
	}
	d.mux.ServeHTTP(w, r)
}

// Close ends the event streams (so a server's graceful shutdown need not
// wait for them); requests after it are still served, streams end at once.
func (d *Dashboard) Close() {
	d.closeMu.Do(func() { close(d.done) })
}

func (d *Dashboard) handleIndex(w http.ResponseWriter, r *http.Request) {
	page, err := assets.ReadFile("assets/index.html")
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(page)
}

// apiError is the body of every error answer: the page shows Error as is.
type apiError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(apiError{msg})
}

// writeJSON writes v, gzip-compressed when the client accepts it (a large
// run's curves are a few hundred kB of JSON). It encodes v before writing
// anything, so a value JSON cannot hold is a 500 saying so, not an empty
// 200.
func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot encode the answer: "+err.Error())
		return
	}
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Write(body)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Add("Vary", "Accept-Encoding")
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	zw.Write(body)
	zw.Close()
}
