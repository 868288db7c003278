# npm-assets.sh is sourced by the install-*.sh scripts that put pinned npm
# packages into <repo>/.assets/<name>/ for tests (the OpenAI Node SDK, the JS
# agent frameworks, MCP servers, playwright-core). It holds what they share:
# the pinned-version check that makes them idempotent, and an install into a
# temporary directory renamed into place only once complete and verified, so
# an interrupted or broken install never leaves a folder that looks valid.
#
# The sourcing script sets NAME (for messages) before sourcing, and defines
# verify_npm_install DIR (loads the packages on this Node; fails if not)
# before calling install_npm_assets.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ASSETS="$ROOT/.assets"
NPM_TIMEOUT="${NPM_TIMEOUT:-300}" # seconds for npm install

log() { printf '%s: %s\n' "$NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# npm_versions_match DIR SPEC... succeeds when every name@version SPEC is
# installed under DIR/node_modules at exactly that version.
npm_versions_match() {
	local dir="$1" spec name v
	shift
	for spec in "$@"; do
		name="${spec%@*}"
		v="$(node -p "require(process.argv[1]).version" "$dir/node_modules/$name/package.json" 2>/dev/null || true)"
		[[ "$v" == "${spec##*@}" ]] || return 1
	done
}

# install_npm_assets DEST SPEC... installs the pinned packages into DEST
# unless they are already there, verifying them with verify_npm_install.
install_npm_assets() {
	local dest="$1" tmp
	shift
	command -v node >/dev/null || die "node not found (apt-get install nodejs npm)"
	command -v npm >/dev/null || die "npm not found (apt-get install npm)"
	if npm_versions_match "$dest" "$@"; then
		log "$* present in ${dest#"$ROOT"/}"
		return 0
	fi
	mkdir -p "$ASSETS"
	tmp="$(mktemp -d "$ASSETS/.tmp-$(basename "$dest").XXXXXX")"
	# shellcheck disable=SC2064 # expand tmp now: it is local
	trap "rm -rf '$tmp'" EXIT
	log "npm install $* (timeout ${NPM_TIMEOUT}s)"
	if ! (cd "$tmp" && timeout "$NPM_TIMEOUT" npm install --prefix "$tmp" --no-audit --no-fund --omit=optional \
		"$@" >"$tmp/npm.log" 2>&1); then
		tail -n 20 "$tmp/npm.log" >&2 || true
		die "npm install failed (log above)"
	fi
	npm_versions_match "$tmp" "$@" || die "the pinned packages are missing after install: $*"
	verify_npm_install "$tmp" || die "$* installed but does not load in $(node --version)"
	rm -f "$tmp/npm.log"
	rm -rf "$dest"
	mv "$tmp" "$dest"
	trap - EXIT
	log "installed $* in ${dest#"$ROOT"/} ($(du -sh "$dest" | cut -f1))"
}
