package store

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzHistory reads arbitrary history.jsonl contents, then appends a row:
// reading never panics, the append repairs a torn tail, and the new row
// is read back last with every earlier row kept.
func FuzzHistory(f *testing.F) {
	f.Add([]byte("{\"step\":1,\"train/reward\":0.5}\n{\"step\":2}\n"))
	f.Add([]byte("{\"step\":1}\n{\"step\":2,\"trai"))
	f.Add([]byte("not json\n\n[1,2]\nnull\n{\"a\":{\"b\":[1]}}\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := New(t.TempDir(), "p", "m")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(d.Path(), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.Path(), HistoryFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		before, _ := d.ReadHistory()
		row := map[string]any{"step": 7.0, "fuzz": "row"}
		if err := d.AppendHistory(row); err != nil {
			t.Fatal(err)
		}
		after, _ := d.ReadHistory()
		if len(after) != len(before)+1 {
			t.Fatalf("%d rows before the append, %d after", len(before), len(after))
		}
		if (len(before) > 0 && !reflect.DeepEqual(after[:len(before)], before)) || !reflect.DeepEqual(after[len(before)], row) {
			t.Fatalf("rows changed by the append: %v then %v", before, after)
		}
	})
}

// FuzzReadTrajectories reads arbitrary bytes as a trajectories parquet
// file: a damaged file is an error, never a panic or a crash out of memory.
// The seeds include the hostile files of TestReadTrajectories_HostileSizes.
func FuzzReadTrajectories(f *testing.F) {
	good := goodTrajectoriesFile(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("PAR1"))
	for _, h := range hostileTrajectoryFiles(f, good) {
		f.Add(h.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "t.parquet")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ReadTrajectoriesFile(path)
	})
}
