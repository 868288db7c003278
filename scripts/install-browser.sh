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
# an installed chromium is not reinstalled, and the npm part never leaves a
# half-installed folder (scripts/lib/npm-assets.sh). apt-get needs root (CI
# runs as root).
set -euo pipefail
NAME=install-browser
source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-assets.sh"
CHROMIUM=/usr/bin/chromium

if [[ ! -x "$CHROMIUM" ]]; then
	[[ "$(id -u)" == 0 ]] || die "need root to apt-get install chromium"
	log "apt-get install chromium"
	export DEBIAN_FRONTEND=noninteractive
	timeout 600 apt-get update -qq
	timeout 900 apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
timeout 60 "$CHROMIUM" --version >/dev/null || die "$CHROMIUM does not run"

verify_npm_install() {
	(cd "$1" && timeout 60 node -e 'require("playwright-core").chromium.executablePath')
}

export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
install_npm_assets "$ASSETS/playwright" "playwright-core@1.65.1"
log "$("$CHROMIUM" --version)"
