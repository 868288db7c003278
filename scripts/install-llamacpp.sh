#!/usr/bin/env bash
# install-llamacpp.sh installs node-llama-cpp (prebuilt llama.cpp for node)
# into <repo>/.assets/node-llama-cpp/, the peer that engine/gguf's parity test
# runs our GGUF exports on. The test is skipped when the folder is absent and
# fails under ART_REQUIRE_ASSETS=1.
#
# Usage: scripts/install-llamacpp.sh
#
# Only the package and its prebuilt binary for this platform are installed
# (the CUDA/Vulkan optional packages are left out: ≈20 MB instead of ≈700 MB),
# and node-llama-cpp is told never to download or build llama.cpp itself.
# Idempotent: a folder that already holds the pinned versions is left alone.
# The install goes to a temporary directory that is renamed into place only
# once it is complete, so an interrupted run never leaves a folder that looks
# valid.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASSETS="$ROOT/.assets"
DEST="$ASSETS/node-llama-cpp"
VERSION="3.22.1"
NPM_TIMEOUT="${NPM_TIMEOUT:-600}" # seconds for npm install

log() { printf 'install-llamacpp: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v node >/dev/null || die "node not found (apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm not found (apt-get install npm)"

# The prebuilt binary package for this machine, e.g. @node-llama-cpp/linux-x64.
PLATFORM="$(node -p 'process.platform + "-" + process.arch')"
BINPKG="@node-llama-cpp/$PLATFORM"

# version_of DIR PACKAGE prints PACKAGE's installed version under DIR, or nothing.
version_of() {
	local pj="$1/node_modules/$2/package.json"
	[[ -f "$pj" ]] || return 0
	node -p "require(process.argv[1]).version" "$pj" 2>/dev/null || true
}

if [[ "$(version_of "$DEST" node-llama-cpp)" == "$VERSION" && "$(version_of "$DEST" "$BINPKG")" == "$VERSION" ]]; then
	log "node-llama-cpp@$VERSION ($BINPKG) present in ${DEST#"$ROOT"/}"
	exit 0
fi

mkdir -p "$ASSETS"
TMP="$(mktemp -d "$ASSETS/.tmp-node-llama-cpp.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

log "npm install node-llama-cpp@$VERSION $BINPKG@$VERSION (timeout ${NPM_TIMEOUT}s)"
# --omit=optional drops the GPU builds; the platform binary is named
# explicitly so it is a regular dependency. NODE_LLAMA_CPP_SKIP_DOWNLOAD keeps
# the postinstall step from fetching or compiling llama.cpp.
if ! (cd "$TMP" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true timeout "$NPM_TIMEOUT" \
	npm install --prefix "$TMP" --no-audit --no-fund --omit=optional \
	"node-llama-cpp@$VERSION" "$BINPKG@$VERSION" >"$TMP/npm.log" 2>&1); then
	tail -n 20 "$TMP/npm.log" >&2 || true
	die "npm install failed (log above)"
fi
[[ "$(version_of "$TMP" node-llama-cpp)" == "$VERSION" ]] || die "node-llama-cpp@$VERSION missing after install"
[[ "$(version_of "$TMP" "$BINPKG")" == "$VERSION" ]] || die "$BINPKG@$VERSION missing after install"

# Check that the bundled llama.cpp loads without building anything. (A file,
# not `node -e`: node-llama-cpp tests its binary in a child process that
# inherits node's flags, and `-e` would make that child rerun this script.)
cat >"$TMP/check.mjs" <<'JS'
import {getLlama} from "node-llama-cpp";
const llama = await getLlama({gpu: false, build: "never", progressLogs: false});
console.error(`install-llamacpp: prebuilt llama.cpp ${llama.llamaCppRelease.release} loads (cpu)`);
await llama.dispose();
JS
(cd "$TMP" && timeout 120 node check.mjs) || die "node-llama-cpp installed but its prebuilt llama.cpp does not load"

rm -f "$TMP/npm.log" "$TMP/check.mjs"
rm -rf "$DEST"
mv "$TMP" "$DEST"
trap - EXIT
log "installed node-llama-cpp@$VERSION ($BINPKG) in ${DEST#"$ROOT"/} ($(du -sh "$DEST" | cut -f1))"
