package generate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
)

func tinyModel(t testing.TB) *model.Model { return tinyModelDType(t, kernels.F32) }

func tinyModelDType(t testing.TB, dt kernels.DType) *model.Model {
	return tinyArch(t, "qwen2", 4, dt, model.NoQuantization)
}

// tinyArch is a random model of arch's tiny shape, its weights stored as
// dt and then quantized as q.
func tinyArch(t testing.TB, arch string, seed uint64, dt kernels.DType, q model.Quantization) *model.Model {
	t.Helper()
	cfg, err := model.Preset(arch, "tiny", 300)
	if err != nil {
		t.Fatal(err)
	}
	w := model.RandomWeights(cfg, model.InitOptions{Seed: seed, DType: dt, Std: 0.3})
	if err := w.Quantize(q); err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func prompt(n, seed int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = (i*37 + seed*11) % 300
	}
	return p
}

// Ensure batched generation (many concurrent requests, n > 1 sharing a
// prefill, chunked prefill) gives the same tokens as one-at-a-time
// generation with the same seeds, greedy and sampled.
// The 16-bit dtypes take the 8-row kernel for groups of 8 rows.
func TestBatcher_MatchesSingle(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16, kernels.F16} {
		t.Run(dt.String(), func(t *testing.T) { testBatcherMatchesSingle(t, dt) })
	}
}

func testBatcherMatchesSingle(t *testing.T, dt kernels.DType) {
	m := tinyModelDType(t, dt)
	b := NewBatcher(m, BatcherOptions{MaxTokens: 24, MaxSequences: 10})
	defer b.Close()
	ctx := context.Background()
	type call struct {
		req Request
		n   int
	}
	var calls []call
	for i := 0; i < 12; i++ {
		temp := 0.0
		if i%2 == 1 {
			temp = 1
		}
		calls = append(calls, call{Request{Prompt: prompt(5+i*3, i), MaxTokens: 6 + i%4, Sampling: SamplingParams{Temperature: temp, TopLogprobs: 2},
			Seed: uint64(100 + i), StopTokenIDs: []int{7}}, 1 + i%3})
	}
	got := make([][]Result, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Generate(ctx, c.req, c.n, nil)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = res
		}()
	}
	wg.Wait()
	for i, c := range calls {
		for k := 0; k < c.n; k++ {
			r := c.req
			r.Seed += uint64(k)
			want, err := Generate(ctx, m, r)
			if err != nil {
				t.Fatal(err)
			}
			g := got[i][k]
			if !slices.Equal(g.IDs(), want.IDs()) || g.FinishReason != want.FinishReason {
				t.Fatalf("call %d sample %d: batched %v (%s); single %v (%s)", i, k, g.IDs(), g.FinishReason, want.IDs(), want.FinishReason)
			}
			for j := range g.Tokens {
				if d := g.Tokens[j].Logprob - want.Tokens[j].Logprob; d > 1e-4 || d < -1e-4 {
					t.Fatalf("call %d sample %d token %d: logprob %v batched, %v single", i, k, j, g.Tokens[j].Logprob, want.Tokens[j].Logprob)
				}
			}
		}
	}
}

// Ensure streaming callbacks see every token, a callback error aborts only
// its call, cancellation is prompt, and Close fails waiting calls.
func TestBatcher_StreamCancelClose(t *testing.T) {
	m := tinyModel(t)
	b := NewBatcher(m, BatcherOptions{})
	ctx := context.Background()
	req := Request{Prompt: prompt(8, 1), MaxTokens: 10, Sampling: SamplingParams{Temperature: 1}, Seed: 3}
	var seen [2]int
	res, err := b.Generate(ctx, req, 2, func(i int, s Sample) error { seen[i]++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if seen[0] != len(res[0].Tokens) || seen[1] != len(res[1].Tokens) {
		t.Fatalf("streamed %v tokens; results have %d and %d", seen, len(res[0].Tokens), len(res[1].Tokens))
	}
	boom := errors.New("client went away")
	if _, err := b.Generate(ctx, req, 1, func(int, Sample) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v; want the callback's error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	if _, err := b.Generate(cctx, Request{Prompt: prompt(8, 2), MaxTokens: 50, Sampling: SamplingParams{Temperature: 1}}, 1, nil); err == nil {
		t.Fatal("cancelled context: got nil error")
	}
	if time.Since(start) > time.Second {
		t.Fatal("cancellation was not prompt")
	}
	if _, err := b.Generate(ctx, Request{Prompt: prompt(8, 2), MaxTokens: 1 << 20}, 1, nil); err == nil {
		t.Fatal("context overflow: got nil error")
	}
	b.Close()
	if _, err := b.Generate(ctx, req, 1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: got %v; want ErrClosed", err)
	}
}

// Ensure models whose sliding layers keep only their window in the cache
// (model.KVCache) generate the same tokens batched, with n > 1 samples
// forked off one shared prefill, as one at a time, over runs many windows
// and attention blocks long (the tiny shapes slide 11 keys).
func TestBatcher_SlidingWindowMatchesSingle(t *testing.T) {
	for _, arch := range []string{"mistral", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			m := tinyArch(t, arch, 5, kernels.F32, model.NoQuantization)
			b := NewBatcher(m, BatcherOptions{MaxTokens: 32, MaxSequences: 8})
			defer b.Close()
			ctx := context.Background()
			for i, temp := range []float64{0, 1} {
				req := Request{Prompt: prompt(40, i), MaxTokens: 180, Sampling: SamplingParams{Temperature: temp}, Seed: uint64(7 + i)}
				got, err := b.Generate(ctx, req, 3, nil)
				if err != nil {
					t.Fatal(err)
				}
				for k, g := range got {
					r := req
					r.Seed += uint64(k)
					want, err := Generate(ctx, m, r)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(g.IDs(), want.IDs()) || len(want.Tokens) != 180 {
						t.Fatalf("temperature %v sample %d: batched %v; single %v", temp, k, g.IDs(), want.IDs())
					}
				}
			}
		})
	}
}
