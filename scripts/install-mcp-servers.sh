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
# Pinned to 2026.8.31 (both run on Node 20). Idempotent, and never leaves a
# half-installed folder (scripts/lib/npm-assets.sh).
set -euo pipefail
NAME=install-mcp-servers
source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-assets.sh"

SERVERS=(server-memory server-everything)

# Each server must answer an MCP initialize over stdio on this Node.
verify_npm_install() {
	local p out
	for p in "${SERVERS[@]}"; do
		out="$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"install","version":"1"}}}' |
			MEMORY_FILE_PATH="$1/check.json" timeout 60 node "$1/node_modules/@modelcontextprotocol/$p/dist/index.js" 2>/dev/null | head -n 1)" || true
		rm -f "$1/check.json"
		[[ "$out" == *'"serverInfo"'* ]] || { log "@modelcontextprotocol/$p does not answer initialize"; return 1; }
	done
}

specs=()
for p in "${SERVERS[@]}"; do specs+=("@modelcontextprotocol/$p@2026.8.31"); done
install_npm_assets "$ASSETS/mcp-servers" "${specs[@]}"
