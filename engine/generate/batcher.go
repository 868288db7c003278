package generate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/parallel"
)

// BatcherOptions size a Batcher's forward passes.
type BatcherOptions struct {
	// MaxTokens bounds the tokens of one forward pass: decoding sequences
	// take one each, prompts are prefilled in chunks with what is left
	// (chunked prefill). 0 means 512.
	MaxTokens int
	// MaxSequences bounds the sequences decoding at once; more wait for a
	// free slot. 0 means 64.
	MaxSequences int
	// NoPrefixSharing turns off reusing another sequence's keys and values
	// for the start of a new prompt (see Batcher).
	NoPrefixSharing bool
	// KeepPrefixes bounds the bytes of keys and values kept from finished
	// generations, so that a later prompt that starts with one (the next
	// turn of a conversation, another rollout of the same scenario) skips
	// prefilling what they share; the least recently used go first. 0
	// keeps none. Kept entries are matched by the identity of
	// Request.Adapter: set it only when an adapter a request used is not
	// changed afterwards (the native host samples from an immutable copy
	// of each checkpoint step's adapter).
	KeepPrefixes int64
}

// Batcher generates for many callers at once with continuous batching:
// one goroutine runs forward passes over every active sequence together,
// sequences join as they arrive and leave as they finish, and the n samples
// of one prompt share its prefill (the prompt's keys and values are computed
// once and read in place by every sample: model.KVCache.Fork).
//
// A new prompt that starts with at least model.ForkBlock tokens another
// sequence of the same adapter holds — one in the batch, or one kept after
// it finished (BatcherOptions.KeepPrefixes) — forks that sequence's cache
// and prefills only the rest, waiting for the other's prefill if it is
// still under way: the rollouts of one scenario, sent as separate
// requests, prefill their prompt once, and each turn of a conversation
// skips its history. Result.CachedTokens says how many were reused.
//
// Sampling is per sequence, seeded, and every row of a forward pass is
// computed alike whatever else is in it, so a sequence's tokens and
// logprobs do not depend on what else is in the batch or which prefix it
// reused, to the bit.
type Batcher struct {
	m      *model.Model
	opt    BatcherOptions
	submit chan *job
	forget chan model.Adapter
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once

	kept      []*keptPrefix // owned by the loop goroutine, most recently used first
	keptSet   model.KVSet   // their caches
	keptBytes atomic.Int64
}

// keptPrefix is the cache of a finished generation, kept to be forked
// from: it holds the keys and values of tokens.
type keptPrefix struct {
	tokens  []int
	cache   *model.KVCache
	adapter model.Adapter
	used    uint64 // the pass it was last matched or kept in
}

// ForgetPrefixes drops the kept keys and values computed with adapter,
// which is no longer served: a kept entry holds its adapter, and the
// adapter's memory is not counted in BatcherOptions.KeepPrefixes.
func (b *Batcher) ForgetPrefixes(adapter model.Adapter) {
	select {
	case b.forget <- adapter:
	case <-b.done:
	}
}

// KeptPrefixBytes is the memory of the finished generations' keys and
// values kept for later prompts (BatcherOptions.KeepPrefixes).
func (b *Batcher) KeptPrefixBytes() int64 { return b.keptBytes.Load() }

// ErrClosed is returned for generations submitted to a closed Batcher.
var ErrClosed = errors.New("generate: batcher closed")

// NewBatcher starts a batcher over m. Close it to stop its goroutine.
func NewBatcher(m *model.Model, opt BatcherOptions) *Batcher {
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = 512
	}
	if opt.MaxSequences <= 0 {
		opt.MaxSequences = 64
	}
	b := &Batcher{m: m, opt: opt, submit: make(chan *job), forget: make(chan model.Adapter), quit: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

// Close stops the batcher; running generations fail with ErrClosed.
func (b *Batcher) Close() {
	b.once.Do(func() { close(b.quit) })
	<-b.done
}

// event is one sampled token of sample i, or the end of the job.
type event struct {
	i   int
	s   Sample
	end bool
	err error
}

// job is one Generate call: n samples of one prompt.
type job struct {
	ctx    context.Context
	req    Request
	n      int
	events chan event // buffered for every token the job can produce
	res    []Result
	left   int // samples not finished
	cached int // prompt tokens whose keys and values were reused
}

// seq is one sequence in the batch: the shared prefill of a job (sample -1)
// or one of its samples.
type seq struct {
	j       *job
	sample  int
	cache   *model.KVCache // nil while waiting for from
	sampler *Sampler
	fed     int    // prompt tokens already in the cache (prefill)
	next    []int  // tokens to feed in the next pass (decode)
	text    []byte // the end of the sampled text a stop string could still complete (MatchStop)
	root    bool   // the sample that decodes in its job's prefill cache

	from  *seq // a prefill waiting until from's cache holds its first share tokens
	share int
}

// Generate samples n completions of req.Prompt (seeds req.Seed, req.Seed+1,
// ...), returning them in order. onToken, if non-nil, sees each token as it
// is sampled, on the caller's goroutine; an error from it aborts the call.
// req.OnToken is ignored.
func (b *Batcher) Generate(ctx context.Context, req Request, n int, onToken func(i int, s Sample) error) ([]Result, error) {
	if err := checkRequest(b.m, req); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("generate: n must be > 0, got %d", n)
	}
	if _, err := NewSampler(req.Sampling, 0); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	j := &job{ctx: ctx, req: req, n: n, left: n, res: make([]Result, n),
		events: make(chan event, n*req.MaxTokens+1)}
	select {
	case b.submit <- j:
	case <-ctx.Done():
		return nil, fmt.Errorf("generate: %w", ctx.Err())
	case <-b.quit:
		return nil, ErrClosed
	}
	for {
		select {
		case ev := <-j.events:
			if ev.end {
				if ev.err != nil {
					return nil, ev.err
				}
				return j.res, nil
			}
			if onToken != nil {
				if err := onToken(ev.i, ev.s); err != nil {
					cancel() // the loop drops the job at its next pass
					return nil, err
				}
			}
		case <-b.done:
			return nil, ErrClosed
		}
	}
}

// checkRequest validates what does not depend on the batch.
func checkRequest(m *model.Model, req Request) error {
	if len(req.Prompt) == 0 {
		return fmt.Errorf("generate: empty prompt")
	}
	if req.MaxTokens <= 0 {
		return fmt.Errorf("generate: max_tokens must be > 0, got %d", req.MaxTokens)
	}
	if len(req.Stop) > 0 && req.TokenBytes == nil {
		return fmt.Errorf("generate: stop strings need a TokenBytes decoder")
	}
	if limit, need := m.Config.MaxPositions, len(req.Prompt)+req.MaxTokens; limit > 0 && need > limit {
		return fmt.Errorf("generate: prompt of %d tokens + max_tokens %d = %d exceeds the model's context length %d", len(req.Prompt), req.MaxTokens, need, limit)
	}
	return nil
}

func (b *Batcher) loop() {
	defer close(b.done)
	var active []*seq // prefills and samples, in arrival order
	var waiting []*job
	var ws model.Workspace
	V, C := b.m.Config.VocabSize, b.m.Config.HiddenSize
	var logits []float32
	var draws []draw
	var pass uint64
	fail := func(j *job, err error) {
		if j.left >= 0 {
			j.left = -1
			j.events <- event{end: true, err: err}
		}
	}
	for {
		// Admit jobs: block when idle, otherwise take what has arrived.
		if len(active) == 0 && len(waiting) == 0 {
			select {
			case j := <-b.submit:
				waiting = append(waiting, j)
			case a := <-b.forget:
				b.dropKept(func(e *keptPrefix) bool { return sameAdapter(e.adapter, a) })
				continue
			case <-b.quit:
				return
			}
		}
	drain:
		for {
			select {
			case j := <-b.submit:
				waiting = append(waiting, j)
			case a := <-b.forget:
				b.dropKept(func(e *keptPrefix) bool { return sameAdapter(e.adapter, a) })
			case <-b.quit:
				for _, s := range active {
					fail(s.j, ErrClosed)
				}
				for _, j := range waiting {
					fail(j, ErrClosed)
				}
				return
			default:
				break drain
			}
		}
		for len(waiting) > 0 && countSamples(active)+waiting[0].n <= b.opt.MaxSequences || len(waiting) > 0 && len(active) == 0 {
			j := waiting[0]
			waiting = waiting[1:]
			active = append(active, b.start(j, active, pass))
		}
		// Drop sequences of cancelled or failed jobs.
		active = slices.DeleteFunc(active, func(s *seq) bool {
			if s.j.left < 0 {
				return true
			}
			if err := s.j.ctx.Err(); err != nil {
				fail(s.j, fmt.Errorf("generate: %w", err))
				return true
			}
			return false
		})
		if len(active) == 0 {
			continue
		}
		pass++
		for _, s := range active {
			if f := s.from; f != nil && (f.cache.Len >= s.share || f.j.left < 0) {
				b.fork(s, f.cache, min(s.share, f.cache.Len))
			}
		}
		// Build the pass: every decoding sequence's next token, then prompt
		// chunks within the token budget.
		var tokens []int
		var segs []model.Segment
		var rows []*seq // sequences that need logits, with their last row
		var rowIdx []int
		budget := b.opt.MaxTokens
		for _, s := range active {
			if s.sample >= 0 && len(s.next) > 0 {
				tokens = append(tokens, s.next...)
				segs = append(segs, model.Segment{Cache: s.cache, N: len(s.next), Adapter: s.j.req.Adapter})
				rows = append(rows, s)
				rowIdx = append(rowIdx, len(tokens)-1)
				budget -= len(s.next)
			}
		}
		for _, s := range active {
			if s.sample >= 0 || s.from != nil || budget <= 0 {
				continue
			}
			p := s.j.req.Prompt
			n := min(budget, len(p)-s.fed)
			tokens = append(tokens, p[s.fed:s.fed+n]...)
			segs = append(segs, model.Segment{Cache: s.cache, N: n, Adapter: s.j.req.Adapter})
			s.fed += n
			budget -= n
			if s.fed == len(p) {
				rows = append(rows, s)
				rowIdx = append(rowIdx, len(tokens)-1)
			}
		}
		if len(tokens) == 0 {
			continue
		}
		hidden, err := b.m.Forward(&ws, tokens, segs)
		if err != nil {
			for _, s := range active {
				fail(s.j, fmt.Errorf("generate: %w", err))
			}
			active = nil
			continue
		}
		// Logits of the rows that sample, in one matmul.
		in := make([]float32, len(rows)*C)
		for k, r := range rowIdx {
			copy(in[k*C:(k+1)*C], hidden[r*C:(r+1)*C])
		}
		logits = slices.Grow(logits[:0], len(rows)*V)[:len(rows)*V]
		b.m.Logits(logits, in, len(rows))
		var forked []*seq
		draws = draws[:0]
		for k, s := range rows {
			row := logits[k*V : (k+1)*V]
			if s.sample < 0 {
				// Prefill done: fork the job's samples off its cache. They
				// read the prompt's keys and values from it in place
				// (KVCache.Fork): one copy for the group, read once per
				// layer in a decoding step.
				j := s.j
				for i := 0; i < j.n; i++ {
					c := s.cache
					if i < j.n-1 {
						var err error
						if c, err = s.cache.Fork(s.cache.Len, s.cache.Cap); err != nil {
							fail(j, fmt.Errorf("generate: %w", err))
							break
						}
					}
					smp, _ := NewSampler(j.req.Sampling, j.req.Seed+uint64(i))
					if j.req.NewConstraint != nil {
						smp.Constrain(j.req.NewConstraint())
					}
					ns := &seq{j: j, sample: i, cache: c, sampler: smp, root: c == s.cache}
					j.res[i].CachedTokens = j.cached
					forked = append(forked, ns)
					draws = append(draws, draw{s: ns, row: row})
				}
				s.j = &job{left: -1} // retire the prefill sequence
				continue
			}
			if s.j.left >= 0 {
				draws = append(draws, draw{s: s, row: row})
			}
		}
		// Each sequence has its own sampler and the rows are only read, so
		// the rows are sampled in parallel (a full-vocabulary softmax each);
		// recording stays in order.
		parallel.For(len(draws), 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				p := &draws[i]
				p.smp, p.err = p.s.sampler.Next(p.row, p.s.j.req.VocabLimit)
			}
		})
		for _, p := range draws {
			if p.err != nil {
				fail(p.s.j, p.err)
				continue
			}
			if p.s.record(p.smp) {
				if p.s.root {
					b.keep(p.s, pass) // before the caller hears of the end
				}
				p.s.j.end()
			}
		}
		active = append(active, forked...)
		active = slices.DeleteFunc(active, func(s *seq) bool { return s.j.left < 0 || (s.sample >= 0 && s.next == nil) })
	}
}

// draw is one sequence's next token, sampled from its row of logits.
type draw struct {
	s   *seq
	row []float32
	smp Sample
	err error
}

// record appends the sequence's sampled token; when the sequence finishes,
// it leaves next nil and returns true (the caller then ends the job).
func (s *seq) record(smp Sample) bool {
	j := s.j
	if j.left < 0 {
		return false
	}
	r := &j.res[s.sample]
	r.Tokens = append(r.Tokens, smp)
	j.events <- event{i: s.sample, s: smp}
	finish := ""
	switch {
	case slices.Contains(j.req.StopTokenIDs, smp.ID):
		finish = FinishStop
	case len(j.req.Stop) > 0:
		if stop := MatchStop(&s.text, j.req.TokenBytes(smp.ID), j.req.Stop); stop != "" {
			finish, r.StopString = FinishStop, stop
		}
	}
	if finish == "" && len(r.Tokens) == j.req.MaxTokens {
		finish = FinishLength
	}
	if finish == "" {
		s.next = []int{smp.ID}
		return false
	}
	r.FinishReason = finish
	s.next = nil
	j.left--
	return true
}

// end ends the job once its last sample has finished.
func (j *job) end() {
	if j.left == 0 {
		j.left = -1
		j.events <- event{end: true}
	}
}

func countSamples(active []*seq) int {
	n := 0
	for _, s := range active {
		if s.sample < 0 {
			n += s.j.n
		} else {
			n++
		}
	}
	return n
}

// start makes the prefill sequence of a new job: it forks the cache of
// whichever sequence of the batch, or kept prefix, shares the longest
// start with its prompt (at least model.ForkBlock tokens, and not the
// prompt's last token, whose logits it needs), or waits for that
// sequence's prefill to reach it.
func (b *Batcher) start(j *job, active []*seq, pass uint64) *seq {
	s := &seq{j: j, sample: -1}
	p := j.req.Prompt
	limit := len(p) - 1
	var from *seq
	var kept *keptPrefix
	best := model.ForkBlock - 1
	if !b.opt.NoPrefixSharing {
		for _, o := range active {
			if o.cache == nil || o.j.left < 0 || !sameAdapter(o.j.req.Adapter, j.req.Adapter) {
				continue
			}
			n := min(o.common(p), limit)
			if o.sample >= 0 {
				n = min(n, o.cache.Len) // its last token is not fed yet
			}
			if n > best {
				best, from = n, o
			}
		}
		for _, e := range b.kept {
			if !sameAdapter(e.adapter, j.req.Adapter) {
				continue
			}
			if n := min(commonPrefix(e.tokens, p), limit); n > best {
				best, from, kept = n, nil, e
			}
		}
	}
	switch {
	case kept != nil:
		kept.used = pass
		b.fork(s, kept.cache, best)
	case from == nil:
		b.fork(s, nil, 0)
	case from.cache.Len >= best:
		b.fork(s, from.cache, best)
	default:
		s.from, s.share = from, best
	}
	return s
}

// fork gives prefill s its cache: a fork of src's first n positions, or a
// new cache when n is 0 or src cannot be forked there (a sliding window
// has moved past them).
func (b *Batcher) fork(s *seq, src *model.KVCache, n int) {
	s.from = nil
	capacity := len(s.j.req.Prompt) + s.j.req.MaxTokens
	if n > 0 {
		if c, err := src.Fork(n, capacity); err == nil {
			s.cache, s.fed, s.j.cached = c, n, n
			return
		}
	}
	s.cache = b.m.NewKVCache(capacity)
}

// common is how many of p's first tokens s holds or will hold: a prefill
// its prompt, a sample its prompt and what it sampled.
func (s *seq) common(p []int) int {
	q := s.j.req.Prompt
	n := commonPrefix(q, p)
	if s.sample < 0 || n < len(q) {
		return n
	}
	for _, t := range s.j.res[s.sample].Tokens {
		if n == len(p) || t.ID != p[n] {
			break
		}
		n++
	}
	return n
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// sameAdapter reports whether a and b are the same adapter: the same
// comparable value (a pointer, as the native host's), or both none.
func sameAdapter(a, b model.Adapter) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// keep keeps a finished job's prefill cache, which its root sample
// decoded into, for later prompts that start with its tokens: it replaces
// a kept entry whose tokens it starts with (the previous turn of the same
// conversation). Then it drops the least recently used entries beyond
// BatcherOptions.KeepPrefixes bytes or four per sequence slot (each new
// prompt is compared with every entry).
func (b *Batcher) keep(s *seq, pass uint64) {
	if b.opt.KeepPrefixes <= 0 {
		return
	}
	c := s.cache
	p := s.j.req.Prompt
	tokens := slices.Grow(slices.Clone(p), c.Len-len(p))
	for _, t := range s.j.res[s.sample].Tokens[:c.Len-len(p)] {
		tokens = append(tokens, t.ID)
	}
	for _, e := range b.kept {
		if sameAdapter(e.adapter, s.j.req.Adapter) && commonPrefix(e.tokens, tokens) == len(tokens) {
			e.used = pass // it holds all of them already
			return
		}
	}
	b.dropKept(func(e *keptPrefix) bool {
		return sameAdapter(e.adapter, s.j.req.Adapter) && commonPrefix(e.tokens, tokens) == len(e.tokens)
	})
	c.Compact()
	b.keptSet.Add(c)
	b.kept = append(b.kept, &keptPrefix{tokens: tokens, cache: c, adapter: s.j.req.Adapter, used: pass})
	slices.SortStableFunc(b.kept, func(x, y *keptPrefix) int { return cmp.Compare(y.used, x.used) })
	for len(b.kept) > 0 && (b.keptSet.Bytes() > b.opt.KeepPrefixes || len(b.kept) > 4*b.opt.MaxSequences) {
		b.keptSet.Remove(b.kept[len(b.kept)-1].cache)
		b.kept = b.kept[:len(b.kept)-1]
	}
	b.keptBytes.Store(b.keptSet.Bytes())
}

// dropKept drops the kept entries that match.
func (b *Batcher) dropKept(match func(*keptPrefix) bool) {
	b.kept = slices.DeleteFunc(b.kept, func(e *keptPrefix) bool {
		if match(e) {
			b.keptSet.Remove(e.cache)
			return true
		}
		return false
	})
	b.keptBytes.Store(b.keptSet.Bytes())
}
