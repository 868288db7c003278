package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/artgo/art/store"
)

// runRow is one model of the runs list.
type runRow struct {
	ID          string    `json:"id"` // PROJECT/NAME
	Project     string    `json:"project"`
	Name        string    `json:"name"`
	Step        int       `json:"step"` // latest checkpoint step, -1 when none
	TrainReward *float64  `json:"train_reward,omitempty"`
	ValReward   *float64  `json:"val_reward,omitempty"`
	Updated     time.Time `json:"updated,omitzero"`
	Warning     string    `json:"warning,omitempty"`
}

// errAnswer is an error with the HTTP status the API answers it with.
type errAnswer struct {
	status int
	msg    string
}

func (e *errAnswer) Error() string { return e.msg }

func answer(w http.ResponseWriter, err error) {
	var a *errAnswer
	if errors.As(err, &a) {
		writeError(w, a.status, a.msg)
		return
	}
	// Reading the store failed in a way the user can act on (a damaged or
	// unreadable file): say which, as a client-visible message.
	writeError(w, http.StatusUnprocessableEntity, err.Error())
}

// findRuns lists the runs under the data folder, with a clear message when
// the folder itself is missing.
func (d *Dashboard) findRuns() ([]store.Run, error) {
	if _, err := os.Stat(d.cfg.Root); err != nil {
		return nil, &errAnswer{http.StatusNotFound, fmt.Sprintf("data folder %s: %v (start training, or point --data at the folder holding <project>/models/<name>)", d.cfg.Root, errors.Unwrap(err))}
	}
	return store.Find(d.cfg.Root)
}

// findRun returns the run named PROJECT/NAME.
func (d *Dashboard) findRun(id string) (store.Run, error) {
	runs, err := d.findRuns()
	if err != nil {
		return store.Run{}, err
	}
	var ids []string
	for _, r := range runs {
		if r.ID() == id {
			return r, nil
		}
		ids = append(ids, r.ID())
	}
	known := "none"
	if len(ids) > 0 {
		known = strings.Join(ids, ", ")
	}
	if id == "" {
		return store.Run{}, &errAnswer{http.StatusBadRequest, "no model named: give ?run=PROJECT/NAME (models: " + known + ")"}
	}
	return store.Run{}, &errAnswer{http.StatusNotFound, fmt.Sprintf("no model %q under %s (models: %s)", id, d.cfg.Root, known)}
}

func (d *Dashboard) handleRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := d.findRuns()
	if err != nil {
		answer(w, err)
		return
	}
	rows := make([]runRow, len(runs))
	for i, run := range runs {
		data := run.ReadRun()
		row := runRow{ID: run.ID(), Project: run.Project, Name: run.Name, Step: -1, Updated: data.Updated, Warning: data.Warning}
		if n := len(data.Checkpoints); n > 0 {
			row.Step = data.Checkpoints[n-1]
		}
		for _, h := range data.History {
			if v, ok := h["train/reward"].(float64); ok {
				row.TrainReward = &v
			}
			if v, ok := h["val/reward"].(float64); ok {
				row.ValReward = &v
			}
		}
		rows[i] = row
	}
	writeJSON(w, r, map[string]any{"root": d.cfg.Root, "runs": rows})
}

// checkpointRow is one checkpoint with the rewards logged at its step.
type checkpointRow struct {
	Step        int      `json:"step"`
	ValReward   *float64 `json:"val_reward,omitempty"`
	TrainReward *float64 `json:"train_reward,omitempty"`
	Best        bool     `json:"best,omitempty"` // the highest val/reward among checkpoints
}

// runDetail is everything the page shows of one model but its trajectories.
type runDetail struct {
	runRow
	Model json.RawMessage `json:"model,omitempty"` // model.json as written
	// Metrics maps each numeric history key to its points, [step, value],
	// in file order.
	Metrics      map[string][][2]float64 `json:"metrics"`
	Checkpoints  []checkpointRow         `json:"checkpoints"`
	Trajectories map[string][]int        `json:"trajectories"` // split → steps with a parquet file
	Warnings     []string                `json:"warnings,omitempty"`
}

func (d *Dashboard) handleRun(w http.ResponseWriter, r *http.Request) {
	run, err := d.findRun(r.URL.Query().Get("run"))
	if err != nil {
		answer(w, err)
		return
	}
	data := run.ReadRun()
	out := runDetail{
		runRow:  runRow{ID: run.ID(), Project: run.Project, Name: run.Name, Step: -1, Updated: data.Updated},
		Metrics: map[string][][2]float64{},
	}
	if data.Warning != "" {
		out.Warnings = append(out.Warnings, data.Warning)
	}
	var model json.RawMessage
	if err := run.Dir.ReadModel(&model); err == nil {
		out.Model = model
	} else if !errors.Is(err, os.ErrNotExist) {
		out.Warnings = append(out.Warnings, err.Error())
	}
	// The rewards logged at each step, for the checkpoint table.
	atStep := map[int][2]*float64{}
	for _, h := range data.History {
		s, ok := h["step"].(float64)
		if !ok {
			continue
		}
		for k, v := range h {
			if f, ok := v.(float64); ok && k != "step" && !math.IsNaN(f) {
				out.Metrics[k] = append(out.Metrics[k], [2]float64{s, f})
			}
		}
		rw := atStep[int(s)]
		if v, ok := h["val/reward"].(float64); ok {
			rw[0] = &v
		}
		if v, ok := h["train/reward"].(float64); ok {
			rw[1] = &v
		}
		atStep[int(s)] = rw
	}
	best := -1
	for _, step := range data.Checkpoints {
		rw := atStep[step]
		out.Checkpoints = append(out.Checkpoints, checkpointRow{Step: step, ValReward: rw[0], TrainReward: rw[1]})
		if i := len(out.Checkpoints) - 1; rw[0] != nil && (best < 0 || *rw[0] >= *out.Checkpoints[best].ValReward) {
			best = i
		}
	}
	if best >= 0 {
		out.Checkpoints[best].Best = true
	}
	if n := len(data.Checkpoints); n > 0 {
		out.Step = data.Checkpoints[n-1]
	}
	if out.Trajectories, err = run.Dir.ListTrajectories(); err != nil {
		out.Warnings = append(out.Warnings, err.Error())
	}
	slices.Reverse(out.Checkpoints) // newest first
	writeJSON(w, r, out)
}
