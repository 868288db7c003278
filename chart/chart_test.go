package chart

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ensure the series keep the last value per step, in step order, and skip
// rows without a step or a reward.
func TestFromHistory(t *testing.T) {
	rows := []map[string]any{
		{"step": 2.0, "train/reward": 0.5},
		{"step": 1.0, "train/reward": 0.25},
		{"step": 0.0, "val/reward": 0.1},
		{"train/reward": 0.9}, // no step
		{"step": 2.0, "train/reward": 0.75},
		{"step": 3.0, "val/reward": 0.8, "train/loss": 1.0},
	}
	s := FromHistory(rows)
	if len(s.Train) != 2 || s.Train[0].X != 1 || s.Train[0].Y != 0.25 || s.Train[1].X != 2 || s.Train[1].Y != 0.75 {
		t.Errorf("train %v", s.Train)
	}
	if len(s.Val) != 2 || s.Val[0].Y != 0.1 || s.Val[1].X != 3 || s.Val[1].Y != 0.8 {
		t.Errorf("val %v", s.Val)
	}
}

func TestMovingAverage(t *testing.T) {
	s := FromHistory([]map[string]any{{"step": 1.0, "train/reward": 1.0}, {"step": 2.0, "train/reward": 3.0}, {"step": 3.0, "train/reward": 5.0}})
	got := movingAverage(s.Train, 2)
	want := []float64{1, 2, 4}
	for i, p := range got {
		if p.Y != want[i] {
			t.Fatalf("moving average %v, want %v", got, want)
		}
	}
}

// Ensure WriteFile writes a decodable 800×480 PNG and refuses an empty
// history without leaving a file behind.
func TestWriteFile(t *testing.T) {
	var rows []map[string]any
	for i := range 40 {
		rows = append(rows, map[string]any{"step": float64(i + 1), "train/reward": float64(i) / 40})
	}
	rows = append(rows, map[string]any{"step": 0.0, "val/reward": 0.2}, map[string]any{"step": 40.0, "val/reward": 0.9})
	path := filepath.Join(t.TempDir(), "reward.png")
	if err := WriteFile(path, FromHistory(rows), "test"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 800 || b.Dy() != 480 {
		t.Errorf("image is %v, want 800×480", b)
	}
	empty := filepath.Join(t.TempDir(), "empty.png")
	err = WriteFile(empty, FromHistory([]map[string]any{{"step": 1.0}}), "x")
	if err == nil || !strings.Contains(err.Error(), "no train/reward") {
		t.Errorf("empty history: err %v", err)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("a failed write left %s behind", empty)
	}
}
