#!/usr/bin/env bash
# Side-by-side benchmark of the native engine against llama.cpp
# (node-llama-cpp@3.22.1) on the same random Qwen2.5-0.5B-shaped weights:
# prefill, single-sequence decode, group sampling (n = 8) and peak RSS.
# Prints a markdown table (for BENCHMARKS.md).
#
#   bench/engine/run.sh [rounds] [extra flags for the Go program]
#
# Environment: THREADS (GOMAXPROCS and llama.cpp threads, default 2),
# DTYPE (our weight storage, f16 (default, the same bits as the GGUF) or
# bf16), WAIT_IDLE (how long to wait before each round for the machine to be
# < 20% busy, default 30s), OUT (also write the table to this file),
# LLAMA_BENCH (the llama-bench of a llama.cpp built for this CPU: each round
# also times it on the same GGUF, the peer at its best).
#
# It fetches what it needs (the Qwen tokenizer, node-llama-cpp), creates the
# model folder and its f16 GGUF export once under .assets/bench/ (≈2 GB per
# dtype; delete the folder to rebuild), checks that the machine is idle (and
# warns if not), then interleaves our engine and llama.cpp in rounds. See
# README.md for what each number means.
set -euo pipefail
# One benchmark at a time on this machine: two runs started in the same idle
# window would measure each other.
if command -v flock >/dev/null; then
	exec 9>"${TMPDIR:-/tmp}/art-bench.lock"
	flock 9
fi

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${1:-3}
shift || true
threads=${THREADS:-2}
dtype=${DTYPE:-f16}
wait_idle=${WAIT_IDLE:-30s}

# 1. Assets and the peer (both idempotent).
"$root/scripts/fetch-assets.sh" qwen3
"$root/scripts/install-llamacpp.sh"

# 2. Our side, built once (the RSS phase re-executes this binary).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -o "$work/enginebench" ./bench/engine)

# 3. The model folder and GGUF (cached), then the benchmark. The Go program
# does the idle check (/proc/stat, before the run and before each round).
echo "loadavg before the run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
cd "$root"
"$work/enginebench" setup -dtype "$dtype" >/dev/null
args=(-rounds "$rounds" -threads "$threads" -dtype "$dtype" -wait-idle "$wait_idle")
if [ -n "${OUT:-}" ]; then
	args+=(-out "$OUT")
fi
GOMAXPROCS=$threads "$work/enginebench" "${args[@]}" "$@"
