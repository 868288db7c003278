package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ensure Find lists the model folders under a root (and under its .art),
// sorted, and skips what is not a run.
func TestFind(t *testing.T) {
	root := t.TempDir()
	for _, pm := range [][2]string{{"b", "x"}, {"a", "z"}, {"a", "y"}} {
		d, err := New(root, pm[0], pm[1])
		if err != nil {
			t.Fatal(err)
		}
		if err := d.AppendHistory(map[string]any{"step": 1.0}); err != nil {
			t.Fatal(err)
		}
	}
	// Not runs: an empty model folder, a folder without models/, a file.
	os.MkdirAll(filepath.Join(root, "c", "models", "empty"), 0o755)
	os.MkdirAll(filepath.Join(root, "d", "other"), 0o755)
	os.WriteFile(filepath.Join(root, "notes.txt"), nil, 0o644)
	runs, err := Find(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.Project+"/"+r.Name)
	}
	if want := "a/y a/z b/x"; strings.Join(got, " ") != want {
		t.Fatalf("Find = %v; want %s", got, want)
	}
	// A working directory holding .art.
	wd := t.TempDir()
	if err := os.Rename(root, filepath.Join(wd, DefaultBasePath)); err != nil {
		t.Fatal(err)
	}
	if runs, err := Find(wd); err != nil || len(runs) != 3 {
		t.Fatalf("Find(dir holding .art) = %d runs, %v", len(runs), err)
	}
	if _, err := Find(filepath.Join(wd, "missing")); err == nil {
		t.Fatal("Find of a missing folder succeeded")
	}
}
