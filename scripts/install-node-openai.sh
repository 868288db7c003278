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
# Node 20. The package has no dependencies. Idempotent, and never leaves a
# half-installed folder (scripts/lib/npm-assets.sh).
set -euo pipefail
NAME=install-node-openai
source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-assets.sh"

verify_npm_install() {
	(cd "$1" && timeout 60 node -e 'import("openai").then(m => { new m.default({apiKey: "x", baseURL: "http://127.0.0.1:1/v1"}); })')
}

install_npm_assets "$ASSETS/node-openai" "openai@6.49.0"
