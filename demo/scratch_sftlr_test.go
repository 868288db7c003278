package demo

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestScratchSFTLR(t *testing.T) {
	if os.Getenv("SCRATCHLR") == "" {
		t.Skip()
	}
	for seed := uint64(1); seed <= 4; seed++ {
		dir := filepath.Join(t.TempDir(), "b")
		start, cpu0 := time.Now(), cpuTime()
		opt := BaseOptions{Seed: seed, LR: envF("SFTLR", 3e-3), BatchSize: int(envF("BATCH", 32))}
		if err := BuildBase(context.Background(), dir, opt); err != nil {
			t.Fatal(err)
		}
		info, _ := readBaseInfo(dir, opt)
		t.Logf("seed %d lr %g: %d steps reward %.3f invalid %.3f [%.0fs wall %.0fs cpu]", seed, opt.LR, info.Steps, info.Reward, info.Invalid, time.Since(start).Seconds(), (cpuTime() - cpu0).Seconds())
	}
}
