package local_test

import (
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
)

func TestConformance(t *testing.T) {
	arttest.RunBackendTests(t, func(t *testing.T, env arttest.Env) art.Backend {
		return local.New(local.Options{Seed: 1, Quiet: true})
	})
}
