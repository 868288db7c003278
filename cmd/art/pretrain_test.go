package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/model"
)

// writeEcho writes n transcripts "say <word>" → "<word>" as JSONL.
func writeEcho(t *testing.T, path string, n int) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		w := fmt.Sprintf("%s%d", []string{"red", "green", "blue", "gold"}[i%4], i%3)
		tr := art.Trajectory{}
		tr.AddMessage(art.UserMsg("say " + w))
		tr.AddMessage(art.AssistantMsg(w))
		line, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Ensure art pretrain trains the real tiny model (the held-out loss falls),
// prints its progress and writes a loadable model folder; bad input gives
// a one-line error and writes nothing.
func TestPretrain(t *testing.T) {
	src := arttest.TinyModel(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data.jsonl")
	writeEcho(t, data, 40)
	out := filepath.Join(dir, "base")
	code, stdout, stderr := runArgs(t, "pretrain", "--model", src, "--data", data, "--out", out, "--epochs", "5", "--batch", "8",
		"--hold-out", "8", "--eval-every", "10", "--log-every", "5")
	if code != 0 {
		t.Fatalf("pretrain: exit %d: %s", code, stderr)
	}
	var before, after float64
	if _, err := fmt.Sscanf(stdout[strings.Index(stdout, "held-out loss"):], "held-out loss %f → %f", &before, &after); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if !(after < before/2) {
		t.Fatalf("held-out loss %.3f → %.3f; want it halved", before, after)
	}
	if !strings.Contains(stderr, "step 20/20 (epoch 5)") || !strings.Contains(stderr, "held-out") {
		t.Errorf("stderr lacks the progress lines: %q", stderr)
	}
	if _, err := model.Load(out); err != nil {
		t.Fatalf("written folder does not load: %v", err)
	}

	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"messages_and_choices\": []}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"empty file", []string{"--model", src, "--data", empty}, "has no transcripts"},
		{"bad line", []string{"--model", src, "--data", bad}, "bad.jsonl line 1: no messages_and_choices"},
		{"missing folder", []string{"--model", filepath.Join(dir, "missing"), "--data", data}, "missing"},
		{"no data flag", []string{"--model", src}, "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := filepath.Join(dir, "out-"+strings.ReplaceAll(tt.name, " ", "-"))
			code, _, errOut := runArgs(t, append([]string{"pretrain", "--out", o}, tt.args...)...)
			if code == 0 || !strings.Contains(errOut, tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Fatalf("exit %d, stderr %q; want a one-line error containing %q", code, errOut, tt.want)
			}
			if _, err := os.Stat(o); err == nil {
				t.Fatalf("%s was written", o)
			}
		})
	}
}

// Ensure out-of-range numbers are errors naming their flag, checked before
// anything is read (the data file here does not exist) or written, never
// silently read as pretrain's defaults (0 batch → 32, 0 epochs → 1).
func TestPretrainCmd_BadNumbers(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--epochs", "0"}, "pretrain: --epochs must be >= 1, got 0"},
		{[]string{"--batch", "0"}, "pretrain: --batch must be >= 1, got 0"},
		{[]string{"--batch", "-4"}, "pretrain: --batch must be >= 1, got -4"},
		{[]string{"--max-seq-len", "0"}, "pretrain: --max-seq-len must be >= 1, got 0"},
		{[]string{"--max-steps", "-1"}, "pretrain: --max-steps must be >= 0, got -1"},
		{[]string{"--hold-out", "-1"}, "pretrain: --hold-out must be >= 0, got -1"},
		{[]string{"--eval-every", "-1"}, "pretrain: --eval-every must be >= 0, got -1"},
		{[]string{"--log-every", "-1"}, "pretrain: --log-every must be >= 0, got -1"},
		{[]string{"--lr", "0"}, "pretrain: --lr must be > 0, got 0"},
		{[]string{"--stop-loss", "-1"}, "pretrain: --stop-loss must be >= 0, got -1"},
		{[]string{"--stop-loss", "0.5", "--hold-out", "2"}, "pretrain: --stop-loss 0.5 needs --hold-out N and --eval-every N (a held-out loss measured during training)"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			args := append([]string{"pretrain", "--model", filepath.Join(dir, "model"), "--data", filepath.Join(dir, "missing.jsonl"), "--out", out}, tt.args...)
			code, _, errOut := runArgs(t, args...)
			if code != 1 || errOut != "art: "+tt.want+"\n" {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut, "art: "+tt.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("%s was created (%v)", out, err)
			}
		})
	}
}

// Ensure an interrupted pretrain says so, exits 1 and leaves no output
// folder, finished or not.
func TestPretrain_Interrupted(t *testing.T) {
	src := arttest.TinyModel(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data.jsonl")
	writeEcho(t, data, 40)
	out := filepath.Join(dir, "base")
	code, errOut, _ := runCanceled(t, "pretrain", "--model", src, "--data", data, "--out", out, "--epochs", "5", "--batch", "8")
	if code != 1 || !strings.Contains(errOut, "interrupted") {
		t.Fatalf("exit %d, stderr %q; want 1 and the interrupt", code, errOut)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Fatalf("%s holds %v; want only the data", dir, left)
	}
}
