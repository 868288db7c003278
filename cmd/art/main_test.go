package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    []string
		wantErrOut []string
	}{
		{"version", []string{"version"}, 0, []string{"art ", "go1."}, nil},
		{"help", []string{"help"}, 0, []string{"Usage:", "version", "Print the version of art", "--log-level"}, nil},
		{"no args shows help", nil, 0, []string{"Available Commands:"}, nil},
		{"unknown command", []string{"bogus"}, 1, nil, []string{`art: unknown command "bogus"`}},
		{"version takes no args", []string{"version", "x"}, 1, nil, []string{`art: "art version" takes no arguments, got "x"`}},
		{"bad log level", []string{"--log-level=loud", "version"}, 1, nil, []string{`art: --log-level "loud": want debug, info, warn or error`}},
		{"good log level", []string{"--log-level=debug", "version"}, 0, []string{"art "}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runArgs(t, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit code %d; want %d (stdout %q, stderr %q)", code, tt.wantCode, out, errOut)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout %q lacks %q", out, w)
				}
			}
			for _, w := range tt.wantErrOut {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
}

func TestVersionOf(t *testing.T) {
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"released", debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, "v0.3.0"},
		{"work tree", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"empty", debug.BuildInfo{}, "devel"},
		{"work tree with vcs", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"},
		}}, "devel 0123456789ab+dirty"},
		{"pseudo-version ignores vcs", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260101-abcdef"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "ffff"},
		}}, "v0.0.0-20260101-abcdef"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionOf(&tt.bi); got != tt.want {
				t.Fatalf("versionOf = %q; want %q", got, tt.want)
			}
		})
	}
}

// Ensure a cancelled context reaches subcommands.
func TestRun_Context(t *testing.T) {
	root := newRootCmd()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var seen error
	cmd := newVersionCmd()
	cmd.Use = "probe"
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		seen = c.Context().Err()
		return nil
	}
	root.AddCommand(cmd)
	root.SetArgs([]string{"probe"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	if seen != context.Canceled {
		t.Fatalf("subcommand saw context error %v; want context.Canceled", seen)
	}
}
