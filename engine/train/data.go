package train

import "encoding/json"

// Sampled is an assistant turn the policy generated: its exact token ids and
// the log probability of each under the sampling policy (NaN when unknown,
// which counts as on-policy).
type Sampled struct {
	TokenIDs []int
	Logprobs []float64
	// LearnEnd also trains the template token that closes the turn (such
	// as <|im_end|>). SFT sets it: its turns are text encoded without the
	// end token, while a sampled turn already holds the stop token it drew.
	LearnEnd bool
	// Policy names the weights that sampled the turn (the host's
	// "name@step"; empty when unknown); see Config.Policy.
	Policy string
	// TemplateKwargs are the chat_template_kwargs the turn's prompt was
	// rendered with, when they differ from the Tokenizer's own (nil: its
	// own); Tokenize renders the prompt the turn trains after with them.
	TemplateKwargs map[string]any
}

// Turn is one message of a history. Message is the OpenAI-format message
// object; Sampled is set for trainable assistant turns.
type Turn struct {
	Message json.RawMessage
	Sampled *Sampled
}

// History is one token sequence's worth of conversation.
type History struct {
	Turns []Turn
	Tools []json.RawMessage
}

// Trajectory is one rollout: its main history plus any additional ones
// (sub-agents, compacted contexts), all sharing its reward.
type Trajectory struct {
	Histories []History
	Reward    float64
	// Name identifies the trajectory in warnings (e.g. "group 3 trajectory 1").
	Name string
}

// Group is a set of trajectories for the same scenario whose rewards are
// compared with each other.
type Group struct {
	Trajectories []Trajectory
}
