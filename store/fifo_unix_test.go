//go:build unix

package store

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Ensure a named pipe in place of a model's files is an error at once, not
// a read that blocks forever (every dashboard request listing runs would).
func TestRead_NamedPipeRefused(t *testing.T) {
	d := newDir(t)
	if err := d.AppendTrajectories("val", 0, []TrajectoryRow{{Reward: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ModelFile, StateFile, HistoryFile, filepath.Join(TrajectoriesDir, "val", "0000.parquet")} {
		p := filepath.Join(d.Path(), name)
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan []error, 1)
	go func() {
		var errs []error
		var v map[string]any
		errs = append(errs, d.ReadModel(&v))
		_, err := d.ReadState()
		errs = append(errs, err)
		_, err = d.ReadHistory()
		errs = append(errs, err)
		_, err = d.ReadTrajectories("val", 0)
		errs = append(errs, err)
		done <- errs
	}()
	select {
	case errs := <-done:
		for i, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("read %d of a named pipe = %v; want an error saying it is not a regular file", i, err)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a named pipe blocked")
	}
}
