package train

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
)

// Trainer updates a LoRA adapter on a frozen model. It is not safe for
// concurrent use; the backend serialises steps.
type Trainer struct {
	Model     *model.Model
	Adapter   *lora.Adapter
	Opt       *AdamW
	Tokenizer *Tokenizer
	Log       *slog.Logger // nil: slog.Default()

	// TrainBase makes SFTStep also train every base weight (embedding and
	// LM head, norms, projections) as FullSFT does, clipped jointly with
	// the adapter's gradients; the adapter may then be nil. The model's
	// matrices must be F32. This optimizer state is not checkpointed.
	TrainBase bool

	// RecomputeActivations keeps only each layer's input during the
	// forward pass and recomputes the rest layer by layer in the backward
	// pass (model.NewRecomputeActs): far less memory for long sequences,
	// about a third more compute, the same gradients.
	RecomputeActivations bool

	acts *model.Acts
	base *baseOptimizer // with TrainBase, made by the first SFTStep
}

// StepResult reports one training step.
type StepResult struct {
	// Trained is false when nothing in the step could train (all groups
	// had equal rewards, or nothing was sampled); Reason says why.
	Trained  bool
	Reason   string
	Metrics  map[string]float64
	Warnings []string
}

// ensureActs makes tr.acts hold sequences of maxT tokens.
func (tr *Trainer) ensureActs(maxT int) {
	if tr.acts != nil && tr.acts.Cap() >= maxT {
		return
	}
	if tr.RecomputeActivations {
		tr.acts = tr.Model.NewRecomputeActs(maxT)
	} else {
		tr.acts = tr.Model.NewActs(maxT)
	}
}

func (tr *Trainer) logger() *slog.Logger {
	if tr.Log != nil {
		return tr.Log
	}
	return slog.Default()
}

// Prepare computes advantages and tokenises the groups: it returns the
// sequences that train, each with its advantage and token weight, plus
// warnings (dropped over-long sequences) and counts for the metrics.
func (tr *Trainer) Prepare(groups []Group, c Config) (seqs []Sequence, st PrepareStats, err error) {
	st.Groups = len(groups)
	traj := 0
	tokensPerTraj := map[int]int{}
	for gi, g := range groups {
		st.Trajectories += len(g.Trajectories)
		if len(g.Trajectories) == 0 {
			continue
		}
		rewards := make([]float64, len(g.Trajectories))
		for i, t := range g.Trajectories {
			if !finite64(t.Reward) {
				return nil, st, fmt.Errorf("train: group %d trajectory %d has reward %v", gi, i, t.Reward)
			}
			rewards[i] = t.Reward
		}
		if distinct(rewards) > 1 {
			st.TrainableGroups++
		}
		adv := groupAdvantages(rewards, c.ScaleRewards)
		for ti, t := range g.Trajectories {
			id := traj
			traj++
			if adv[ti] == 0 {
				continue // ART drops zero-advantage trajectories
			}
			name := t.Name
			if name == "" {
				name = fmt.Sprintf("group %d trajectory %d", gi, ti)
			}
			for hi, h := range t.Histories {
				hseqs, err := tr.Tokenizer.Tokenize(h)
				if err != nil {
					return nil, st, fmt.Errorf("train: %s history %d: %w", name, hi, err)
				}
				for _, seq := range hseqs {
					if len(seq.Tokens) > c.MaxSeqLen {
						w := fmt.Sprintf("dropped %s history %d: %d tokens exceed max_seq_len %d", name, hi, len(seq.Tokens), c.MaxSeqLen)
						st.Warnings = append(st.Warnings, w)
						tr.logger().Warn("train: " + w)
						continue
					}
					seq.Advantage = balance(adv[ti], c.AdvantageBalance)
					seq.Traj = id
					seq.Name = fmt.Sprintf("%s history %d", name, hi)
					tokensPerTraj[id] += seq.NumSampled()
					seqs = append(seqs, seq)
				}
			}
		}
	}
	// Each trajectory counts equally whatever its length: weight 1/n over
	// its n sampled tokens, renormalised to mean 1 over all sampled tokens.
	total := 0
	for _, n := range tokensPerTraj {
		total += n
	}
	if total == 0 {
		return nil, st, nil
	}
	numTraj := float64(len(tokensPerTraj))
	for i := range seqs {
		seqs[i].Weight = float64(total) / (numTraj * float64(tokensPerTraj[seqs[i].Traj]))
	}
	// Normalise so the weighted mean |A| over sampled tokens is 1.
	var sumAW float64
	for _, s := range seqs {
		sumAW += math.Abs(s.Advantage) * s.Weight * float64(s.NumSampled())
	}
	if meanAW := sumAW / float64(total); c.NormalizeAdvantages && meanAW > 0 {
		for i := range seqs {
			seqs[i].Advantage /= meanAW
		}
	}
	st.SampledTokens = total
	return seqs, st, nil
}

// PrepareStats counts what Prepare saw.
type PrepareStats struct {
	Groups, TrainableGroups, Trajectories, SampledTokens int
	Warnings                                             []string
}

func distinct(v []float64) int {
	s := slices.Clone(v)
	slices.Sort(s)
	return len(slices.Compact(s))
}

// Step runs one training step over groups: prepare, then one optimizer
// update per GradAccumulationSequences sequences, in a shuffled order fixed
// by c.Seed and step. klRef is the reference policy of KL shaping
// (c.KLPenaltyCoef > 0): an adapter such as an earlier checkpoint's, or nil
// for the base model (adapter off); it is only read. progress (may be nil)
// is called after each sequence.
//
// Before each optimizer update the step checks that the losses, entropies
// and gradient norm since the last one are finite, and that the update
// leaves every adapter weight and optimizer moment finite; otherwise it
// fails with a *NonFiniteError (a learning rate so large that the update
// overflows gives one).
//
// On any error (cancellation included) the adapter and optimizer are put
// back as they were before the call, from a Snapshot taken once there is
// something to train.
func (tr *Trainer) Step(ctx context.Context, groups []Group, c Config, step int, klRef model.Adapter, progress func(done, total int)) (res StepResult, err error) {
	if err := c.Validate(); err != nil {
		return StepResult{}, err
	}
	start := time.Now()
	seqs, st, err := tr.Prepare(groups, c)
	if err != nil {
		return StepResult{}, err
	}
	res = StepResult{Warnings: st.Warnings, Metrics: map[string]float64{
		"data/step_num_groups_submitted": float64(st.Groups),
		"data/step_num_groups_trainable": float64(st.TrainableGroups),
		"data/step_num_trajectories":     float64(st.Trajectories),
		"loss/learning_rate":             c.LearningRate,
	}}
	if len(seqs) == 0 {
		res.Reason = "no trainable data: every group had equal rewards or no sampled turns"
		if st.Trajectories == 0 {
			res.Reason = "no trajectories"
		}
		res.Metrics["data/step_num_gradient_steps"] = 0
		res.Metrics["data/step_trainer_tokens"] = 0
		return res, nil
	}
	saved := tr.Snapshot()
	defer func() {
		if err != nil {
			tr.Restore(saved)
		}
	}()
	rng := rand.New(rand.NewPCG(c.Seed, uint64(step)))
	rng.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
	maxT := 0
	for _, s := range seqs {
		maxT = max(maxT, len(s.Tokens))
	}
	tr.ensureActs(maxT)
	var onPolicy logprobDiff
	if c.PrecalculateLogprobs {
		if err := tr.precalculate(ctx, seqs); err != nil {
			return res, err
		}
		for i := range seqs {
			s := &seqs[i]
			_, _, lps := sampledRows(s)
			onPolicy.add(s, c.Policy, lps, sampledOrig(s))
		}
	}
	var shaping [][]float64
	if c.KLPenaltyCoef > 0 {
		var klMean float64
		if shaping, klMean, err = tr.klShaping(ctx, seqs, c, klRef); err != nil {
			return res, err
		}
		res.Metrics["loss/kl_policy_ref"] = klMean
	}
	var sumLoss, sumEntropy, sumNorm float64
	var entropyTokens, tokens, gradSteps int
	tr.Adapter.ZeroGrad()
	pending := 0
	for i := range seqs {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("train: step interrupted: %w", err)
		}
		s := &seqs[i]
		var shape []float64
		if shaping != nil {
			shape = shaping[i]
		}
		loss, ent, lps, err := tr.sequenceGrad(s, c, shape)
		if err != nil {
			return res, err
		}
		if !finite64(loss) || !finite64(ent) {
			e := &NonFiniteError{What: "loss", Value: loss, LearningRate: c.LearningRate, Updates: gradSteps, Where: s.Name}
			if finite64(loss) {
				e.What, e.Value = "entropy", ent
			}
			return res, e
		}
		n := len(lps)
		if gradSteps == 0 && !c.PrecalculateLogprobs {
			// Still the starting weights: the ones the policy sampled with.
			_, _, old := sampledRows(s)
			onPolicy.add(s, c.Policy, lps, old)
		}
		sumLoss += loss
		sumEntropy += ent
		entropyTokens += n
		tokens += len(s.Tokens)
		pending++
		if pending == c.GradAccumulationSequences || i == len(seqs)-1 {
			norm := clipGradNorm(c.MaxGradNorm, tr.Adapter.Grads())
			if !finite64(norm) {
				return res, &NonFiniteError{What: "gradient norm", Value: norm, LearningRate: c.LearningRate, Updates: gradSteps}
			}
			if !tr.Opt.finite(tr.Adapter.Params(), tr.Adapter.Grads(), c.LearningRate, tr.Opt.WeightDecay) {
				return res, &NonFiniteError{What: "LoRA weights", Value: norm, LearningRate: c.LearningRate, Updates: gradSteps}
			}
			sumNorm += norm
			tr.Opt.Step(tr.Adapter.Params(), tr.Adapter.Grads(), c.LearningRate)
			tr.Adapter.ZeroGrad()
			gradSteps++
			pending = 0
		}
		if progress != nil {
			progress(i+1, len(seqs))
		}
	}
	elapsed := time.Since(start).Seconds()
	res.Trained = true
	res.Metrics["loss/train"] = sumLoss / float64(len(seqs))
	res.Metrics["loss/entropy"] = sumEntropy / float64(max(entropyTokens, 1))
	res.Metrics["loss/grad_norm"] = sumNorm / float64(gradSteps)
	res.Metrics["data/step_num_gradient_steps"] = float64(gradSteps)
	res.Metrics["data/step_trainer_tokens"] = float64(tokens)
	res.Metrics["time/step_trainer_s"] = elapsed
	res.Metrics["throughput/avg_trainer_tok_per_s"] = float64(tokens) / elapsed
	if onPolicy.n > 0 {
		res.Metrics["loss/rollout_logprob_abs_diff"] = onPolicy.sum / float64(onPolicy.n)
	}
	return res, nil
}

// logprobDiff accumulates |trainer − sampler| over the sampled tokens that
// the step's starting weights sampled (slime's
// train_rollout_logprob_abs_diff): the trainer scores them with the same
// weights, so the mean is 0 exactly when sampler and trainer agree bit for
// bit (true on-policy). The trainer's logprobs are those computed before
// the first optimizer update (or precalculated).
type logprobDiff struct {
	sum float64
	n   int
}

// add compares, for s's sampled tokens in order, the trainer's logprobs
// with the sampler's, counting the tokens sampled by policy (none when
// policy is empty) whose sampler logprob is known.
func (d *logprobDiff) add(s *Sequence, policy string, trainer, sampler []float64) {
	if policy == "" || s.Policy == nil {
		return
	}
	k := 0
	for t, ok := range s.Sampled {
		if !ok {
			continue
		}
		if s.Policy[t] == policy && !math.IsNaN(sampler[k]) {
			d.sum += math.Abs(trainer[k] - sampler[k])
			d.n++
		}
		k++
	}
}

// sequenceGrad accumulates one sequence's loss gradient into the adapter.
// It returns the row loss, the summed entropy and the trainer's logprobs
// of the sampled tokens (before this sequence's update).
func (tr *Trainer) sequenceGrad(s *Sequence, c Config, klShaping []float64) (loss, entropy float64, lps []float64, err error) {
	m, a := tr.Model, tr.acts
	if _, err := m.TrainForward(a, s.Tokens, tr.Adapter); err != nil {
		return 0, 0, nil, fmt.Errorf("train: %s: %w", s.Name, err)
	}
	rows, targets, old := sampledRows(s)
	orig := sampledOrig(s)
	n := len(rows)
	adv := make([]float64, n)
	for i := range adv {
		adv[i] = s.Advantage
		if klShaping != nil {
			adv[i] += klShaping[i]
		}
	}
	var dlp []float64
	if c.ImportanceSamplingLevel == "token" {
		// One pass: each token's gradient depends on its own logprob only.
		st, dh := m.LMHeadBackward(a, rows, targets, func(i int, logprob, ent float64) (float64, float64) {
			// A one-token call gives that token's term with weight w/1;
			// the row loss is the mean over its n tokens.
			var o []float64
			if orig != nil {
				o = orig[i : i+1]
			}
			l, d := tokenTerms(c, []float64{logprob}, old[i:i+1], o, adv[i:i+1], s.Weight)
			lH, dH := entropyBonus(c, ent, s.Weight)
			loss += (l + lH) / float64(n)
			return d[0] / float64(n), dH / float64(n)
		})
		m.TrainBackward(a, dh, tr.Adapter)
		for _, e := range st.Entropy {
			entropy += e
		}
		return loss, entropy, st.Logprobs, nil
	}
	// Sequence-level ratios need every logprob first.
	st, _ := m.LMHeadBackward(a, rows, targets, nil)
	for _, e := range st.Entropy {
		entropy += e
	}
	loss, dlp = tokenTerms(c, st.Logprobs, old, orig, adv, s.Weight)
	// The bonus is linear in H: the row's is that of its summed entropy.
	lH, dH := entropyBonus(c, entropy, s.Weight)
	loss += lH / float64(n)
	_, dh := m.LMHeadBackward(a, rows, targets, func(i int, _, _ float64) (float64, float64) { return dlp[i], dH / float64(n) })
	m.TrainBackward(a, dh, tr.Adapter)
	return loss, entropy, st.Logprobs, nil
}

// sampledRows lists, for each sampled token t of s, the hidden row t-1 that
// predicts it, the token itself and its sampling-time logprob.
func sampledRows(s *Sequence) (rows, targets []int, old []float64) {
	for t, ok := range s.Sampled {
		if ok {
			rows = append(rows, t-1)
			targets = append(targets, s.Tokens[t])
			old = append(old, s.OldLogprobs[t])
		}
	}
	return rows, targets, old
}

// sampledOrig lists the sampling-time logprobs of s's sampled tokens when
// its OldLogprobs were precalculated, else nil.
func sampledOrig(s *Sequence) []float64 {
	if s.OrigLogprobs == nil {
		return nil
	}
	var orig []float64
	for t, ok := range s.Sampled {
		if ok {
			orig = append(orig, s.OrigLogprobs[t])
		}
	}
	return orig
}

// precalculate replaces each sequence's old logprobs by the trainer's own
// under the current weights, keeping the sampling-time ones in
// OrigLogprobs.
func (tr *Trainer) precalculate(ctx context.Context, seqs []Sequence) error {
	for i := range seqs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train: step interrupted: %w", err)
		}
		s := &seqs[i]
		rows, targets, _ := sampledRows(s)
		if _, err := tr.Model.TrainForward(tr.acts, s.Tokens, tr.Adapter); err != nil {
			return fmt.Errorf("train: precalculate logprobs of %s: %w", s.Name, err)
		}
		st, _ := tr.Model.LMHeadBackward(tr.acts, rows, targets, nil)
		s.OrigLogprobs = slices.Clone(s.OldLogprobs)
		for k, r := range rows {
			s.OldLogprobs[r+1] = st.Logprobs[k]
		}
	}
	return nil
}

// klShaping computes, per sequence and sampled token, coef·(k̄ - k_t) with
// k_t = logπ_source - logπ_ref, and returns k̄, the mean over the step. The
// source is the learner (or, with KLSourceSample, the sampling-time
// logprobs where known); the reference is ref (nil: the base model,
// adapter off).
func (tr *Trainer) klShaping(ctx context.Context, seqs []Sequence, c Config, ref model.Adapter) ([][]float64, float64, error) {
	m, a := tr.Model, tr.acts
	ks := make([][]float64, len(seqs))
	var sum float64
	var n int
	for i := range seqs {
		if err := ctx.Err(); err != nil {
			return nil, 0, fmt.Errorf("train: step interrupted: %w", err)
		}
		s := &seqs[i]
		rows, targets, old := sampledRows(s)
		if orig := sampledOrig(s); orig != nil {
			old = orig // the sampler's, not the precalculated ones
		}
		if _, err := m.TrainForward(a, s.Tokens, tr.Adapter); err != nil {
			return nil, 0, fmt.Errorf("train: KL learner of %s: %w", s.Name, err)
		}
		learner, _ := m.LMHeadBackward(a, rows, targets, nil)
		if _, err := m.TrainForward(a, s.Tokens, ref); err != nil {
			return nil, 0, fmt.Errorf("train: KL reference of %s: %w", s.Name, err)
		}
		refSt, _ := m.LMHeadBackward(a, rows, targets, nil)
		ks[i] = make([]float64, len(rows))
		for t := range rows {
			src := learner.Logprobs[t]
			if c.KLSourceSample && !math.IsNaN(old[t]) {
				src = old[t]
			}
			ks[i][t] = src - refSt.Logprobs[t]
			sum += ks[i][t]
			n++
		}
	}
	mean := sum / float64(max(n, 1))
	for i := range ks {
		for t := range ks[i] {
			ks[i][t] = c.KLPenaltyCoef * (mean - ks[i][t])
		}
	}
	return ks, mean, nil
}
