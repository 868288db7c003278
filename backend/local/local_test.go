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
	}, arttest.SFT, arttest.DeleteCheckpoints)
}

// minimal hides every optional capability of the backend it wraps.
type minimal struct{ art.Backend }

// Ensure the suite passes a backend with only the required methods, whose
// model methods for the missing capabilities fail with ErrUnsupported.
func TestConformanceMinimal(t *testing.T) {
	arttest.RunBackendTests(t, func(t *testing.T, env arttest.Env) art.Backend {
		return minimal{local.New(local.Options{Seed: 1, Quiet: true})}
	})
}
