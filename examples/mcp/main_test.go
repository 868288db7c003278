package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/arttest"
	"github.com/artgo/art/internal/testassets"
)

// Ensure the example trains end to end on the real memory server from npm
// with a tiny random model (offered one tool: the tiny model's context
// holds 4096 bytes): a held-out evaluation, one training step with
// the server started per rollout, and the before → after line.
func TestTrain_Smoke(t *testing.T) {
	servers := testassets.Dir(t, testassets.MCPServers)
	base, root := arttest.TinyModel(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, err := parseFlags([]string{"--base-model", base, "--path", root, "--server-dir", servers, "--steps", "1", "--groups", "1",
		"--group-size", "2", "--eval", "1", "--max-turns", "2", "--max-tokens", "16", "--tools", "create_entities", "--quiet"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "step 1: reward") || !strings.Contains(out.String(), "held-out reward") {
		t.Errorf("output:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(root, "examples", "models", "mcp-example", "checkpoints", "0001")); err != nil {
		t.Error(err)
	}
}

func TestGrade(t *testing.T) {
	file := filepath.Join(t.TempDir(), "g.jsonl")
	tk := task{Person: "Ada", Fact: "likes tea"}
	if r, stored := grade(file, tk, false); r != 0 || stored != false {
		t.Errorf("no file: %v %v", r, stored)
	}
	os.WriteFile(file, []byte(`{"type":"entity","name":"Ada","entityType":"person","observations":["Likes tea a lot"]}`+"\n"), 0o644)
	if r, stored := grade(file, tk, true); r != 1 || stored != true {
		t.Errorf("stored with the fact, completed: %v %v", r, stored)
	}
	os.WriteFile(file, []byte(`{"type":"entity","name":"ada","entityType":"person","observations":[]}`+"\n"), 0o644)
	if r, stored := grade(file, tk, false); r != 0.5 || stored != false {
		t.Errorf("stored without the fact: %v %v", r, stored)
	}
}

// Ensure --write-teacher writes transcripts the way the agent records
// episodes, with the real server's answers, and that a transcript without
// noise stores exactly what grade rewards in full.
func TestWriteTeacher(t *testing.T) {
	servers := testassets.Dir(t, testassets.MCPServers)
	file := filepath.Join(t.TempDir(), "teacher.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := parseFlags([]string{"--write-teacher", file, "--teacher", "4", "--server-dir", servers, "--tools", "create_entities",
		"--system", "Store the fact."}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeTeacher(ctx, cfg, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d transcripts, want 4", len(lines))
	}
	tk := makeTasks(1, cfg.Seed)[0]
	for _, want := range []string{tk.Text, `create_entities`, `complete_task`, `\"name\": \"` + tk.Person + `\"`, `Task marked complete.`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first transcript lacks %s:\n%s", want, lines[0])
		}
	}
}
