package native

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/host"
	"github.com/artgo/art/internal/testassets"
)

// openTinyQwen3 serves a tiny random qwen2 model with the real Qwen3
// tokenizer, whose merges let a sampled answer be a split the tokenizer
// would not produce from its text.
func openTinyQwen3(t *testing.T) *Host {
	t.Helper()
	return openTinyWithQwen3Tokenizer(t, "qwen2")
}

// openTinyWithQwen3Tokenizer serves a tiny random model of arch with the
// real Qwen3 tokenizer; arch qwen3 keeps the tokenizer's own (thinking)
// chat template, qwen2 gets Qwen2.5's.
func openTinyWithQwen3Tokenizer(t *testing.T, arch string) *Host {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "base")
	if _, err := initmodel.Write(dir, initmodel.Options{Arch: arch, Shape: "tiny", Tokenizer: testassets.Dir(t, testassets.Qwen3Tokenizer), DType: kernels.F32, Seed: 1, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), Options{BaseModel: dir, Name: "agent", Project: "p", Path: filepath.Join(t.TempDir(), ".art"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Ensure a second turn is prompted with the first answer's exact sampled
// ids (issue #22): through Chat, the prompt of turn 2 equals the trainer's
// sequence for the whole conversation up to turn 2's answer, although the
// first answers are splits the tokenizer would not produce from their text
// (checked, so the test can fail); a training step on these two-turn
// rollouts reads loss/rollout_logprob_abs_diff = 0 exactly. A forgotten
// answer is re-tokenised from its text, and the prompt then differs.
func TestChat_LaterTurnPromptIsTrainersPrefix(t *testing.T) {
	s := openTinyQwen3(t)
	ctx := context.Background()
	first := art.UserMsg("Say something.")
	second := art.UserMsg("And then?")

	// Turn 1: find answers (valid UTF-8, so a client can send them back
	// verbatim) that are non-canonical splits of their text.
	var answers []host.ChatChoice
	for seed := int64(0); seed < 40 && len(answers) < 2; seed++ {
		resp, err := s.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, first), MaxTokens: 8, Seed: &seed}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		ids := make([]int, 0, len(c.Tokens))
		for _, tok := range c.Tokens {
			ids = append(ids, tok.ID)
		}
		if c.FinishReason == "stop" {
			ids = ids[:len(ids)-1]
		}
		if utf8.ValidString(c.Content) && !slices.Equal(s.tok.Encode(c.Content), ids) {
			answers = append(answers, c)
		}
	}
	if len(answers) < 2 {
		t.Fatalf("found %d non-canonical answers in 40 seeds; the test needs 2", len(answers))
	}

	var group art.TrajectoryGroup
	for i, c := range answers {
		seed := int64(100 + i)
		msgs := arttest.RawMessages(t, first, art.AssistantMsg(c.Content), second)
		resp, err := s.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: msgs, MaxTokens: 6, Seed: &seed}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tr := art.Trajectory{Reward: float64(i)}
		tr.AddMessage(first)
		tr.AddChoice(withModel(c, "agent@0"))
		tr.AddMessage(second)
		tr.AddChoice(withModel(resp.Choices[0], "agent@0"))
		group.Trajectories = append(group.Trajectories, tr)

		tgroups, err := convertGroups([]art.TrajectoryGroup{{Trajectories: []art.Trajectory{tr}}}, false)
		if err != nil {
			t.Fatal(err)
		}
		seqs, err := s.prompts.Tokenize(tgroups[0].Trajectories[0].Histories[0])
		if err != nil || len(seqs) != 1 {
			t.Fatalf("trainer tokenize: %d sequences, %v; want 1", len(seqs), err)
		}
		seq := seqs[0]
		prompt := resp.PromptTokenIDs
		if len(prompt) >= len(seq.Tokens) || !slices.Equal(seq.Tokens[:len(prompt)], prompt) {
			t.Fatalf("conversation %d: turn 2's prompt is not the trainer's prefix:\nprompt  %v\ntrainer %v", i, prompt, seq.Tokens)
		}

		// Forgotten: the answer is re-tokenised and the prompt differs.
		remembered := s.answers
		s.answers = newAnswers(DefaultAnswerMemory)
		again, err := s.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: msgs, MaxTokens: 1, Seed: &seed}, nil)
		s.answers = remembered
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(again.PromptTokenIDs, prompt) {
			t.Fatalf("conversation %d: the forgotten answer re-tokenised gives the same prompt; the split tests nothing", i)
		}
	}

	res, err := s.Train(ctx, []art.TrajectoryGroup{group}, art.TrainConfig{LearningRate: 1e-3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := res.Metrics["loss/rollout_logprob_abs_diff"]
	if !ok || d != 0 {
		t.Fatalf("loss/rollout_logprob_abs_diff = %v (reported %v); want exactly 0", d, ok)
	}
}

// Ensure Qwen3 with its own chat template trains on policy (issue #22):
// the template renders the last assistant turn with an empty <think>
// block that the turn's prompt did not have, yet each turn of a two-turn
// conversation through Chat is trained right after the exact prompt the
// server sampled it from, and a training step on such rollouts reads
// loss/rollout_logprob_abs_diff = 0 exactly. Also with the requests'
// chat_template_kwargs enable_thinking=false, whose prompts end in an empty
// <think> block the template drops from earlier turns: the server
// remembers each answer's kwargs, and the trainer trains each turn after
// its own prompt (two sequences per conversation).
func TestChat_Qwen3TemplateTrainsOnPolicy(t *testing.T) {
	ctx := context.Background()
	first, second := art.UserMsg("Say something."), art.UserMsg("And then?")
	for _, c := range []struct {
		name   string
		kwargs map[string]any
		seqs   int
	}{{"default", nil, 1}, {"enable_thinking_false", map[string]any{"enable_thinking": false}, 2}} {
		t.Run(c.name, func(t *testing.T) {
			s := openTinyWithQwen3Tokenizer(t, "qwen3") // at step 0, which samples and trains
			if !strings.Contains(s.prompts.Template.Source(), "<think>") {
				t.Fatal("the model does not use Qwen3's thinking template; the test would test nothing")
			}
			var group art.TrajectoryGroup
			for seed := int64(0); len(group.Trajectories) < 2; seed++ {
				if seed == 40 {
					t.Fatal("40 seeds gave fewer than 2 first answers in valid UTF-8")
				}
				i := len(group.Trajectories)
				one, err := s.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, first), MaxTokens: 6, Seed: &seed, TemplateKwargs: c.kwargs}, nil)
				if err != nil {
					t.Fatal(err)
				}
				a := one.Choices[0]
				if !utf8.ValidString(a.Content) {
					continue // a client could not send it back verbatim
				}
				msgs := arttest.RawMessages(t, first, art.AssistantMsg(a.Content), second)
				two, err := s.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: msgs, MaxTokens: 6, Seed: &seed, TemplateKwargs: c.kwargs}, nil)
				if err != nil {
					t.Fatal(err)
				}
				tr := art.Trajectory{Reward: float64(i)}
				tr.AddMessage(first)
				tr.AddChoice(withModel(a, "agent@0"))
				tr.AddMessage(second)
				tr.AddChoice(withModel(two.Choices[0], "agent@0"))
				group.Trajectories = append(group.Trajectories, tr)

				tgroups, err := convertGroups([]art.TrajectoryGroup{{Trajectories: []art.Trajectory{tr}}}, false)
				if err != nil {
					t.Fatal(err)
				}
				s.answers.templateKwargs(tgroups)
				seqs, err := s.prompts.Tokenize(tgroups[0].Trajectories[0].Histories[0])
				if err != nil || len(seqs) != c.seqs {
					t.Fatalf("trainer tokenize: %d sequences, %v; want %d", len(seqs), err, c.seqs)
				}
				for turn, prompt := range [][]int{one.PromptTokenIDs, two.PromptTokenIDs} {
					if !slices.ContainsFunc(seqs, func(seq train.Sequence) bool {
						n := len(prompt)
						return n < len(seq.Tokens) && slices.Equal(seq.Tokens[:n], prompt) && seq.Sampled[n]
					}) {
						t.Fatalf("conversation %d turn %d: the trainer does not train the answer right after its prompt %v", i, turn+1, prompt)
					}
				}
			}
			res, err := s.Train(ctx, []art.TrajectoryGroup{group}, art.TrainConfig{LearningRate: 1e-3}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := res.Metrics["loss/rollout_logprob_abs_diff"]; !ok || d != 0 {
				t.Fatalf("loss/rollout_logprob_abs_diff = %v (reported %v); want exactly 0", d, ok)
			}
		})
	}
}

func withModel(c host.ChatChoice, model string) art.Choice {
	out := toArtChoice(c)
	out.Model = model
	return out
}

// Ensure the answer memory stays within its bound, forgetting the least
// recently used answers first.
func TestAnswers_BoundedLRU(t *testing.T) {
	choice := func(text string, n int) host.ChatChoice {
		c := host.ChatChoice{Content: text}
		for i := range n {
			c.Tokens = append(c.Tokens, host.Token{ID: i})
		}
		return c
	}
	a := newAnswers(10)
	a.remember(choice("a", 4), nil, "")
	a.remember(choice("b", 4), nil, "")
	if a.lookup(answerKey("a", nil), "") == nil { // a is now the most recent
		t.Fatal("a forgotten too early")
	}
	a.remember(choice("c", 4), nil, "") // 12 > 10: b, the least recently used, goes
	if a.lookup(answerKey("b", nil), "") != nil || a.lookup(answerKey("a", nil), "") == nil || a.lookup(answerKey("c", nil), "") == nil {
		t.Fatalf("after c: b kept or a/c lost (size %d)", a.size)
	}
	a.remember(choice("huge", 11), nil, "") // longer than the memory: not kept
	if a.lookup(answerKey("huge", nil), "") != nil || a.size > 10 {
		t.Fatalf("size %d; want at most 10 and no huge answer", a.size)
	}
	tools := []host.ToolCall{{Name: "f", Arguments: `{"x":1}`}}
	a.remember(host.ChatChoice{Content: "", ToolCalls: tools, Tokens: []host.Token{{ID: 7}}}, nil, "")
	got := a.turns(arttest.RawMessages(t, art.UserMsg("q"), art.Message{Role: "assistant", ToolCalls: []art.ToolCall{{ID: "call_1", Type: "function", Function: art.FunctionCall{Name: "f", Arguments: `{"x":1}`}}}}), "")
	if got[0].Sampled != nil || got[1].Sampled == nil || !slices.Equal(got[1].Sampled.TokenIDs, []int{7}) {
		t.Fatalf("tool-call answer not found by its call: %+v", got)
	}
	if a.size > 10 {
		t.Fatalf("size %d > 10", a.size)
	}
}

// Ensure two trajectories that write the same text with different ids
// each get their own ids back (the later must not replace the earlier:
// the earlier conversation's next turn would be prompted off-policy), that
// a request without a trajectory id gets the most recent, and that the
// memory counts every tokenization it keeps.
func TestAnswers_SameTextPerTrajectory(t *testing.T) {
	choice := func(ids ...int) host.ChatChoice {
		c := host.ChatChoice{Content: "Ada"}
		for _, id := range ids {
			c.Tokens = append(c.Tokens, host.Token{ID: id})
		}
		return c
	}
	a := newAnswers(100)
	a.remember(choice(1, 2), nil, "traj-a")
	a.remember(choice(3), map[string]any{"enable_thinking": false}, "traj-b")
	a.remember(choice(1, 2), nil, "traj-c") // the same ids as traj-a's: kept once
	key := answerKey("Ada", nil)
	for scope, want := range map[string][]int{"traj-a": {1, 2}, "traj-b": {3}, "": {1, 2}, "unknown": {1, 2}} {
		if v := a.lookup(key, scope); v == nil || !slices.Equal(v.ids, want) {
			t.Errorf("lookup for %q = %+v, want ids %v", scope, v, want)
		}
	}
	if a.size != 3 {
		t.Errorf("size %d, want 3 (ids 1 2 and 3)", a.size)
	}
	if kw := a.kwargsOf(key, []int{3}); kw["enable_thinking"] != false {
		t.Errorf("kwargs of ids [3] = %v", kw)
	}
	if kw := a.kwargsOf(key, []int{1, 2}); kw != nil {
		t.Errorf("kwargs of ids [1 2] = %v, want none", kw)
	}
	got := a.turns(arttest.RawMessages(t, art.UserMsg("q"), art.AssistantMsg("Ada")), "traj-b")
	if got[1].Sampled == nil || !slices.Equal(got[1].Sampled.TokenIDs, []int{3}) {
		t.Fatalf("traj-b's turn: %+v", got[1].Sampled)
	}
	a.remember(choice(4), nil, "traj-b") // traj-b writes it again, another way: replaced
	if v := a.lookup(key, "traj-b"); !slices.Equal(v.ids, []int{4}) || a.size != 3 {
		t.Fatalf("after traj-b's second answer: %v, size %d", v.ids, a.size)
	}
}

// Ensure an answer that is not valid UTF-8 is found by the text a client
// sends back for it: what encoding/json wrote and a decoder read, each
// invalid byte as U+FFFD.
func TestAnswers_InvalidUTF8(t *testing.T) {
	raw := "call>\xe6me\xff\xfe: ok"
	a := newAnswers(100)
	a.remember(host.ChatChoice{Content: raw, Tokens: []host.Token{{ID: 5}, {ID: 6}}}, nil, "")
	wire, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var back string
	if err := json.Unmarshal(wire, &back); err != nil {
		t.Fatal(err)
	}
	if back == raw || !utf8.ValidString(back) {
		t.Fatalf("the test needs text JSON changes: %q", back)
	}
	got := a.turns(arttest.RawMessages(t, art.UserMsg("q"), art.AssistantMsg(back)), "")
	if got[1].Sampled == nil || !slices.Equal(got[1].Sampled.TokenIDs, []int{5, 6}) {
		t.Fatalf("answer %q not found by its JSON text %q: %+v", raw, back, got[1].Sampled)
	}
}
