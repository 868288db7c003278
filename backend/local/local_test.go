package local_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
)

func TestConformance(t *testing.T) {
	arttest.RunBackendTests(t, func(t *testing.T, env arttest.Env) art.Backend {
		return local.New(local.Options{Seed: 1, Quiet: true})
	}, arttest.SFT, arttest.DeleteCheckpoints, arttest.RestoreCheckpoint)
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

// Ensure a model whose LoRA config differs from its stored checkpoints is
// refused at Register, in a second process's backend as in the first.
func TestRegister_LoRAMismatch(t *testing.T) {
	base := arttest.TinyModel(t)
	data := filepath.Join(t.TempDir(), ".art")
	ctx := context.Background()
	first := local.New(local.Options{Path: data, Quiet: true})
	m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p"}, BaseModel: base}
	if err := m.Register(ctx, first); err != nil {
		t.Fatal(err)
	}
	first.Close()
	second := local.New(local.Options{Path: data, Quiet: true})
	defer second.Close()
	other := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p"}, BaseModel: base, LoRA: art.LoRAConfig{Rank: 4}}
	if err := other.Register(ctx, second); err == nil || !strings.Contains(err.Error(), "LoRA config") {
		t.Fatalf("register with rank 4 over a rank-8 adapter: %v; want a refusal naming the LoRA config", err)
	}
	same := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p"}, BaseModel: base, LoRA: art.LoRAConfig{Rank: 8, Alpha: 16}}
	if err := same.Register(ctx, second); err != nil {
		t.Fatalf("register with the adapter's own config: %v", err)
	}
}

// Ensure two runs of the same program with the same seed sample the same
// tokens, log the same history and save byte-equal checkpoints.
func TestReproducible(t *testing.T) {
	if raceDetector {
		t.Skip("two trainings take a minute under -race; the plain test run covers this (gather and the server race-test elsewhere)")
	}
	arttest.RunReproducibilityTest(t, func(t *testing.T, env arttest.Env) art.Backend {
		return local.New(local.Options{Seed: 1, Quiet: true, MaxConcurrent: 16})
	})
}

// Ensure a second model of the same name registered with a backend that
// already serves it is refused when its LoRA config differs from the
// served adapter's: Register was a no-op then, so the model trained an
// adapter other than the one it asked for, without a word.
func TestRegister_LoRAMismatchWhileServed(t *testing.T) {
	base := arttest.TinyModel(t)
	ctx := context.Background()
	b := local.New(local.Options{Path: filepath.Join(t.TempDir(), ".art"), Quiet: true})
	defer b.Close()
	m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p"}, BaseModel: base}
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	other := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p"}, BaseModel: base, LoRA: art.LoRAConfig{Rank: 4}}
	if err := other.Register(ctx, b); err == nil || !strings.Contains(err.Error(), "LoRA config") {
		t.Fatalf("register with rank 4 while the rank-8 adapter is served: %v; want a refusal naming the LoRA config", err)
	}
	same := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p"}, BaseModel: base, LoRA: art.LoRAConfig{Rank: 8}}
	if err := same.Register(ctx, b); err != nil {
		t.Fatalf("register again with the served adapter's own config: %v", err)
	}
}
