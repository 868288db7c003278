package art

import (
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
)

// DatasetBatch is the slice of a dataset used at one training step.
type DatasetBatch[T any] struct {
	Items     []T // groupsPerStep items (fewer at the end of an epoch)
	Step      int // global step, counted from 0 across epochs
	Epoch     int // epoch, from 0
	EpochStep int // step within the epoch, from 0
}

// DatasetSteps returns the number of steps IterateDataset yields from step 0
// for a dataset of n items: ceil(n/groupsPerStep) per epoch.
func DatasetSteps(n, groupsPerStep, epochs int) int {
	if n <= 0 || groupsPerStep <= 0 || epochs <= 0 {
		return 0
	}
	return (n + groupsPerStep - 1) / groupsPerStep * epochs
}

// IterateDataset returns the batches of epochs passes over items,
// groupsPerStep items per step, starting at initialStep, as ART's
// iterate_dataset does. Each epoch visits every item once, in an order
// shuffled deterministically from (seed, epoch); the last batch of an epoch
// may be short.
//
// The sequence is resumable: starting at initialStep yields exactly the
// batches from that step on of the sequence that starts at 0. A training
// loop that stores its step (see TrainableModel.Step) resumes where it
// stopped with no other bookkeeping. initialStep past the end yields
// nothing. The shuffle is defined by this package (a Fisher-Yates shuffle
// over math/rand/v2's PCG), so the order does not change with Go releases.
//
// Batches hold fresh slices; the items themselves are not copied.
func IterateDataset[T any](items []T, groupsPerStep, epochs, initialStep int, seed int64) (iter.Seq[DatasetBatch[T]], error) {
	switch {
	case len(items) == 0:
		return nil, errors.New("art: iterate dataset: no items")
	case groupsPerStep < 1:
		return nil, fmt.Errorf("art: iterate dataset: groupsPerStep = %d: must be >= 1", groupsPerStep)
	case epochs < 1:
		return nil, fmt.Errorf("art: iterate dataset: epochs = %d: must be >= 1", epochs)
	case initialStep < 0:
		return nil, fmt.Errorf("art: iterate dataset: initialStep = %d: must be >= 0", initialStep)
	}
	n := len(items)
	perEpoch := (n + groupsPerStep - 1) / groupsPerStep
	return func(yield func(DatasetBatch[T]) bool) {
		for epoch := initialStep / perEpoch; epoch < epochs; epoch++ {
			order := shuffledIndices(n, seed, epoch)
			for es := 0; es < perEpoch; es++ {
				step := epoch*perEpoch + es
				if step < initialStep {
					continue
				}
				idx := order[es*groupsPerStep : min((es+1)*groupsPerStep, n)]
				batch := DatasetBatch[T]{Items: make([]T, len(idx)), Step: step, Epoch: epoch, EpochStep: es}
				for i, j := range idx {
					batch.Items[i] = items[j]
				}
				if !yield(batch) {
					return
				}
			}
		}
	}, nil
}

// shuffledIndices returns a permutation of [0, n) determined by seed and
// epoch.
func shuffledIndices(n int, seed int64, epoch int) []int {
	src := rand.NewPCG(uint64(seed), uint64(epoch))
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := int(uniform(src, uint64(i+1)))
		idx[i], idx[j] = idx[j], idx[i]
	}
	return idx
}

// uniform returns a uniformly distributed number in [0, n) by rejection
// sampling, so that the result depends only on the PCG output stream.
func uniform(src *rand.PCG, n uint64) uint64 {
	threshold := -n % n // (2^64 - n) mod n: values below it would bias the modulo
	for {
		if x := src.Uint64(); x >= threshold {
			return x % n
		}
	}
}
