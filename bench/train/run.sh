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
# RECOMPUTE=1 (the engine recomputes activations: less memory, more compute).
#
# OPENBLAS_CORETYPE=Cooperlake is set on the PyTorch command alone: Debian's
# OpenBLAS 0.3.21 misdetects this CPU (model 207) and falls back to SSE3
# kernels otherwise. Never set it in tests or CI.
set -euo pipefail
# One benchmark at a time on this machine: two runs started in the same idle
# window would measure each other.
if command -v flock >/dev/null; then
	exec 9>"${TMPDIR:-/tmp}/art-bench.lock"
	flock 9
fi

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${1:-5}
py=/usr/bin/python3 # Debian's python3-torch works only with this one

if ! "$py" -c 'import torch' 2>/dev/null; then
	echo "PyTorch not installed: run scripts/install-torch.sh" >&2
	exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -o "$work/trainbench" ./bench/train)

"$work/trainbench" -rounds "$rounds" -warmup "${WARMUP:-1}" -T "${SEQ:-512}" -rank "${RANK:-8}" -dir "$work" -recompute="${RECOMPUTE:-0}" \
	-peer "env OPENBLAS_CORETYPE=Cooperlake $py $here/torch_peer.py"
