package demo

import (
	"context"
	"os"
	"strconv"
	"testing"
)

func TestFullDemo(t *testing.T) {
	if os.Getenv("ART_FULL_DEMO") == "" {
		t.Skip("set ART_FULL_DEMO=1")
	}
	opt := DefaultOptions()
	opt.Path = "/tmp/demo-art"
	if v := os.Getenv("RL_STEPS"); v != "" {
		opt.RLSteps, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("LR"); v != "" {
		opt.LearningRate, _ = strconv.ParseFloat(v, 64)
	}
	opt.Quiet = true
	rep, err := Run(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
}
