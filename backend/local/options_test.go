package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
)

// Ensure negative options are an error at Register, before a model loads
// or a checkpoint is written, not a silent default (MaxConcurrent ran as
// 64) or no bound at all (RequestTimeout: no inference timeout).
func TestRegister_BadOptions(t *testing.T) {
	base := arttest.TinyModel(t)
	for _, c := range []struct {
		opt  local.Options
		want string
	}{
		{local.Options{RequestTimeout: -time.Second}, "RequestTimeout = -1s"},
		{local.Options{MaxConcurrent: -1}, "MaxConcurrent = -1"},
	} {
		c.opt.Path, c.opt.Quiet = filepath.Join(t.TempDir(), ".art"), true
		b := local.New(c.opt)
		m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p"}, BaseModel: base}
		err := m.Register(context.Background(), b)
		b.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Register with %+v: error %v; want one saying %q", c.opt, err, c.want)
		}
		if _, err := os.Stat(filepath.Join(c.opt.Path, "p", "models", "agent", "checkpoints")); !os.IsNotExist(err) {
			t.Errorf("Register with %+v left a checkpoints folder (err %v)", c.opt, err)
		}
	}
}
