package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/server"
)

// Ensure `art autorl` trains end to end and prints the before → after
// table, with a generator and judge served by our own server (a random
// tiny model under grammar-constrained decoding), and that missing flags
// are a clear error.
func TestAutoRLCmd(t *testing.T) {
	if code, _, errOut := runArgs(t, "autorl", "task"); code == 0 || !strings.Contains(errOut, "--base-model and --judge are required") {
		t.Fatalf("no flags: code %d, %q", code, errOut)
	}
	base := arttest.TinyModel(t)
	b := local.New(local.Options{Path: t.TempDir(), Quiet: true})
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	jm := &art.TrainableModel{Model: art.Model{Name: "judge", Project: "cli"}, BaseModel: base}
	if err := jm.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	ep, err := b.InferenceEndpoint(ctx, jm, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AUTORL_TEST_KEY", ep.APIKey)
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the judge's answer cache
	code, out, errOut := runArgs(t, "autorl", "Greet the user", "--base-model", base, "--path", filepath.Join(t.TempDir(), "art"),
		"--judge", ep.Model, "--judge-base-url", ep.BaseURL, "--judge-api-key-env", "AUTORL_TEST_KEY", "--judge-max-tokens", "300",
		"--train-inputs", "1", "--test-inputs", "1", "--groups-per-step", "1", "--group-size", "2", "--epochs", "1",
		"--max-tokens", "8", "--max-input-length", "16", "--max-explanation", "8", "--quiet")
	if code != 0 || !strings.Contains(out, "step 0 → step 1") || !strings.Contains(out, "mean") {
		t.Fatalf("code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// Ensure `art autorl` rejects numbers out of range with an error naming the
// flag, before the model loads (the base model here does not exist, so a
// check that came after loading would report that instead); values the
// library reads as "the default" (0, negatives) used to run as the default.
func TestAutoRLCmd_BadNumbers(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--group-size", "0"}, "autorl: --group-size must be >= 2 (the judge scores an input's answers against each other), got 0"},
		{[]string{"--group-size", "1"}, "autorl: --group-size must be >= 2"},
		{[]string{"--epochs", "-1"}, "autorl: --epochs must be >= 1, got -1"},
		{[]string{"--epochs", "0"}, "autorl: --epochs must be >= 1, got 0"},
		{[]string{"--learning-rate", "-1"}, "autorl: --learning-rate must be > 0, got -1"},
		{[]string{"--learning-rate", "0"}, "autorl: --learning-rate must be > 0, got 0"},
		{[]string{"--learning-rate", "NaN"}, "autorl: --learning-rate must be > 0, got NaN"},
		{[]string{"--train-inputs", "0"}, "autorl: --train-inputs must be >= 1, got 0"},
		{[]string{"--test-inputs", "-2"}, "autorl: --test-inputs must be >= 1, got -2"},
		{[]string{"--groups-per-step", "0"}, "autorl: --groups-per-step must be >= 1, got 0"},
		{[]string{"--max-tokens", "0"}, "autorl: --max-tokens must be >= 1, got 0"},
		{[]string{"--judge-max-tokens", "-1"}, "autorl: --judge-max-tokens must be >= 0, got -1"},
		{[]string{"--max-input-length", "-1"}, "autorl: --max-input-length must be >= 0, got -1"},
		{[]string{"--max-explanation", "-1"}, "autorl: --max-explanation must be >= 0, got -1"},
		{[]string{"--timeout", "0s"}, "autorl: --timeout must be > 0, got 0s"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "art")
			args := append([]string{"autorl", "Greet the user", "--base-model", filepath.Join(t.TempDir(), "nope"), "--path", path,
				"--judge", "judge@0", "--judge-base-url", "http://127.0.0.1:1/v1", "--quiet"}, tt.args...)
			code, errOut, took := runCanceled(t, args...)
			if code != 1 || !strings.HasPrefix(errOut, "art: "+tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut, "art: "+tt.want)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("%s was created (%v)", path, err)
			}
			if took > 5*time.Second {
				t.Fatalf("took %v", took)
			}
		})
	}
	code, _, errOut := runArgs(t, "autorl", " ", "--base-model", "x", "--judge", "judge@0", "--judge-base-url", "http://127.0.0.1:1/v1")
	if code != 1 || !strings.Contains(errOut, "autorl: the task description is empty") {
		t.Fatalf("empty task: exit %d, stderr %q", code, errOut)
	}
}

// Ensure a base model that does not load is reported as "art: autorl:
// register model …", not "art: art: register model …".
func TestAutoRLCmd_MissingBaseModel(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	code, _, errOut := runArgs(t, "autorl", "Greet the user", "--base-model", missing, "--path", filepath.Join(t.TempDir(), "art"),
		"--judge", "judge@0", "--judge-base-url", "http://127.0.0.1:1/v1", "--quiet")
	if code != 1 || !strings.HasPrefix(errOut, `art: autorl: register model "autorl": `) || strings.Contains(errOut, "art: art:") ||
		!strings.Contains(errOut, missing) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// Ensure the help of the commands that point at an "art serve" judge gives
// the address art serve listens on by default.
func TestHelp_ServeAddr(t *testing.T) {
	addr := regexp.MustCompile(`https?://(127\.0\.0\.1|localhost):\d+`)
	for _, c := range []struct {
		name, help string
	}{
		{"ruler", newRulerCmd().Long + newRulerCmd().Example},
		{"autorl", newAutoRLCmd().Long + newAutoRLCmd().Example},
	} {
		found := addr.FindAllString(c.help, -1)
		if len(found) == 0 {
			t.Errorf("%s: the help names no local address", c.name)
		}
		for _, a := range found {
			if a != "http://"+server.DefaultAddr {
				t.Errorf("%s: the help says %s; art serve listens on %s", c.name, a, server.DefaultAddr)
			}
		}
	}
}
