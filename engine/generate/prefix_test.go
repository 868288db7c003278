package generate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
)

// alone generates each request on its own in a batcher that shares no
// prefixes: what a request gets with nothing to reuse.
func alone(t *testing.T, m *model.Model, req Request, n int) []Result {
	t.Helper()
	b := NewBatcher(m, BatcherOptions{MaxTokens: 24, NoPrefixSharing: true})
	defer b.Close()
	res, err := b.Generate(context.Background(), req, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// sameBits fails unless got and want sampled the same tokens with the same
// logprobs, to the bit.
func sameBits(t *testing.T, what string, got, want []Result) {
	t.Helper()
	for k := range want {
		g, w := got[k], want[k]
		if !slices.Equal(g.IDs(), w.IDs()) || g.FinishReason != w.FinishReason {
			t.Fatalf("%s sample %d: %v (%s) reusing a prefix, %v (%s) alone", what, k, g.IDs(), g.FinishReason, w.IDs(), w.FinishReason)
		}
		for i := range g.Tokens {
			if g.Tokens[i].Logprob != w.Tokens[i].Logprob {
				t.Fatalf("%s sample %d token %d: logprob %v reusing a prefix, %v alone", what, k, i, g.Tokens[i].Logprob, w.Tokens[i].Logprob)
			}
			for j := range w.Tokens[i].Top {
				if g.Tokens[i].Top[j] != w.Tokens[i].Top[j] {
					t.Fatalf("%s sample %d token %d: top logprob %d differs", what, k, i, j)
				}
			}
		}
	}
}

// Ensure a prompt that starts with what another sequence holds reuses its
// keys and values and samples the bits it samples alone: six rollouts of
// one scenario sent at once as separate requests (some with the same
// prompt, one with n = 2) prefill their shared 150 tokens once, the
// second and third turns of a conversation reuse the whole history from
// the kept cache of the turn before, and a request reuses only what was
// computed with its own adapter. Run in 32-, 16- and 4-bit weights (the
// 16-bit ones take the 8-row group kernels), under every ART_MATMUL_UNIT.
func TestBatcher_SharesPrefixes(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
		t.Run(dt.String(), func(t *testing.T) { testSharesPrefixes(t, tinyModelDType(t, dt)) })
	}
	t.Run("q4", func(t *testing.T) { testSharesPrefixes(t, tinyArch(t, "qwen2", 4, kernels.BF16, model.Q4)) })
}

func testSharesPrefixes(t *testing.T, m *model.Model) {
	b := NewBatcher(m, BatcherOptions{MaxTokens: 24, KeepPrefixes: 1 << 30})
	defer b.Close()
	ctx := context.Background()
	scenario := prompt(150, 1)
	reqs := make([]Request, 6)
	for i := range reqs {
		p := slices.Clone(scenario)
		if i >= 3 { // the others end differently
			p = append(p, prompt(5+i, 40+i)...)
		}
		reqs[i] = Request{Prompt: p, MaxTokens: 12, Sampling: SamplingParams{Temperature: 1, TopLogprobs: 2}, Seed: uint64(10 * i)}
	}
	got := make([][]Result, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Generate(ctx, r, 1+i%4/3, nil) // request 3 has n = 2
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = res
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	reused := 0
	for i, r := range reqs {
		sameBits(t, fmt.Sprintf("rollout %d", i), got[i], alone(t, m, r, len(got[i])))
		if c := got[i][0].CachedTokens; c > 0 {
			reused++
			if c < model.ForkBlock || c >= len(r.Prompt) {
				t.Fatalf("rollout %d reused %d of its %d prompt tokens", i, c, len(r.Prompt))
			}
		}
	}
	if reused < len(reqs)-1 {
		t.Fatalf("%d of %d rollouts of one scenario reused its prefill; want all but the first", reused, len(reqs))
	}

	// A conversation: each turn's prompt is the last one, its answer and
	// a new message.
	turn := Request{Prompt: prompt(100, 7), MaxTokens: 20, Sampling: SamplingParams{Temperature: 1}, Seed: 3}
	for k := range 3 {
		res, err := b.Generate(ctx, turn, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("turn %d", k), res, alone(t, m, turn, 1))
		if k > 0 && res[0].CachedTokens != len(turn.Prompt)-9 { // all but the message and the last answer's last token
			t.Fatalf("turn %d reused %d of %d prompt tokens; want %d", k, res[0].CachedTokens, len(turn.Prompt), len(turn.Prompt)-9)
		}
		turn.Prompt = append(append(slices.Clone(turn.Prompt), res[0].IDs()...), prompt(8, 20+k)...)
		turn.Seed++
	}
	if kept := b.KeptPrefixBytes(); kept <= 0 {
		t.Fatalf("kept %d bytes of finished generations", kept)
	}

	// Another adapter's keys and values differ: nothing is reused.
	ad, err := lora.New(m.Config, lora.Config{Rank: 4, Alpha: 8}, 9)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range ad.Params() { // B = 0 would leave the model as it is
		if p == 0 {
			ad.Params()[i] = float32(i%7-3) * 0.05
		}
	}
	ad2 := ad.Clone()
	ad2.Params()[0] += 0.5
	for i, want := range []struct {
		adapter *lora.Adapter
		reuse   bool
	}{{ad, false}, {ad2, false}, {ad, true}} {
		r := reqs[0]
		r.Adapter, r.Seed = want.adapter, uint64(i)
		res, err := b.Generate(ctx, r, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if (res[0].CachedTokens > 0) != want.reuse {
			t.Fatalf("adapter request %d reused %d tokens; want reuse %v", i, res[0].CachedTokens, want.reuse)
		}
		sameBits(t, fmt.Sprintf("adapter request %d", i), res, alone(t, m, r, 1))
	}
	// An adapter no longer served: its kept keys and values go.
	b.ForgetPrefixes(ad)
	r := reqs[0]
	r.Adapter = ad
	if res, err := b.Generate(ctx, r, 1, nil); err != nil || res[0].CachedTokens != 0 {
		t.Fatalf("after ForgetPrefixes: reused %d tokens computed with the forgotten adapter (%v)", res[0].CachedTokens, err)
	}
}

// Ensure kept prefixes stay within their byte budget and their count,
// the least recently used going first, and a request waiting for another's prefill still
// samples its own bits when that request is cancelled.
func TestBatcher_PrefixBudgetAndCancel(t *testing.T) {
	m := tinyModel(t)
	ctx := context.Background()
	conv := func(seed int) Request {
		return Request{Prompt: prompt(100, seed), MaxTokens: 10, Sampling: SamplingParams{Temperature: 1}, Seed: uint64(seed)}
	}
	next := func(r Request, res []Result) Request {
		r.Prompt = append(append(slices.Clone(r.Prompt), res[0].IDs()...), prompt(5, 99)...)
		return r
	}
	run := func(b *Batcher, r Request) []Result {
		t.Helper()
		res, err := b.Generate(ctx, r, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	probe := NewBatcher(m, BatcherOptions{KeepPrefixes: 1 << 30})
	run(probe, conv(1))
	one := probe.KeptPrefixBytes()
	probe.Close()

	b := NewBatcher(m, BatcherOptions{KeepPrefixes: one * 3 / 2})
	defer b.Close()
	first, second := conv(1), conv(2)
	r1, r2 := run(b, first), run(b, second)
	if kept := b.KeptPrefixBytes(); kept > one*3/2 || kept <= 0 {
		t.Fatalf("kept %d bytes within a budget of %d", kept, one*3/2)
	}
	if res := run(b, next(second, r2)); res[0].CachedTokens == 0 {
		t.Fatal("the most recent conversation's next turn reused nothing")
	}
	if res := run(b, next(first, r1)); res[0].CachedTokens != 0 {
		t.Fatalf("the least recently used conversation was not dropped: its next turn reused %d tokens", res[0].CachedTokens)
	}

	// At most four entries per sequence slot are kept, whatever their
	// bytes.
	few := NewBatcher(m, BatcherOptions{MaxSequences: 1, KeepPrefixes: 1 << 30})
	defer few.Close()
	var convs []Request
	var answers [][]Result
	for i := range 6 {
		convs = append(convs, conv(10+i))
		answers = append(answers, run(few, convs[i]))
	}
	if res := run(few, next(convs[5], answers[5])); res[0].CachedTokens == 0 {
		t.Fatal("the most recent of six conversations' next turn reused nothing")
	}
	if res := run(few, next(convs[0], answers[0])); res[0].CachedTokens != 0 {
		t.Fatalf("six conversations are kept with one sequence slot: the oldest one's next turn reused %d tokens", res[0].CachedTokens)
	}

	// The leader of a shared prompt is cancelled while another waits for
	// its prefill (a 1500-token prompt takes 375 passes of 4 tokens, some
	// 50 ms: the waits below are short enough for the follower to come
	// while the leader prefills, and whenever it comes it must sample its
	// own bits).
	b2 := NewBatcher(m, BatcherOptions{MaxTokens: 4})
	defer b2.Close()
	long := Request{Prompt: prompt(1500, 5), MaxTokens: 8, Sampling: SamplingParams{Temperature: 1}, Seed: 1}
	lctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b2.Generate(lctx, long, 1, nil) // cancelled: its error is expected
	}()
	follower := long
	follower.Seed = 2
	done := make(chan []Result, 1)
	time.Sleep(5 * time.Millisecond)
	go func() {
		res, err := b2.Generate(ctx, follower, 1, nil)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	time.Sleep(5 * time.Millisecond)
	cancel()
	wg.Wait()
	res := <-done
	if t.Failed() {
		return
	}
	sameBits(t, "after its leader was cancelled", res, alone(t, m, follower, 1))
}

// Ensure models whose sliding layers keep only their window reuse
// prefixes to the same bits: rollouts of one prompt at once, then a
// conversation's turns (the tiny shapes slide 11 keys).
func TestBatcher_SlidingWindowSharesPrefixes(t *testing.T) {
	for _, arch := range []string{"mistral", "gemma3"} {
		t.Run(arch, func(t *testing.T) { testSharesPrefixes(t, tinyArch(t, arch, 5, kernels.F32, model.NoQuantization)) })
	}
}
