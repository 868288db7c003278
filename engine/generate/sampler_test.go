package generate

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestSampler_GreedyAndLogprob(t *testing.T) {
	s, err := NewSampler(SamplingParams{TopLogprobs: 3}, 1)
	if err != nil {
		t.Fatal(err)
	}
	logits := []float32{0.5, 2, -1, 2, 1.5}
	got, _ := s.Next(logits, 0)
	if got.ID != 1 {
		t.Fatalf("greedy id %d; want 1 (first of the tied maxima)", got.ID)
	}
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v))
	}
	// The exponentials are float32 (summed in float64), as in the trainer's
	// log-softmax: a few ulp of float32 off the float64 value.
	if want := 2 - math.Log(z); math.Abs(got.Logprob-want) > 1e-6 {
		t.Fatalf("logprob %v; want %v", got.Logprob, want)
	}
	wantTop := []int{1, 3, 4}
	for i, tl := range got.Top {
		if tl.ID != wantTop[i] {
			t.Fatalf("top[%d] = %d; want %d", i, tl.ID, wantTop[i])
		}
	}
}

// Ensure a seed fixes the samples and top-k / top-p restrict the support.
func TestSampler_SeedTopKTopP(t *testing.T) {
	logits := make([]float32, 50)
	for i := range logits {
		logits[i] = float32(i%7) * 0.3
	}
	draw := func(p SamplingParams, seed uint64, n int) []int {
		s, err := NewSampler(p, seed)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int, n)
		for i := range out {
			out[i] = mustNext(t, s, logits, 0).ID
		}
		return out
	}
	a := draw(SamplingParams{Temperature: 1}, 42, 200)
	b := draw(SamplingParams{Temperature: 1}, 42, 200)
	c := draw(SamplingParams{Temperature: 1}, 43, 200)
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed differs at %d", i)
		}
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("different seeds gave identical samples")
	}
	// top-k 3: only the three highest logits (value 1.8 at i%7==6: ids 6, 13, 20 — lowest indices win ties)
	for _, id := range draw(SamplingParams{Temperature: 1, TopK: 3}, 7, 300) {
		if id != 6 && id != 13 && id != 20 {
			t.Fatalf("top-k 3 sampled %d", id)
		}
	}
	// top-p tiny: only the single most likely token
	for _, id := range draw(SamplingParams{Temperature: 1, TopP: 0.01}, 7, 100) {
		if id != 6 {
			t.Fatalf("top-p 0.01 sampled %d; want 6", id)
		}
	}
}

// Ensure temperature-1 sampling follows the softmax distribution.
func TestSampler_Distribution(t *testing.T) {
	logits := []float32{0, float32(math.Log(3))} // p = 0.25, 0.75
	s, _ := NewSampler(SamplingParams{Temperature: 1}, 9)
	const n = 20000
	ones := 0
	for i := 0; i < n; i++ {
		ones += mustNext(t, s, logits, 0).ID
	}
	if f := float64(ones) / n; math.Abs(f-0.75) > 0.015 {
		t.Fatalf("frequency of token 1 = %.3f; want 0.75±0.015", f)
	}
}

func TestSamplingParams_Validate(t *testing.T) {
	bad := []SamplingParams{{Temperature: -1}, {TopP: 1.5}, {TopK: -2}, {TopLogprobs: 21}, {Temperature: math.NaN()}}
	for _, p := range bad {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v: got nil error", p)
		}
	}
}

// Ensure ids at or beyond the limit (vocabulary padding) are never sampled
// nor listed, while logprobs stay normalised over the whole row.
func TestSampler_VocabLimit(t *testing.T) {
	logits := []float32{0, 1, 0.5, 9, 8}
	for _, temp := range []float64{0, 1} {
		s, _ := NewSampler(SamplingParams{Temperature: temp, TopLogprobs: 3}, 1)
		for i := 0; i < 200; i++ {
			got, _ := s.Next(logits, 3)
			if got.ID >= 3 {
				t.Fatalf("temperature %v: sampled padding id %d", temp, got.ID)
			}
			for _, tl := range got.Top {
				if tl.ID >= 3 {
					t.Fatalf("top logprobs list padding id %d", tl.ID)
				}
			}
		}
	}
	s, _ := NewSampler(SamplingParams{}, 1)
	got, _ := s.Next(logits, 3)
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v))
	}
	if want := 1 - math.Log(z); math.Abs(got.Logprob-want) > 1e-6 {
		t.Fatalf("logprob %v; want %v (normalised over the full row)", got.Logprob, want)
	}
}

// Ensure top-p sampling over a large vocabulary draws exactly from the
// nucleus a full sort gives: every sample inside it, and each of its
// tokens drawn.
func TestSampler_NucleusMatchesFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		topP, temp float64
		spread     float32
	}{{0.9, 1, 3}, {0.5, 0.7, 1}, {0.99, 1.3, 8}, {0.3, 1, 0.01}} {
		logits := make([]float32, 20000)
		for i := range logits {
			logits[i] = tc.spread * float32(rng.NormFloat64())
		}
		logits[17] = logits[5] // a tie
		idx := make([]int, len(logits))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(logits[b], logits[a]) })
		maxv := float64(logits[idx[0]])
		var total float64
		for _, v := range logits {
			total += math.Exp((float64(v) - maxv) / tc.temp)
		}
		nucleus := map[int]bool{}
		var cum float64
		for _, j := range idx {
			nucleus[j] = true
			cum += math.Exp((float64(logits[j]) - maxv) / tc.temp)
			if cum >= tc.topP*total {
				break
			}
		}
		s, err := NewSampler(SamplingParams{Temperature: tc.temp, TopP: tc.topP}, 1)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for range 400 {
			id := mustNext(t, s, logits, 0).ID
			if !nucleus[id] {
				t.Fatalf("top_p %v T %v: sampled %d outside the %d-token nucleus", tc.topP, tc.temp, id, len(nucleus))
			}
			seen[id] = true
		}
		if len(nucleus) <= 5 && len(seen) != len(nucleus) {
			t.Errorf("top_p %v T %v: drew %d of the %d nucleus tokens", tc.topP, tc.temp, len(seen), len(nucleus))
		}
	}
}

// Ensure MatchStop finds a stop string however the sampled text is cut
// into tokens, reports the first of several in the request's order, ignores
// an empty one, and keeps only the end of the text a stop could complete.
func TestStopMatch(t *testing.T) {
	stops := []string{"", "</tool_call>", "END", "ND!"}
	text := strings.Repeat("some long answer text. ", 200) + "and then </tool_call> more"
	for _, piece := range []int{1, 2, 3, 5, 7, 64} {
		var tail []byte
		got, at := "", -1
		for i := 0; i < len(text); i += piece {
			if got = MatchStop(&tail, []byte(text[i:min(i+piece, len(text))]), stops); got != "" {
				at = min(i+piece, len(text))
				break
			}
			if len(tail) > len("</tool_call>")-1 {
				t.Fatalf("pieces of %d: kept %d bytes of text, want at most %d", piece, len(tail), len("</tool_call>")-1)
			}
		}
		want := strings.Index(text, "</tool_call>") + len("</tool_call>")
		if got != "</tool_call>" || at < want || at >= want+piece {
			t.Errorf("pieces of %d: found %q after %d bytes; want </tool_call> within the piece ending it at %d", piece, got, at, want)
		}
	}
	// Both END and ND! end in the same token: the request's order decides.
	var tail []byte
	MatchStop(&tail, []byte("THE E"), stops)
	if got := MatchStop(&tail, []byte("ND!"), stops); got != "END" {
		t.Errorf("END and ND! completed by one token: got %q, want END (listed first)", got)
	}
	tail = nil
	if got := MatchStop(&tail, []byte("no stop here"), []string{""}); got != "" || len(tail) != 0 {
		t.Errorf("an empty stop string matched %q, kept %q", got, tail)
	}
}

// Ensure pickBlocks finds the index pick does (a blocked search over the
// same running sum), on rows with and without a partial last block, for
// draws across the whole mass and past it.
func TestPickBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2))
	for _, n := range []int{1, 63, 64, 65, 1000, 151936} {
		w := make([]float32, n)
		var total float64
		for i := range w {
			if r.IntN(4) > 0 { // zero weights too, as a masked row has
				w[i] = float32(r.Float64())
			}
			total += float64(w[i])
		}
		for k := range 2000 {
			u := total * r.Float64()
			if k == 0 {
				u = total * 1.5 // past the mass: the last index
			}
			if got, want := pickBlocks(w, u), pick(w, u, nil); got != want {
				t.Fatalf("n=%d u=%v: pickBlocks = %d, pick = %d", n, u, got, want)
			}
		}
	}
}
