// Package art is the SDK of ART for Go, an Agent Reinforcement Trainer: it
// trains the LLM behind an agent with reinforcement learning (GRPO on a LoRA
// adapter) from the agent's own rollouts, as OpenPipe ART does in Python.
//
// # The loop
//
// A TrainableModel names a base model and a LoRA configuration. Registering
// it with a Backend (backend/local runs the engine in this process,
// backend/remote talks to `art serve`) serves its latest checkpoint on an
// OpenAI-compatible endpoint as "name@step":
//
//	model := &art.TrainableModel{
//		Model:     art.Model{Name: "agent-001", Project: "tic-tac-toe"},
//		BaseModel: "/models/Qwen2.5-0.5B-Instruct",
//	}
//	if err := model.Register(ctx, backend); err != nil {
//		return err
//	}
//
// A rollout is an ordinary function that plays one episode with the stock
// openai-go client from model.OpenAIClient. Its trajectory is the history:
// context messages are added with AddMessage, and Chat sends the history to
// the model and appends the sampled turn, a Choice that carries the exact
// token ids and logprobs that training needs. The rollout sets a reward:
//
//	func rollout(ctx context.Context, s Scenario) (art.Trajectory, error) {
//		var t art.Trajectory
//		t.AddMessage(art.SystemMsg(s.Prompt), art.UserMsg(s.Question))
//		choice, err := t.Chat(ctx, client, openai.ChatCompletionNewParams{Model: model.InferenceName(-1)})
//		if err != nil {
//			return t, err
//		}
//		t.Reward = score(s, choice.Message.Content.String())
//		return t, nil
//	}
//
// Tool results are one line each, t.AddMessage(art.ToolMsg(call.ID, result)),
// and the tools offered are the trajectory's Tools, sent with every Chat.
//
// Training gathers a group of rollouts per scenario (GatherGroups) and trains
// on them (TrainableModel.Train), which also logs the step and serves the new
// checkpoint. Starting at the stored step makes the loop resumable:
//
//	start, err := model.Step(ctx)
//	...
//	for step := start; step < steps; step++ {
//		groups, err := art.GatherGroups(ctx, scenarios, 8, rollout, art.GatherOptions{MaxExceptions: 2})
//		...
//		if _, err := model.Train(ctx, groups, art.TrainConfig{LearningRate: 1e-5}); err != nil {
//			return err
//		}
//	}
//
// IterateDataset walks a dataset in shuffled, resumable batches. A plain
// Model (a prompted model behind any OpenAI-compatible API) runs the same
// rollouts and logs to the same project for comparison.
//
// # Data
//
// Messages, choices, trajectories and groups encode to JSON in OpenAI's wire
// shape with ART's field names, so they round-trip losslessly and read like
// ART's. Logs go under .art/<project>/models/<name>/ (see package store):
// trajectories as parquet, metrics as history.jsonl.
package art
