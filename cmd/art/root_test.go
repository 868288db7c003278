package main

import (
	"strings"
	"testing"

	"github.com/artgo/art/engine/kernels"
)

// Ensure $ART_MATMUL_UNIT is checked as --matmul-unit is: a bad value is an
// error naming the variable, not a silent fp32.
func TestMatmulUnitEnv(t *testing.T) {
	t.Setenv(kernels.UnitEnv, "bogus")
	code, _, errOut := runArgs(t, "version")
	if code != 1 || !strings.Contains(errOut, `$ART_MATMUL_UNIT=bogus: matmul unit "bogus"`) {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming $ART_MATMUL_UNIT", code, errOut)
	}
}

// Ensure a parent command or help given an unknown subcommand fails
// (exit 1, one line) instead of printing help and exiting 0.
func TestUnknownSubcommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "bogus"}, `unknown command "bogus" for "art export"`},
		{[]string{"help", "bogus"}, `unknown help topic "bogus"`},
		{[]string{"export", "gguf", "extra"}, `"art export gguf" takes no arguments, got "extra"`},
	} {
		code, out, errOut := runArgs(t, tt.args...)
		if code != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("art %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q", strings.Join(tt.args, " "), code, out, errOut, tt.want)
		}
	}
	if code, out, _ := runArgs(t, "export"); code != 0 || !strings.Contains(out, "gguf-lora") {
		t.Errorf("art export alone: exit %d, stdout %q; want its help", code, out)
	}
	if code, out, _ := runArgs(t, "help", "export"); code != 0 || !strings.Contains(out, "gguf-lora") {
		t.Errorf("art help export: exit %d, stdout %q; want its help", code, out)
	}
}
