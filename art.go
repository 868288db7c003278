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
// openai-go client from model.OpenAIClient, records every sampled turn as a
// Choice (it carries the exact token ids and logprobs) and every other
// message as context, and sets a reward:
//
//	func rollout(ctx context.Context, s Scenario) (art.Trajectory, error) {
//		var t art.Trajectory
//		t.AddMessage(art.SystemMsg(s.Prompt))
//		// ... call the model, t.AddChoice(choice), ...
//		t.Reward = score
//		return t, nil
//	}
//
// Training gathers groups of rollouts per scenario, trains on them, and logs
// the results. Starting at the stored step makes the loop resumable:
//
//	start, err := model.Step(ctx)
//	...
//	for step := start; step < steps; step++ {
//		groups, err := art.GatherGroups(ctx, scenarios, 8, rollout, art.GatherOptions{MaxExceptions: 2})
//		...
//		res, err := backend.Train(ctx, model, groups, art.TrainConfig{LearningRate: 1e-5})
//		...
//		if err := model.Log(ctx, groups, res.LogOptions()); err != nil {
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
