package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/artgo/art/store"
)

// heartbeat is how often an idle event stream writes a comment, so that a
// client gone away is noticed and proxies keep the stream open.
const heartbeat = 15 * time.Second

// handleEvents streams server-sent events: "change" with the ids of the
// runs whose files changed (a new history line, checkpoint or trajectory
// file; a run appearing or disappearing), found by polling the store. The
// stream ends after Config.StreamLifetime, on Close, or when the client
// leaves; the browser reconnects by itself.
func (d *Dashboard) handleEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "event streams are not supported by this server")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	fmt.Fprint(w, "retry: 2000\n\n")
	flusher.Flush()

	last := d.fingerprints()
	poll := time.NewTicker(d.cfg.PollInterval)
	defer poll.Stop()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	lifetime := time.NewTimer(d.cfg.StreamLifetime)
	defer lifetime.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-d.done:
			return
		case <-lifetime.C:
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-poll.C:
			now := d.fingerprints()
			var changed []string
			for id, fp := range now {
				if last[id] != fp {
					changed = append(changed, id)
				}
			}
			for id := range last {
				if _, ok := now[id]; !ok {
					changed = append(changed, id)
				}
			}
			last = now
			if len(changed) == 0 {
				continue
			}
			slices.Sort(changed)
			data, _ := json.Marshal(map[string]any{"changed": changed})
			if _, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", data); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// fingerprints describes the state of every run's files cheaply (sizes and
// modification times, no reading): two equal fingerprints mean nothing the
// page shows has changed.
func (d *Dashboard) fingerprints() map[string]string {
	runs, err := d.findRuns()
	if err != nil {
		return map[string]string{}
	}
	out := make(map[string]string, len(runs))
	for _, r := range runs {
		p := r.Dir.Path()
		fp := stamp(filepath.Join(p, store.HistoryFile)) + stamp(filepath.Join(p, store.CheckpointsDir)) +
			stamp(filepath.Join(p, store.ModelFile))
		splits, _ := os.ReadDir(filepath.Join(p, store.TrajectoriesDir))
		for _, s := range splits {
			fp += s.Name() + stamp(filepath.Join(p, store.TrajectoriesDir, s.Name()))
		}
		out[r.ID()] = fp
	}
	return out
}

// stamp is a file's size and modification time ("-" when it is missing).
// A directory's modification time changes when an entry is added, removed
// or renamed into it, as a checkpoint or an atomic file write does.
func stamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "-;"
	}
	return fmt.Sprintf("%d@%d;", st.Size(), st.ModTime().UnixNano())
}
