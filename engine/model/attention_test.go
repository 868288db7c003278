package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/artgo/art/internal/parallel"
)

// Ensure a prompt's attention, appended in one pass of many tiles
// (attendTile rows each) after the positions a cache already holds, gives
// the trainer's whole-sequence attention bit for bit, with and without a
// sliding window: the tiles change where the scores live, not a sum.
func TestPromptAttention_TrainerBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	NH, KVH, HD := 14, 2, 64 // Qwen2.5-0.5B's heads
	Q, KV := NH*HD, KVH*HD
	var w attnWork
	for _, c := range []struct{ T, from, window int }{
		{attendTile + 1, 0, 0}, {3*attendTile + 22, 0, 0}, {200, 70, 0}, {130, 5, 0}, {200, 70, 37}, {3*attendTile + 22, 0, attnBlock + 3},
	} {
		t.Run(fmt.Sprintf("T=%d/from=%d/window=%d", c.T, c.from, c.window), func(t *testing.T) {
			q, k, v := randVec(rng, c.T*Q, 1), randVec(rng, c.T*KV, 1), randVec(rng, c.T*KV, 1)
			want := make([]float32, c.T*Q)
			trainAttentionForward(&w, want, q, k, v, c.T, NH, KVH, HD, c.window, -1)
			got := make([]float32, c.T*Q)
			promptAttention(got, q, k, v, c.T, c.from, NH, KVH, HD, c.window)
			for i := c.from * Q; i < c.T*Q; i++ {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("row %d, value %d: %v in a prompt's pass, %v in the trainer's", i/Q, i%Q, got[i], want[i])
				}
			}
		})
	}
}

// promptAttention is the inference attention of rows [from, T) of a
// sequence (q, k, v its (T, ·) rows) in one pass, after a cache that holds
// positions [0, from): as a KV cache's lanes hold them.
func promptAttention(out, q, k, v []float32, T, from, NH, KVH, HD, window int) {
	lanes := lanesOf(k, v, T, KVH, HD)
	Q, n := NH*HD, T-from
	parallel.For(NH, 1, func(lo, hi int) {
		p := make([]float32, min(n, attendTile)*T)
		for h := lo; h < hi; h++ {
			attentionHead(productsFor(1, 1), out[from*Q:], q[from*Q:], lanes[h/(NH/KVH)], from, n, h, NH, HD, p, window)
		}
	})
}
