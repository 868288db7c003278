package model

import "fmt"

// KVCache holds one sequence's keys and values (after RoPE) for every layer.
// Rows [0, Len) are filled; the capacity is fixed at creation.
type KVCache struct {
	K, V [][]float32 // per layer, (Cap, KV)
	Len  int
	Cap  int
}

// NewKVCache allocates a cache for up to capacity tokens of m.
func (m *Model) NewKVCache(capacity int) *KVCache {
	L, KV := m.Config.NumLayers, m.Config.KVDim()
	c := &KVCache{K: make([][]float32, L), V: make([][]float32, L), Cap: capacity}
	for l := 0; l < L; l++ {
		c.K[l] = make([]float32, capacity*KV)
		c.V[l] = make([]float32, capacity*KV)
	}
	return c
}

// Truncate drops cached tokens beyond n (to reuse a shared prefix).
func (c *KVCache) Truncate(n int) error {
	if n < 0 || n > c.Len {
		return fmt.Errorf("model: truncate cache of %d tokens to %d", c.Len, n)
	}
	c.Len = n
	return nil
}

// CopyPrefix copies the first n cached tokens of src into c (replacing its
// content), so several samples of one prompt prefill it only once.
func (c *KVCache) CopyPrefix(src *KVCache, n int) error {
	if n > src.Len || n > c.Cap || len(c.K) != len(src.K) {
		return fmt.Errorf("model: copy %d cached tokens from a cache of %d into one of capacity %d", n, src.Len, c.Cap)
	}
	kv := len(src.K[0]) / src.Cap
	for l := range c.K {
		copy(c.K[l][:n*kv], src.K[l][:n*kv])
		copy(c.V[l][:n*kv], src.V[l][:n*kv])
	}
	c.Len = n
	return nil
}
