package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Ensure a failed fill leaves the old content and no temporary files behind.
func TestWrite_FailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, 0o644, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v; want wrapped boom", err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "old" {
		t.Fatalf("content %q; want old", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d entries left in dir; want 1", len(entries))
	}
}

// Ensure a successful write replaces content with the requested mode.
func TestWriteFile_Replaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	for _, s := range []string{"a", "bb"} {
		if err := WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if string(got) != s {
			t.Fatalf("got %q; want %q", got, s)
		}
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v; want 0600", st.Mode().Perm())
	}
}
