#!/usr/bin/env bash
# Side-by-side benchmark: one LoRA training step (forward + backward of the
# CISPO loss over one 512-token sequence, LoRA r=8 on all seven projections)
# of a Qwen2.5-0.5B-shaped model on the engine against the same model and
# step in PyTorch (Debian python3-torch 1.13, fp32, autograd, 2 threads).
# Interleaved rounds, medians, peak RSS of each; prints a markdown table
# (for BENCHMARKS.md).
#
#   bench/train/run.sh [rounds]        (default 5)
#
# Environment: SEQ (tokens, default 512), RANK (default 8), WARMUP (default 1),
# RECOMPUTE=1 (the engine recomputes activations: less memory, more compute),
# QUANTIZE=q8 or q4 (the engine's base stored in 8 or 4 bits, quantized at
# load from the bf16 weights; the peers keep bf16), or a list such as
# QUANTIZE=none,q8,q4 (one engine per storage, interleaved; each quantized one
# reported against the bf16 one). PEERS=none runs the engine(s) alone.
# UNIT: the arithmetic of the engine's weight products, auto (default: what
# the kernels choose), fp32, bf16, or a list such as UNIT=fp32,bf16 (one
# engine per unit, interleaved; engine/kernels Unit).
#
# Two PyTorch peers run, and the engine's ratio is taken against the faster:
# fp32 on OpenBLAS, with OPENBLAS_CORETYPE set on its command alone to the
# best kernel set for this CPU (bench/openblas-coretype.sh; Debian's OpenBLAS
# 0.3.21 misdetects recent CPUs and falls back to SSE3 kernels otherwise), and
# bf16 weights under torch.autocast, which runs its products on oneDNN where
# the CPU has bf16 instructions (the run prints whether oneDNN took them:
# DNNL_VERBOSE names the ISA). PEERS=fp32 or PEERS=bf16 runs one. Never set
# OPENBLAS_CORETYPE in tests or CI.
set -euo pipefail
# One benchmark at a time on this machine: two runs started in the same idle
# window would measure each other.
if command -v flock >/dev/null; then
	exec 9>"${TMPDIR:-/tmp}/art-bench.lock"
	flock 9
fi

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$root/bench/openblas-coretype.sh"
rounds=${1:-5}
py=/usr/bin/python3 # Debian's python3-torch works only with this one

if [ "${PEERS:-}" != none ] && ! "$py" -c 'import torch' 2>/dev/null; then
	echo "PyTorch not installed: run scripts/install-torch.sh (or PEERS=none for the engine alone)" >&2
	exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -o "$work/trainbench" ./bench/train)

# The fp32 peer's products go to whatever libblas.so.3 Debian's alternatives
# point at; on a fresh machine that is the reference BLAS (one thread, no
# vector kernels), which no PyTorch user would train on. Install OpenBLAS
# (its package takes over the alternative) and refuse to measure otherwise.
blas_lib() {
	"$py" -c 'import os, torch
torch.ones(2, 2) @ torch.ones(2, 2)
libs = {os.path.realpath(l.split()[-1]) for l in open("/proc/self/maps") if "blas" in l.split()[-1]}
print(" ".join(sorted(libs)))'
}
require_openblas() {
	local libs
	libs=$(blas_lib)
	if [[ $libs != *openblas* ]]; then
		echo "installing libopenblas0-pthread (the fp32 peer would run on the reference BLAS) ..." >&2
		export DEBIAN_FRONTEND=noninteractive
		timeout 600 apt-get update -qq >&2
		timeout 900 apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends libopenblas0-pthread >&2
		libs=$(blas_lib)
	fi
	if [[ $libs != *openblas* ]]; then
		echo "PyTorch loads $libs, not OpenBLAS: refusing to measure the fp32 peer on a reference BLAS" >&2
		exit 1
	fi
	echo "fp32 peer BLAS: $libs" >&2
}

# Where oneDNN takes no bf16 product (CPUs without bf16 instructions), the
# bf16 peer runs PyTorch's scalar fallback, minutes per step (more than 3 min
# on an AVX2-only AMD EPYC against 23 s for fp32): no user would train that
# way, so by default it runs only where oneDNN uses bf16. PEERS overrides.
# isa is the ISA oneDNN names for a bf16 product, probed once, when needed.
isa=
if [ -z "${PEERS:-}" ] || [[ " $PEERS " == *" bf16 "* ]]; then
	isa=$(DNNL_VERBOSE=1 timeout 120 "$py" -c 'import torch
a = torch.randn(64, 64)
with torch.autocast("cpu", dtype=torch.bfloat16):
    torch.nn.functional.linear(a, a)' 2>/dev/null | grep -m1 -o 'isa:[^,]*' || true)
fi
default_peers="fp32 bf16"
if [ -z "${PEERS:-}" ] && [ -z "$isa" ]; then
	echo "bf16 peer skipped: oneDNN takes no bf16 product on this CPU (PEERS=\"fp32 bf16\" runs it anyway)" >&2
	default_peers=fp32
fi
peers=()
for p in ${PEERS:-$default_peers}; do
	case "$p" in
	fp32)
		require_openblas
		peers+=(-peer "env OPENBLAS_CORETYPE=$(openblas_coretype) $py $here/torch_peer.py fp32")
		;;
	bf16)
		echo "bf16 peer: oneDNN ${isa:-was not used for bf16 products on this CPU (PyTorch falls back to its own kernels)}" >&2
		peers+=(-peer "$py $here/torch_peer.py bf16")
		;;
	none) ;;
	*) echo "PEERS: want fp32 and/or bf16, or none, not $p" >&2; exit 1 ;;
	esac
done
quantize=${QUANTIZE:-none}
echo "engine base weights: $quantize (none = bf16)" >&2
unit=${UNIT:-auto}
echo "engine weight products: $unit" >&2
"$work/trainbench" -rounds "$rounds" -warmup "${WARMUP:-1}" -T "${SEQ:-512}" -rank "${RANK:-8}" -dir "$work" -recompute="${RECOMPUTE:-0}" \
	-quantize "$quantize" -unit "$unit" ${peers[@]+"${peers[@]}"}
