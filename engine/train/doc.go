// Package train turns scored trajectories into LoRA updates: GRPO group
// advantages, tokenisation that splices in the exact sampled token ids,
// CISPO/PPO losses, AdamW, checkpoints with optimizer state, and SFT.
//
// It follows OpenPipe ART's pipeline (see the project's
// reference/art-behaviour.md §3) and departs from it where ART loses work:
// a step with nothing to train is reported, never silent, and the optimizer
// state is saved with every checkpoint so a resumed run continues exactly.
//
// The package sees trajectories in engine terms (JSON messages plus sampled
// token ids); the SDK's types are converted by backend/local.
package train
