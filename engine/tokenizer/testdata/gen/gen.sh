#!/usr/bin/env bash
# gen.sh regenerates the reference data of engine/tokenizer from the
# transformers.js fork @lenml/tokenizers (needs node and npm):
#
#   testdata/golden.json  token ids and pre-tokenizer splits (golden.mjs)
#   testdata/sp_golden.json  ids and decoded texts of the SentencePiece-style
#                         tokenizers on the same texts (sp_golden.mjs)
#   unicode_tables.go     \p{L}, \p{N} and \s as the reference regex engine sees them (unicode.mjs)
#
# Run it after editing testdata/corpus.json. The reference package is
# installed into a temporary directory and removed afterwards; the tokenizer
# files come from scripts/fetch-assets.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PKG="$(cd "$HERE/../.." && pwd)"
ROOT="$(cd "$PKG/../.." && pwd)"
REF="@lenml/tokenizers@3.7.2"

"$ROOT/scripts/fetch-assets.sh" qwen3 llama3_1 llama2 gemma3

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "gen.sh: installing $REF" >&2
(cd "$tmp" && npm init -y >/dev/null 2>&1 &&
	timeout 300 npm install --silent --no-audit --no-fund --ignore-scripts "$REF" >/dev/null)

REF_DIR="$tmp" node "$HERE/golden.mjs" "$PKG/testdata/corpus.json" "$ROOT/.assets" "$PKG/testdata/golden.json"
REF_DIR="$tmp" node "$HERE/sp_golden.mjs" "$PKG/testdata/golden.json" "$ROOT/.assets" "$PKG/testdata/sp_golden.json"
node "$HERE/unicode.mjs" >"$tmp/unicode_tables.go"
gofmt "$tmp/unicode_tables.go" >"$PKG/unicode_tables.go"
echo "gen.sh: wrote testdata/golden.json, testdata/sp_golden.json and unicode_tables.go" >&2
