package model

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
)

func cpuSecs() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkTrainAttention compares the block-causal training attention with
// the full-matrix references on the Qwen2.5-0.5B shape (14 query heads, 2
// kv heads of 64), forward and backward.
func BenchmarkTrainAttention(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	NH, KVH, HD := 14, 2, 64
	Q, KV := NH*HD, KVH*HD
	for _, T := range []int{128, 512} {
		q, k, v := randVec(rng, T*Q, 1), randVec(rng, T*KV, 1), randVec(rng, T*KV, 1)
		dout, out := randVec(rng, T*Q, 1), make([]float32, T*Q)
		dq, dk, dv := make([]float32, T*Q), make([]float32, T*KV), make([]float32, T*KV)
		var w attnWork
		b.Run(fmt.Sprintf("T=%d/forward/blocks", T), func(b *testing.B) {
			c0 := cpuSecs()
			defer func() { b.ReportMetric((cpuSecs()-c0)*1e3/float64(b.N), "cpu-ms/op") }()
			for b.Loop() {
				trainAttentionForward(&w, out, q, k, v, T, NH, KVH, HD, 0, -1)
			}
		})
		b.Run(fmt.Sprintf("T=%d/forward/full", T), func(b *testing.B) {
			c0 := cpuSecs()
			defer func() { b.ReportMetric((cpuSecs()-c0)*1e3/float64(b.N), "cpu-ms/op") }()
			for b.Loop() {
				attentionForwardRef(out, q, k, v, T, NH, KVH, HD)
			}
		})
		b.Run(fmt.Sprintf("T=%d/backward/blocks", T), func(b *testing.B) {
			c0 := cpuSecs()
			defer func() { b.ReportMetric((cpuSecs()-c0)*1e3/float64(b.N), "cpu-ms/op") }()
			for b.Loop() {
				trainAttentionBackward(&w, dq, dk, dv, dout, q, k, v, T, NH, KVH, HD, 0, -1)
			}
		})
		b.Run(fmt.Sprintf("T=%d/backward/full", T), func(b *testing.B) {
			c0 := cpuSecs()
			defer func() { b.ReportMetric((cpuSecs()-c0)*1e3/float64(b.N), "cpu-ms/op") }()
			for b.Loop() {
				attentionBackwardRef(dq, dk, dv, dout, q, k, v, T, NH, KVH, HD)
			}
		})
	}
}
