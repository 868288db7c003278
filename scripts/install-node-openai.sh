#!/usr/bin/env bash
# install-node-openai.sh installs the official OpenAI Node SDK (npm `openai`)
# into <repo>/.assets/node-openai/, the second real client the server's
# end-to-end test (server/node_test.go, server/testdata/node_client.mjs)
# talks to `art serve` with. The test is skipped when the folder is absent
# and fails under ART_REQUIRE_ASSETS=1.
#
# Usage: scripts/install-node-openai.sh
#
# Pinned to openai@6.49.0: the 7.x line needs Node >= 22, this machine has
# Node 20. The package has no dependencies. Idempotent: a folder that holds
# the pinned version is left alone. The install goes to a temporary directory
# renamed into place only once complete, so an interrupted run never leaves a
# folder that looks valid.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASSETS="$ROOT/.assets"
DEST="$ASSETS/node-openai"
VERSION="6.49.0"
NPM_TIMEOUT="${NPM_TIMEOUT:-300}" # seconds for npm install

log() { printf 'install-node-openai: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v node >/dev/null || die "node not found (apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm not found (apt-get install npm)"

# version_of DIR prints the installed openai version under DIR, or nothing.
version_of() {
	local pj="$1/node_modules/openai/package.json"
	[[ -f "$pj" ]] || return 0
	node -p "require(process.argv[1]).version" "$pj" 2>/dev/null || true
}

if [[ "$(version_of "$DEST")" == "$VERSION" ]]; then
	log "openai@$VERSION present in ${DEST#"$ROOT"/}"
	exit 0
fi

mkdir -p "$ASSETS"
TMP="$(mktemp -d "$ASSETS/.tmp-node-openai.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

log "npm install openai@$VERSION (timeout ${NPM_TIMEOUT}s)"
if ! (cd "$TMP" && timeout "$NPM_TIMEOUT" npm install --prefix "$TMP" --no-audit --no-fund --omit=optional \
	"openai@$VERSION" >"$TMP/npm.log" 2>&1); then
	tail -n 20 "$TMP/npm.log" >&2 || true
	die "npm install failed (log above)"
fi
[[ "$(version_of "$TMP")" == "$VERSION" ]] || die "openai@$VERSION missing after install"
(cd "$TMP" && timeout 60 node -e 'import("openai").then(m => { new m.default({apiKey: "x", baseURL: "http://127.0.0.1:1/v1"}); })') ||
	die "openai@$VERSION installed but does not load in $(node --version)"

rm -f "$TMP/npm.log"
rm -rf "$DEST"
mv "$TMP" "$DEST"
trap - EXIT
log "installed openai@$VERSION in ${DEST#"$ROOT"/} ($(du -sh "$DEST" | cut -f1))"
