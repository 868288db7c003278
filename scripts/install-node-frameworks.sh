#!/usr/bin/env bash
# install-node-frameworks.sh installs the JavaScript agent frameworks the
# server's framework test (server/frameworks_test.go,
# server/testdata/frameworks_client.mjs) drives against `art serve`:
# LangChain JS (@langchain/openai + @langchain/core), the Vercel AI SDK
# (ai + @ai-sdk/openai) and zod, into <repo>/.assets/node-frameworks/. The
# test is skipped when the folder is absent and fails under
# ART_REQUIRE_ASSETS=1.
#
# Usage: scripts/install-node-frameworks.sh
#
# Pinned to the newest versions that run on Node 20 (this machine's): the
# next @langchain/openai (1.5.9), ai (7.x) and @ai-sdk/openai (4.x) need
# Node >= 22. Idempotent: a folder that holds the pinned set is left alone.
# The install goes to a temporary directory renamed into place only once
# complete, so an interrupted run never leaves a folder that looks valid.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASSETS="$ROOT/.assets"
DEST="$ASSETS/node-frameworks"
PACKAGES=(
	"@langchain/openai@1.5.8"
	"@langchain/core@1.4.0"
	"ai@6.0.325"
	"@ai-sdk/openai@3.0.141"
	"zod@3.25.76"
)
NPM_TIMEOUT="${NPM_TIMEOUT:-300}" # seconds for npm install

log() { printf 'install-node-frameworks: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v node >/dev/null || die "node not found (apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm not found (apt-get install npm)"

# installed DIR prints the packages installed under DIR as name@version,
# one per line, in the order of PACKAGES (a missing one prints name@).
installed() {
	local spec name
	for spec in "${PACKAGES[@]}"; do
		name="${spec%@*}"
		printf '%s@%s\n' "$name" "$(node -p "require(process.argv[1]).version" "$1/node_modules/$name/package.json" 2>/dev/null || true)"
	done
}

WANT="$(printf '%s\n' "${PACKAGES[@]}")"
if [[ "$(installed "$DEST")" == "$WANT" ]]; then
	log "present in ${DEST#"$ROOT"/}"
	exit 0
fi

mkdir -p "$ASSETS"
TMP="$(mktemp -d "$ASSETS/.tmp-node-frameworks.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

log "npm install ${PACKAGES[*]} (timeout ${NPM_TIMEOUT}s)"
if ! (cd "$TMP" && timeout "$NPM_TIMEOUT" npm install --prefix "$TMP" --no-audit --no-fund --omit=optional \
	"${PACKAGES[@]}" >"$TMP/npm.log" 2>&1); then
	tail -n 20 "$TMP/npm.log" >&2 || true
	die "npm install failed (log above)"
fi
[[ "$(installed "$TMP")" == "$WANT" ]] || die "installed set differs from the pinned one: $(installed "$TMP" | tr '\n' ' ')"
(cd "$TMP" && timeout 60 node --input-type=module -e '
import { ChatOpenAI } from "@langchain/openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText } from "ai";
new ChatOpenAI({ model: "m", apiKey: "x", configuration: { baseURL: "http://127.0.0.1:1/v1" } });
createOpenAI({ apiKey: "x", baseURL: "http://127.0.0.1:1/v1" })("m");
if (typeof generateText !== "function") throw new Error("ai: no generateText");
') || die "installed but does not load in $(node --version)"

rm -f "$TMP/npm.log" "$TMP/package.json" "$TMP/package-lock.json"
rm -rf "$DEST"
mv "$TMP" "$DEST"
trap - EXIT
log "installed ${PACKAGES[*]} in ${DEST#"$ROOT"/} ($(du -sh "$DEST" | cut -f1))"
