//go:build !amd64 || purego

package kernels

func hasI8() bool { return false }

func i8Asm(x *q8Acts, m, mr int, pk *panels, p, np, K int, c []float32, ldc int) bool { return false }

func quantActsRow(q []int8, d []float32, corr []int32, x []float32) int { return 0 }

func pairRowsDone(dst, a, b []float32) int { return 0 }

func q4ToQ8Done(dst []int8, src []byte, rows int) int { return 0 }
