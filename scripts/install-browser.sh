#!/usr/bin/env bash
# install-browser.sh installs the real browser the dashboard's tests drive:
# Debian's `chromium` (apt-get) and npm `playwright-core` into
# <repo>/.assets/playwright/. The test (dashboard/browser_test.go,
# dashboard/testdata/browser.mjs) launches /usr/bin/chromium headless through
# playwright-core's executablePath; nothing ever downloads a browser build of
# its own (playwright-core has no install hook, and PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD
# is set besides). The test is skipped when either part is absent and fails
# under ART_REQUIRE_ASSETS=1.
#
# Usage: scripts/install-browser.sh
#
# Pinned to playwright-core@1.65.1 (no dependencies; Node >= 20). Idempotent:
# a folder that holds the pinned version is left alone, an installed chromium
# is not reinstalled. The npm install goes to a temporary directory renamed
# into place only once complete, so an interrupted run never leaves a folder
# that looks valid. apt-get needs root (CI runs as root).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASSETS="$ROOT/.assets"
DEST="$ASSETS/playwright"
VERSION="1.65.1"
CHROMIUM=/usr/bin/chromium
NPM_TIMEOUT="${NPM_TIMEOUT:-300}" # seconds for npm install

log() { printf 'install-browser: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ ! -x "$CHROMIUM" ]]; then
	[[ "$(id -u)" == 0 ]] || die "need root to apt-get install chromium"
	log "apt-get install chromium"
	export DEBIAN_FRONTEND=noninteractive
	timeout 600 apt-get update -qq
	timeout 900 apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
timeout 60 "$CHROMIUM" --version >/dev/null || die "$CHROMIUM does not run"

command -v node >/dev/null || die "node not found (apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm not found (apt-get install npm)"

# version_of DIR prints the installed playwright-core version under DIR, or nothing.
version_of() {
	local pj="$1/node_modules/playwright-core/package.json"
	[[ -f "$pj" ]] || return 0
	node -p "require(process.argv[1]).version" "$pj" 2>/dev/null || true
}

if [[ "$(version_of "$DEST")" == "$VERSION" ]]; then
	log "playwright-core@$VERSION present in ${DEST#"$ROOT"/}; $("$CHROMIUM" --version)"
	exit 0
fi

mkdir -p "$ASSETS"
TMP="$(mktemp -d "$ASSETS/.tmp-playwright.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

log "npm install playwright-core@$VERSION (timeout ${NPM_TIMEOUT}s)"
if ! (cd "$TMP" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 timeout "$NPM_TIMEOUT" npm install --prefix "$TMP" \
	--no-audit --no-fund --omit=optional "playwright-core@$VERSION" >"$TMP/npm.log" 2>&1); then
	tail -n 20 "$TMP/npm.log" >&2 || true
	die "npm install failed (log above)"
fi
[[ "$(version_of "$TMP")" == "$VERSION" ]] || die "playwright-core@$VERSION missing after install"
(cd "$TMP" && timeout 60 node -e 'require("playwright-core").chromium.executablePath') ||
	die "playwright-core@$VERSION installed but does not load in $(node --version)"

rm -f "$TMP/npm.log"
rm -rf "$DEST"
mv "$TMP" "$DEST"
trap - EXIT
log "installed playwright-core@$VERSION in ${DEST#"$ROOT"/} ($(du -sh "$DEST" | cut -f1)); $("$CHROMIUM" --version)"
