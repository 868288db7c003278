//go:build !amd64 || purego

package fmapeak

func unit() string { return goUnit }

func run(n int) float64 { return runGo(n) }
