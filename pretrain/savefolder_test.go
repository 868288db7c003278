package pretrain

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/model"
)

// Ensure SaveFolder copies every extra of the source folder, the nested
// chat templates included, byte for byte, and leaves no temporary file or
// folder behind.
func TestSaveFolder_CopiesExtras(t *testing.T) {
	src := arttest.TinyModel(t)
	tmpl := filepath.Join(src, "additional_chat_templates", "tool_use.jinja")
	if err := os.MkdirAll(filepath.Dir(tmpl), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmpl, []byte("{{ messages }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "models", "saved")
	if err := SaveFolder(m, src, out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", filepath.Join("additional_chat_templates", "tool_use.jinja")} {
		want, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			continue // the tiny model may not have every file
		}
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v; want the source's %d", name, len(got), err, len(want))
		}
	}
	err = filepath.WalkDir(filepath.Dir(out), func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp") {
			t.Errorf("left behind: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(out); err != nil {
		t.Errorf("the saved folder does not load: %v", err)
	}
}

// Ensure a chat template that is a link (a Hugging Face cache's snapshot
// folder holds only links into its blobs) is copied as the file it points
// to, as the template loader reads it, not silently left out; and that an
// entry that is not a file is refused, naming it, rather than dropped.
func TestSaveFolder_FollowsLinkedTemplates(t *testing.T) {
	src := arttest.TinyModel(t)
	blob := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(blob, []byte("{{ messages }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(src, "additional_chat_templates")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(blob, filepath.Join(dir, "tool_use.jinja")); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	m, err := model.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "saved")
	if err := SaveFolder(m, src, out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "additional_chat_templates", "tool_use.jinja"))
	if err != nil || string(got) != "{{ messages }}" {
		t.Fatalf("the linked template was copied as %q, %v; want its target's bytes", got, err)
	}

	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "folder.jinja")); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(t.TempDir(), "saved")
	if err := SaveFolder(m, src, out2); err == nil || !strings.Contains(err.Error(), "folder.jinja") {
		t.Errorf("a template that is a link to a folder: %v; want an error naming it", err)
	}
	if _, err := os.Stat(out2); err == nil {
		t.Error("a refused save left its folder behind")
	}
}
