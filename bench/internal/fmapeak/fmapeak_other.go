//go:build !amd64 || purego

package fmapeak

func unit() string { return goUnit }

func run(n int) float64 { return runGo(n) }

func runBF16(n int) (float64, bool) { return 0, false }

func runInt8(n int) (float64, bool) { return 0, false }
