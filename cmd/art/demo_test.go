package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCanceled runs args with a context cancelled from the start: a command
// that checks its flags first returns their error; one that starts working
// instead stops at its first look at the context, quickly, with another
// error (or, for the demo, after writing a base model folder).
func runCanceled(t *testing.T, args ...string) (code int, stderr string, took time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	start := time.Now()
	code = run(ctx, args, &out, &errb)
	return code, errb.String(), time.Since(start)
}

// Ensure `art demo` rejects out-of-range numbers with an error naming the
// flag before it builds or removes anything (--eval-games -5 used to build
// the base model and then panic in make; --steps 0 silently ran 500).
func TestDemoCmd_BadNumbers(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--steps", "-1"}, "demo: --steps must be >= 1, got -1"},
		{[]string{"--steps", "0"}, "demo: --steps must be >= 1, got 0"},
		{[]string{"--eval-games", "-5"}, "demo: --eval-games must be >= 1, got -5"},
		{[]string{"--eval-games", "0"}, "demo: --eval-games must be >= 1, got 0"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "art")
			code, errOut, took := runCanceled(t, append([]string{"demo", "--quiet", "--path", path}, tt.args...)...)
			if code != 1 || errOut != "art: "+tt.want+"\n" {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut, "art: "+tt.want)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("%s was created (%v): the flag was checked after work started", path, err)
			}
			if took > 5*time.Second {
				t.Fatalf("took %v", took)
			}
		})
	}
}

// Ensure a missing --base-model is one clear line, "art: " printed once,
// and the previous run's folder is left alone; and that an error of the
// art package (a base model folder that does not load) is printed as
// "art: demo: register model …", not "art: art: register model …".
func TestDemoCmd_BadBaseModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "art")
	keep := filepath.Join(path, "demo", "models", "tictactoe", "history.jsonl")
	if err := os.MkdirAll(filepath.Dir(keep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	code, _, errOut := runArgs(t, "demo", "--quiet", "--path", path, "--base-model", missing)
	if code != 1 || !strings.HasPrefix(errOut, "art: demo: base model "+missing) || strings.Contains(errOut, "art: art:") ||
		strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the previous run's files went: %v", err)
	}

	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "config.json"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runArgs(t, "demo", "--quiet", "--path", path, "--base-model", broken)
	if code != 1 || !strings.HasPrefix(errOut, "art: demo: base model "+broken+": ") || !strings.Contains(errOut, "invalid JSON") ||
		strings.Contains(errOut, "art: art:") {
		t.Fatalf("exit %d, stderr %q; want one \"art: \" and the command's name", code, errOut)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a base model with a broken config.json cost the previous run's files: %v", err)
	}
}

// Ensure an interrupted `art demo` says so and leaves no half-built base
// model folder behind (<path>/demo/base-tictactoe.building stayed, with the
// random weights in it, until the next run).
func TestDemoCmd_InterruptedLeavesNoBuild(t *testing.T) {
	path := filepath.Join(t.TempDir(), "art")
	code, errOut, took := runCanceled(t, "demo", "--quiet", "--path", path)
	if code != 1 || !strings.Contains(errOut, "\nart: demo: interrupted: ") || !strings.Contains(errOut, "context canceled") {
		t.Fatalf("exit %d, stderr %q; want 1 and the interrupt", code, errOut)
	}
	if took > 30*time.Second {
		t.Fatalf("took %v", took)
	}
	left, _ := filepath.Glob(filepath.Join(path, "demo", "*"))
	if len(left) > 0 {
		t.Fatalf("the interrupted demo left %v", left)
	}
}
