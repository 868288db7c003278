#!/usr/bin/env bash
# install-mcp-servers.sh installs real MCP servers from npm into
# <repo>/.assets/mcp-servers/ for the mcprl tests and examples/mcp:
# @modelcontextprotocol/server-memory (a knowledge graph kept in a JSON
# file: tasks are checked by the file's resulting state) and
# @modelcontextprotocol/server-everything (every protocol feature: echo, sums,
# resources, a long-running operation, a streamable HTTP transport). The
# tests are skipped when the folder is absent and fail under
# ART_REQUIRE_ASSETS=1.
#
# Usage: scripts/install-mcp-servers.sh
#
# Pinned to 2026.8.31 (both run on Node 20). Idempotent: a folder that holds
# the pinned versions is left alone. The install goes to a temporary
# directory renamed into place only once complete, so an interrupted run
# never leaves a folder that looks valid.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASSETS="$ROOT/.assets"
DEST="$ASSETS/mcp-servers"
VERSION="2026.8.31"
PACKAGES=(server-memory server-everything)
NPM_TIMEOUT="${NPM_TIMEOUT:-300}" # seconds for npm install

log() { printf 'install-mcp-servers: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v node >/dev/null || die "node not found (apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm not found (apt-get install npm)"

# installed DIR succeeds when every pinned package is under DIR.
installed() {
	local p v
	for p in "${PACKAGES[@]}"; do
		v="$(node -p "require(process.argv[1]).version" "$1/node_modules/@modelcontextprotocol/$p/package.json" 2>/dev/null || true)"
		[[ "$v" == "$VERSION" ]] || return 1
	done
}

if installed "$DEST"; then
	log "MCP servers $VERSION present in ${DEST#"$ROOT"/}"
	exit 0
fi

mkdir -p "$ASSETS"
TMP="$(mktemp -d "$ASSETS/.tmp-mcp-servers.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

specs=()
for p in "${PACKAGES[@]}"; do specs+=("@modelcontextprotocol/$p@$VERSION"); done
log "npm install ${specs[*]} (timeout ${NPM_TIMEOUT}s)"
if ! (cd "$TMP" && timeout "$NPM_TIMEOUT" npm install --prefix "$TMP" --no-audit --no-fund --omit=optional \
	"${specs[@]}" >"$TMP/npm.log" 2>&1); then
	tail -n 20 "$TMP/npm.log" >&2 || true
	die "npm install failed (log above)"
fi
installed "$TMP" || die "the MCP servers are missing after install"
# Each server must answer an MCP initialize over stdio on this Node.
for p in "${PACKAGES[@]}"; do
	out="$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"install","version":"1"}}}' |
		MEMORY_FILE_PATH="$TMP/check.json" timeout 60 node "$TMP/node_modules/@modelcontextprotocol/$p/dist/index.js" 2>/dev/null | head -n 1)" || true
	[[ "$out" == *'"serverInfo"'* ]] || die "@modelcontextprotocol/$p@$VERSION does not answer initialize on $(node --version)"
done

rm -f "$TMP/npm.log" "$TMP/check.json"
rm -rf "$DEST"
mv "$TMP" "$DEST"
trap - EXIT
log "installed ${specs[*]} in ${DEST#"$ROOT"/} ($(du -sh "$DEST" | cut -f1))"
