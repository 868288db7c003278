package generate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
)

func mustNext(t testing.TB, s *Sampler, logits []float32, limit int) Sample {
	t.Helper()
	smp, err := s.Next(logits, limit)
	if err != nil {
		t.Fatal(err)
	}
	return smp
}

// cycle is a small real constraint: the tokens must follow a fixed cycle of
// allowed sets (the k-th token from sets[k % len(sets)]).
type cycle struct {
	sets     [][]int
	accepted []int
}

func (c *cycle) set() []int         { return c.sets[len(c.accepted)%len(c.sets)] }
func (c *cycle) Allows(id int) bool { return slices.Contains(c.set(), id) }
func (c *cycle) FillMask(mask []uint64) {
	clear(mask)
	for _, id := range c.set() {
		if id/64 < len(mask) {
			mask[id/64] |= 1 << (id % 64)
		}
	}
}
func (c *cycle) Accept(id int) error {
	if !c.Allows(id) {
		return fmt.Errorf("token %d not in %v", id, c.set())
	}
	c.accepted = append(c.accepted, id)
	return nil
}

// Ensure constrained sampling draws from the model's distribution restricted
// to the allowed tokens (p(a)/p(A)), for the plain path that tries the
// unconstrained draw first and for the top-k path that always masks, and
// that logprobs stay those of the raw distribution.
func TestSampler_ConstrainedDistribution(t *testing.T) {
	// p ∝ 1, 2, 3, 4, 5, 6 over ids 0..5; allowed {1, 4, 5}: 2/13, 5/13, 6/13.
	logits := make([]float32, 6)
	var z float64
	for i := range logits {
		logits[i] = float32(math.Log(float64(i + 1)))
		z += float64(i + 1)
	}
	allowed := []int{1, 4, 5}
	all := map[int]float64{1: 2.0 / 13, 4: 5.0 / 13, 5: 6.0 / 13}
	// Top-k and top-p apply after the mask, as in vLLM: top-2 of the
	// allowed tokens keeps 4 and 5.
	top2 := map[int]float64{1: 0, 4: 5.0 / 11, 5: 6.0 / 11}
	for _, tc := range []struct {
		p    SamplingParams
		want map[int]float64
	}{
		{SamplingParams{Temperature: 1}, all},
		{SamplingParams{Temperature: 1, TopK: 5}, all},
		{SamplingParams{Temperature: 1, TopP: 0.9999}, all},
		{SamplingParams{Temperature: 1, TopK: 2}, top2},
		{SamplingParams{Temperature: 1, TopP: 0.8}, top2}, // 6/13 < 0.8 <= 11/13
	} {
		p := tc.p
		t.Run(fmt.Sprintf("%+v", p), func(t *testing.T) {
			s, err := NewSampler(p, 3)
			if err != nil {
				t.Fatal(err)
			}
			c := &cycle{sets: [][]int{allowed}}
			s.Constrain(c)
			const n = 30000
			counts := map[int]int{}
			for range n {
				smp := mustNext(t, s, logits, 0)
				counts[smp.ID]++
				if want := math.Log(float64(smp.ID+1) / z); math.Abs(smp.Logprob-want) > 1e-5 {
					t.Fatalf("token %d logprob %v, want the raw %v", smp.ID, smp.Logprob, want)
				}
			}
			if len(c.accepted) != n {
				t.Fatalf("constraint saw %d tokens, want %d", len(c.accepted), n)
			}
			for _, id := range allowed {
				want := tc.want[id]
				got := float64(counts[id]) / n
				if math.Abs(got-want) > 4*math.Sqrt(want*(1-want)/n)+1e-9 {
					t.Errorf("P(%d) = %.4f, want %.4f", id, got, want)
				}
			}
			if total := counts[1] + counts[4] + counts[5]; total != n {
				t.Errorf("%d of %d draws were disallowed tokens", n-total, n)
			}
		})
	}
}

// Ensure greedy constrained decoding takes the most likely allowed token,
// and a constraint that allows nothing fails with ErrNoAllowedToken.
func TestSampler_ConstrainedGreedyAndDeadEnd(t *testing.T) {
	logits := []float32{5, 1, 4, 3, 2}
	s, _ := NewSampler(SamplingParams{}, 1)
	s.Constrain(&cycle{sets: [][]int{{1, 3}, {0}, {}}})
	if got := mustNext(t, s, logits, 0).ID; got != 3 {
		t.Fatalf("greedy under {1,3}: %d, want 3", got)
	}
	if got := mustNext(t, s, logits, 0).ID; got != 0 {
		t.Fatalf("greedy under {0}: %d, want 0", got)
	}
	if _, err := s.Next(logits, 0); !errors.Is(err, ErrNoAllowedToken) {
		t.Fatalf("empty allowed set: err %v, want ErrNoAllowedToken", err)
	}
	// Padding rows (ids >= limit) are never allowed.
	s2, _ := NewSampler(SamplingParams{Temperature: 1}, 1)
	s2.Constrain(&cycle{sets: [][]int{{4}}})
	if _, err := s2.Next(logits, 4); !errors.Is(err, ErrNoAllowedToken) {
		t.Fatalf("only a padding id allowed: err %v, want ErrNoAllowedToken", err)
	}
}

// Ensure constrained generation follows the constraint in both the single
// and the batched generator, gives the same tokens in both (batch
// invariance holds with masks too), and that a dead end fails the request
// with a clear error instead of hanging.
func TestBatcher_Constrained(t *testing.T) {
	m := tinyModel(t)
	b := NewBatcher(m, BatcherOptions{MaxTokens: 16, MaxSequences: 8})
	defer b.Close()
	ctx := context.Background()
	sets := [][]int{{10, 11, 12}, {20, 21}, {30, 31, 32, 33}, {7, 40}}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			temp := float64(i % 2)
			req := Request{Prompt: prompt(4+i, i), MaxTokens: 9, Sampling: SamplingParams{Temperature: temp, TopK: i % 3 * 5},
				Seed: uint64(i), StopTokenIDs: []int{7}, NewConstraint: func() Constraint { return &cycle{sets: sets} }}
			got, err := b.Generate(ctx, req, 2, nil)
			if err != nil {
				t.Error(err)
				return
			}
			for k, res := range got {
				for j, id := range res.IDs() {
					if !slices.Contains(sets[j%len(sets)], id) {
						t.Errorf("request %d sample %d token %d: %d not in %v", i, k, j, id, sets[j%len(sets)])
					}
				}
				r := req
				r.Seed += uint64(k)
				want, err := Generate(ctx, m, r)
				if err != nil {
					t.Error(err)
					return
				}
				if !slices.Equal(res.IDs(), want.IDs()) {
					t.Errorf("request %d sample %d: batched %v, single %v", i, k, res.IDs(), want.IDs())
				}
			}
		}()
	}
	wg.Wait()
	dead := Request{Prompt: prompt(5, 1), MaxTokens: 5, Sampling: SamplingParams{Temperature: 1},
		NewConstraint: func() Constraint { return &cycle{sets: [][]int{{1}, {}}} }}
	if _, err := b.Generate(ctx, dead, 1, nil); !errors.Is(err, ErrNoAllowedToken) {
		t.Fatalf("batched dead end: %v", err)
	}
	if _, err := Generate(ctx, m, dead); !errors.Is(err, ErrNoAllowedToken) {
		t.Fatalf("single dead end: %v", err)
	}
}
