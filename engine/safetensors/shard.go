package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/artgo/art/internal/atomicfile"
)

// WriteSharded writes tensors as the weights of the model folder dir (made
// if missing), the way Hugging Face transformers saves them. If the tensor
// data fits in maxShardBytes it is one model.safetensors; otherwise it is
// shards named model-00001-of-0000N.safetensors plus
// model.safetensors.index.json, holding {"metadata": {"total_size": bytes},
// "weight_map": {name: shard}} as indented JSON with sorted keys.
//
// Tensors go into shards greedily in the order given, so tensors given
// together stay together; a tensor larger than maxShardBytes gets a shard of
// its own. Every shard gets metadata. All tensors are checked before
// anything is written; each file is replaced atomically and the index is
// written last. The file of the other layout (model.safetensors or the
// index), if present, is then removed so that [OpenDir] sees the new
// weights; shards of an earlier write that the new index does not name are
// left in place.
func WriteSharded(dir string, tensors []Tensor, metadata map[string]string, maxShardBytes int64) error {
	if maxShardBytes <= 0 {
		return &Error{Path: dir, Err: fmt.Errorf("WriteSharded: maxShardBytes is %d, want > 0", maxShardBytes)}
	}
	if err := checkTensors(dir, tensors); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &Error{Path: dir, Err: err}
	}

	// Plan the shards.
	var shards [][]Tensor
	var cur []Tensor
	var curBytes, total int64
	for _, t := range tensors {
		n := int64(t.size())
		total += n
		if len(cur) > 0 && curBytes+n > maxShardBytes {
			shards = append(shards, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, t)
		curBytes += n
	}
	if len(cur) > 0 || len(shards) == 0 {
		shards = append(shards, cur)
	}

	if len(shards) == 1 {
		if err := WriteFile(filepath.Join(dir, SingleName), shards[0], metadata); err != nil {
			return err
		}
		return removeStale(filepath.Join(dir, IndexName))
	}

	weightMap := make(map[string]string, len(tensors))
	for i, shard := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		if err := WriteFile(filepath.Join(dir, name), shard, metadata); err != nil {
			return err
		}
		for _, t := range shard {
			weightMap[t.Name] = name
		}
	}
	index := struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": total}, weightMap}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(index); err != nil {
		return &Error{Path: dir, Err: err}
	}
	indexPath := filepath.Join(dir, IndexName)
	if err := atomicfile.WriteFile(indexPath, b.Bytes(), fileMode); err != nil {
		return &Error{Path: indexPath, Err: err}
	}
	return removeStale(filepath.Join(dir, SingleName))
}

// removeStale removes path if it exists.
func removeStale(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &Error{Path: path, Err: err}
	}
	return nil
}
