package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
)

// Ensure init-model writes a loadable folder and logprobs prints exactly
// what the engine computes for every token.
func TestInitModelThenLogprobs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	code, out, errOut := runArgs(t, "init-model", "--arch", "llama", "--shape", "tiny", "--tokenizer", "bytes", "--out", dir)
	if code == 0 {
		t.Fatalf("llama with the byte tokenizer and no template should fail; got %q", out)
	}
	if !strings.Contains(errOut, "chat template") || !strings.Contains(errOut, "--chat-template") {
		t.Fatalf("stderr %q does not explain the failure and name the flag", errOut)
	}
	code, out, errOut = runArgs(t, "init-model", "--shape", "tiny", "--tokenizer", "bytes", "--dtype", "bf16", "--seed", "3", "--out", dir)
	if code != 0 {
		t.Fatalf("init-model: %d %s", code, errOut)
	}
	if !strings.Contains(out, "parameters") {
		t.Fatalf("stdout %q", out)
	}
	for _, f := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	const text = "The quick brown fox, 123!"
	code, out, errOut = runArgs(t, "logprobs", "--model", dir, "--text", text, "--json")
	if code != 0 {
		t.Fatalf("logprobs: %s", errOut)
	}
	var rows []tokenScore
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("logprobs --json output: %v\n%s", err, out)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := tokenizer.LoadDir(dir)
	ids := tok.Encode(text)
	want, _ := m.LogProbs(ids, nil)
	if len(rows) != len(ids) || rows[0].Logprob != nil {
		t.Fatalf("got %d rows (first %+v); want %d with no logprob on the first", len(rows), rows[0], len(ids))
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].ID != ids[i] || *rows[i].Logprob != want[i-1] {
			t.Fatalf("row %d = %+v; want id %d logprob %v", i, rows[i], ids[i], want[i-1])
		}
	}
	// The table form and bad inputs.
	if code, out, _ = runArgs(t, "logprobs", "--model", dir, "--text", text); code != 0 || !strings.Contains(out, "total") {
		t.Fatalf("table output: %d %q", code, out)
	}
	bad := [][]string{
		{"logprobs", "--model", dir},
		{"logprobs", "--model", filepath.Join(dir, "nope"), "--text", "x y"},
		{"init-model", "--tokenizer", "bytes", "--out", dir},
		{"init-model", "--tokenizer", "bytes", "--dtype", "f8", "--out", filepath.Join(t.TempDir(), "x")},
		{"init-model", "--tokenizer", "bytes", "--shape", "huge", "--out", filepath.Join(t.TempDir(), "y")},
	}
	for _, args := range bad {
		if code, _, errOut := runArgs(t, args...); code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want a one-line error", args, code, errOut)
		}
	}
}

// Ensure --chat-template puts the file's template into the folder, and a
// missing file is an error that writes nothing.
func TestInitModel_ChatTemplate(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "t.jinja")
	const src = `{%- for message in messages %}{{ message.content }}<|im_end|>{%- endfor %}`
	if err := os.WriteFile(tmpl, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "m")
	if code, _, errOut := runArgs(t, "init-model", "--tokenizer", "bytes", "--chat-template", tmpl, "--rope-theta", "10000", "--out", out); code != 0 {
		t.Fatalf("init-model: %s", errOut)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	b, err := os.ReadFile(filepath.Join(out, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.ChatTemplate != src {
		t.Fatalf("chat_template %q (%v); want %q", cfg.ChatTemplate, err, src)
	}
	m, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.RopeTheta != 10000 {
		t.Fatalf("rope_theta %v; want 10000", m.Config.RopeTheta)
	}
	missing := filepath.Join(dir, "m2")
	if code, _, errOut := runArgs(t, "init-model", "--tokenizer", "bytes", "--chat-template", filepath.Join(dir, "nope"), "--out", missing); code == 0 || !strings.Contains(errOut, "--chat-template") {
		t.Fatalf("missing template: exit %d %q", code, errOut)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("a folder was written")
	}
}

// Ensure invalid numbers are an error naming the flag, and that nothing is
// written: --rope-theta -5 used to be ignored and --std -1 accepted.
func TestInitModel_BadNumbers(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--std", "-1"}, "init-model: --std must be > 0, or 0 for 0.02; got -1"},
		{[]string{"--std", "NaN"}, "init-model: --std must be > 0, or 0 for 0.02; got NaN"},
		{[]string{"--std", "+Inf"}, "init-model: --std must be > 0, or 0 for 0.02; got +Inf"},
		{[]string{"--rope-theta", "-5"}, "init-model: --rope-theta must be > 0, or 0 for the shape's; got -5"},
		{[]string{"--rope-theta", "NaN"}, "init-model: --rope-theta must be > 0, or 0 for the shape's; got NaN"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "m")
			code, _, errOut := runArgs(t, append([]string{"init-model", "--shape", "tiny", "--tokenizer", "bytes", "--out", out}, tt.args...)...)
			if code != 1 || errOut != "art: "+tt.want+"\n" {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut, "art: "+tt.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("%s was written (%v)", out, err)
			}
		})
	}
}

// Ensure an --out that cannot become the model folder is refused before
// any weights are drawn (a file as --out failed only at the save).
func TestInitModel_BadOut(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ out, want string }{
		{file, "init-model: --out " + file + " is a file; name a new or empty folder"},
		{filepath.Join(file, "m"), "init-model: --out " + filepath.Join(file, "m") + ": " + file + " is not a folder"},
		{dir, "init-model: --out " + dir + " is not empty; name a new or empty folder"},
	} {
		code, _, errOut := runArgs(t, "init-model", "--shape", "tiny", "--tokenizer", "bytes", "--out", tt.out)
		if code != 1 || errOut != "art: "+tt.want+"\n" {
			t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut, "art: "+tt.want)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("%s holds %v; want only the file", dir, left)
	}
}

// Ensure Ctrl-C stops init-model promptly, says so, and leaves neither
// the folder nor a temporary one: it ignored SIGINT until every weight was
// drawn and written (seconds for this 135M shape, minutes for a 7B one).
func TestInitModel_Interrupt(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send on Windows")
	}
	dir := t.TempDir()
	tpl := filepath.Join(dir, "template.jinja")
	if err := os.WriteFile(tpl, []byte("{{ messages }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "m")
	args, _ := json.Marshal([]string{"init-model", "--arch", "llama", "--shape", "smollm2-135m", "--tokenizer", "bytes",
		"--chat-template", tpl, "--dtype", "bf16", "--out", out})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runArtEnv+"="+string(args))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	select {
	case err := <-done:
		if took := time.Since(sent); cmd.ProcessState.ExitCode() != 1 || took > 5*time.Second {
			t.Fatalf("exit %v after %v; want 1 within 5s; stderr %q", err, took, stderr.String())
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("init-model still running a minute after SIGINT; stderr %q", stderr.String())
	}
	if want := "art: init-model: interrupted; " + out + " not written\n"; stderr.String() != want {
		t.Errorf("stderr %q; want %q", stderr.String(), want)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("%s holds %v; want only the template", dir, left)
	}
}
