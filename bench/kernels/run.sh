#!/usr/bin/env bash
# Side-by-side benchmark: engine/kernels.Linear (pure Go + Go assembly)
# against OpenBLAS cblas_sgemm, on the same shapes, 1 and 2 threads,
# interleaved rounds, medians. Prints a markdown table (for BENCHMARKS.md).
#
#   bench/kernels/run.sh [rounds]        (default 5 rounds)
#
# Environment: MINTIME (seconds per shape and run, default 0.5), COLD_MB
# (shapes with M <= 16 cycle through weight copies of at least this many MB
# so the weights come from DRAM, as when decoding a model larger than L3;
# default 400), THREADS (default "1 2"), SHAPES (M×K×N list), WAIT_IDLE
# (seconds to wait before each round for the machine to be < 20% busy,
# default 60), CPU_CLOCK=1
# (time 1-thread runs of both sides by thread CPU time, which leaves out the
# time a busy host gives to other processes; 2-thread runs stay wall-clock).
#
# OpenBLAS is the peer only: it is built here as a small C program with gcc,
# and OPENBLAS_CORETYPE is set on its command alone to the best kernel set for
# this CPU (bench/openblas-coretype.sh: Debian's OpenBLAS 0.3.21 misdetects
# recent CPUs otherwise). The Go build has no cgo.
set -euo pipefail
# One benchmark at a time on this machine: two runs started in the same idle
# window would measure each other.
if command -v flock >/dev/null; then
	exec 9>"${TMPDIR:-/tmp}/art-bench.lock"
	flock 9
fi

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# The peer is fp32 sgemm, so our side runs exact fp32 products unless the
# caller asks for the bf16 unit (ART_MATMUL_UNIT=bf16: then the peak printed
# is that unit's, and the ratio compares bf16 products with fp32 sgemm).
export ART_MATMUL_UNIT=${ART_MATMUL_UNIT:-fp32}
source "$root/bench/openblas-coretype.sh"
coretype=$(openblas_coretype)
rounds=${1:-5}
mintime=${MINTIME:-0.5}
cold=${COLD_MB:-400}
threads=${THREADS:-"1 2"}
shapes=${SHAPES:-"512x896x4864 512x4864x896 1024x1024x1024 8x896x4864 1x896x151936"}
cpuclock=${CPU_CLOCK:-0}
wait_idle=${WAIT_IDLE:-60}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. The peer: Debian's OpenBLAS and a C compiler.
if ! [ -e /usr/include/x86_64-linux-gnu/cblas.h ] && ! [ -e /usr/include/cblas.h ]; then
	echo "installing libopenblas-dev ..." >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq libopenblas-dev gcc >&2
fi
gcc -O2 -o "$work/obench" "$here/openblas/obench.c" -I/usr/include/x86_64-linux-gnu -lopenblas

# 2. Our side.
(cd "$root" && CGO_ENABLED=0 go build -o "$work/gobench" ./bench/kernels)

# 3. Is the machine idle? Busy share of all CPUs over 2 s from /proc/stat.
busy() {
	read -r _ u1 n1 s1 i1 w1 q1 sq1 st1 _ </proc/stat
	sleep 2
	read -r _ u2 n2 s2 i2 w2 q2 sq2 st2 _ </proc/stat
	local b=$(((u2 - u1) + (n2 - n1) + (s2 - s1) + (q2 - q1) + (sq2 - sq1) + (st2 - st1)))
	local t=$((b + (i2 - i1) + (w2 - w1)))
	echo $((100 * b / (t > 0 ? t : 1)))
}
pct=$(busy)
pct0=$pct
if [ "$pct" -ge 20 ]; then
	echo "warning: machine is ${pct}% busy before the run (load: $(cut -d' ' -f1-3 /proc/loadavg)); results will be noisy" >&2
else
	echo "machine idle check: ${pct}% busy" >&2
fi

# 4. Interleaved rounds: read bandwidth, FMA peak, Go, then OpenBLAS, for each thread
# count.
res="$work/results.txt"
noisy=0
for r in $(seq 1 "$rounds"); do
	# Wait (up to WAIT_IDLE seconds) for the other tenants to go quiet.
	waited=0
	while p=$(busy) && [ "$p" -ge 20 ] && [ "$waited" -lt "$wait_idle" ]; do
		waited=$((waited + 2))
	done
	if [ "$p" -ge 20 ]; then
		noisy=$((noisy + 1))
		echo "round $r: machine still ${p}% busy after ${waited}s; running anyway" >&2
	fi
	for t in $threads; do
		echo "round $r/$rounds, $t thread(s) ..." >&2
		GOMAXPROCS=$t "$work/gobench" bw -t "$t" >>"$res"
		GOMAXPROCS=$t "$work/gobench" peak -t "$t" >>"$res"
		cc=0
		[ "$t" = 1 ] && cc=$cpuclock
		GOMAXPROCS=$t "$work/gobench" run -t "$t" -dtype f32,bf16 -mintime "${mintime}s" -cold "$cold" -cpuclock="$([ "$cc" = 1 ] && echo true || echo false)" $shapes >>"$res"
		OPENBLAS_CORETYPE=$coretype OPENBLAS_NUM_THREADS=$t \
			"$work/obench" -t "$t" -mintime "$mintime" -cold "$cold" -cpuclock "$cc" $shapes >>"$res"
	done
done
pct=$(busy)
[ "$pct" -ge 20 ] && echo "warning: machine was ${pct}% busy after the run" >&2

# 5. Report.
echo
clockNote="wall-clock"
[ "$cpuclock" = 1 ] && clockNote="1-thread columns timed by thread CPU time, 2-thread by wall clock"
echo "Linear (C = A·Wᵀ, W [N×K] pre-packed) vs OpenBLAS cblas_sgemm (RowMajor, NoTrans, Trans), $(date -u +%Y-%m-%dT%H:%MZ), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, load before/after ${pct0}%/${pct}% busy, ${noisy} of ${rounds} rounds started on a busy machine; OpenBLAS OPENBLAS_CORETYPE=${coretype:-auto}; ${clockNote}; shapes with M ≤ 16 use ${cold} MB of weight copies (DRAM)."
echo
"$work/gobench" report "$res"
if [ -n "${KEEP_RESULTS:-}" ]; then
	cp "$res" "$KEEP_RESULTS"
fi
