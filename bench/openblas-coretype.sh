# openblas-coretype.sh is sourced by the benchmark scripts whose peer runs on
# Debian's OpenBLAS 0.3.21, which misdetects recent CPUs (it fell back to
# SSE3 kernels on an AMD EPYC with AVX-512) and so would make the peer look
# slower than it is. openblas_coretype prints the best OpenBLAS kernel set
# for this CPU's instruction set, read from /proc/cpuinfo, for
# OPENBLAS_CORETYPE on the peer's command alone (never in tests or CI).
openblas_coretype() {
	local flags vendor
	flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
	vendor=$(grep -m1 '^vendor_id' /proc/cpuinfo | cut -d: -f2 | xargs)
	case "$flags" in
	*" avx512_bf16 "*) echo COOPERLAKE ;;
	*" avx512f "*" avx512bw "* | *" avx512bw "*" avx512f "*) echo SKYLAKEX ;;
	*" avx2 "*) if [ "$vendor" = AuthenticAMD ]; then echo ZEN; else echo HASWELL; fi ;;
	*) echo "" ;; # let OpenBLAS detect
	esac
}
