package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/arttest"
)

// Ensure `art logprobs` refuses a text longer than the model's context (it
// scored positions the model has no place for, where the server refuses
// such a prompt), says which flag a bad --messages file came from and that
// an empty list has nothing to score (the chat template's internals were
// the message), and stops at an interrupt.
func TestLogprobs_BadInput(t *testing.T) {
	dir := arttest.TinyModel(t) // byte tokens: a character is a token; context 4096
	files := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty, notList, missing := write("empty.json", "[]"), write("obj.json", `{"role":"user"}`), filepath.Join(files, "none.json")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--text", strings.Repeat("a", 4097)}, "logprobs: the input is 4097 tokens; the model's context (max_position_embeddings) is 4096"},
		{[]string{"--messages", missing}, "logprobs: --messages: open " + missing + ": no such file or directory"},
		{[]string{"--messages", empty}, "logprobs: --messages " + empty + ": the list has no message to score"},
		{[]string{"--messages", notList}, "logprobs: --messages " + notList + ": want a JSON list of messages: "},
	} {
		code, _, errOut := runArgs(t, append([]string{"logprobs", "--model", dir}, tt.args...)...)
		if code != 1 || !strings.HasPrefix(errOut, "art: "+tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%.60q: exit %d, stderr %q; want 1 and one line starting %q", tt.args, code, errOut, "art: "+tt.want)
		}
	}
	if code, _, _ := runArgs(t, "logprobs", "--model", dir, "--text", strings.Repeat("a", 4096)); code != 0 {
		t.Errorf("a text of exactly the context: exit %d", code)
	}
	code, errOut, _ := runCanceled(t, "logprobs", "--model", dir, "--text", "hello")
	if code != 1 || errOut != "art: logprobs: interrupted\n" {
		t.Errorf("interrupted: exit %d, stderr %q", code, errOut)
	}
}
