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
