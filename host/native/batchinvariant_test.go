package native

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/host"
)

// Ensure batch invariance (issue #22): a seeded request answered alone and
// the same request amid 7 concurrent others (longer prompts, n > 1, other
// seeds) get the same tokens and the same logprobs, bit for bit. Its
// prompt is longer than the batcher's per-pass budget, so it is prefilled
// in chunks, and the chunks fall differently beside the others; the
// decoding batches it joins vary in size.
func TestChat_BatchInvariant(t *testing.T) {
	s := openTiny(t)
	ctx := context.Background()
	prompt := func(i int) string {
		return strings.Repeat(fmt.Sprintf("request %d, alone or amid others. ", i), 16+3*i)
	}
	seed := int64(11)
	req := host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, art.UserMsg(prompt(0))), MaxTokens: 24, Seed: &seed, TopLogprobs: 3}
	alone, err := s.Chat(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var batched host.ChatResponse
	errs := make([]error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req
			if i != 3 { // the others: their own prompts, seeds and n
				sd := int64(100 + i)
				r = host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, art.UserMsg(prompt(i+1))), N: 1 + i%3, MaxTokens: 16 + i, Seed: &sd}
			}
			resp, err := s.Chat(ctx, r, nil)
			errs[i] = err
			if i == 3 {
				mu.Lock()
				batched = resp
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	a, b := alone.Choices[0].Tokens, batched.Choices[0].Tokens
	if len(a) != len(b) {
		t.Fatalf("%d tokens alone, %d in the batch", len(a), len(b))
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Logprob != b[i].Logprob {
			t.Fatalf("token %d: id %d logprob %v alone, id %d logprob %v in the batch", i, a[i].ID, a[i].Logprob, b[i].ID, b[i].Logprob)
		}
		for j := range a[i].Top {
			if a[i].Top[j].ID != b[i].Top[j].ID || a[i].Top[j].Logprob != b[i].Top[j].Logprob {
				t.Fatalf("token %d top %d differs alone and in the batch", i, j)
			}
		}
	}
}
