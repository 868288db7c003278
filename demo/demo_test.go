package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// Ensure a short demo runs end to end through the SDK and leaves
// checkpoints, history and trajectory logs.
func TestRun_Smoke(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	rep, err := Run(context.Background(), Options{Path: dir, Base: BaseOptions{SFTSteps: 20}, RLSteps: 2, GroupsPerStep: 2, GroupSize: 4, EvalGames: 8, Out: &out, Quiet: true})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"checkpoints/0000", "checkpoints/0002", "history.jsonl", "trajectories/train/0001.parquet", "trajectories/train/0002.parquet", "trajectories/val/0000.parquet", "trajectories/val/0002.parquet"} {
		if _, err := os.Stat(filepath.Join(rep.ModelDir, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
}
