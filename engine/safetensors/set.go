package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// The file names of a Hugging Face model folder.
const (
	SingleName = "model.safetensors"            // the weights in one file
	IndexName  = "model.safetensors.index.json" // the weight_map of a sharded folder
)

// Set is the weights of a model folder: one file or several shards, seen as
// one collection of uniquely named tensors. A Set is safe for concurrent
// use.
type Set struct {
	dir   string
	files []*File          // sorted by path
	owner map[string]*File // tensor name → the file holding it
	names []string         // sorted
	meta  map[string]string
}

// OpenDir opens the weights of the model folder dir. Like transformers, it
// takes model.safetensors if present and otherwise
// model.safetensors.index.json, whose weight_map names the shard holding
// each tensor.
//
// For a sharded folder every shard is opened and validated, and the index
// must agree with the shards exactly: a shard that is missing or not a
// plain relative path, a tensor absent from the shard its entry names, and
// a tensor in a shard that the weight_map does not map to that shard are
// all errors. The index's "metadata" (total_size) is not checked.
func OpenDir(dir string) (*Set, error) {
	single := filepath.Join(dir, SingleName)
	switch st, err := os.Stat(single); {
	case err == nil && !st.IsDir():
		f, err := Open(single)
		if err != nil {
			return nil, err
		}
		return newSet(dir, []*File{f}), nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, &Error{Path: single, Err: err}
	}

	index := filepath.Join(dir, IndexName)
	weightMap, err := readIndex(index)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{Path: dir, Err: fmt.Errorf("no %s or %s: %w", SingleName, IndexName, fs.ErrNotExist)}
	}
	if err != nil {
		return nil, err
	}

	// The tensors of each shard, in name order; "./a" and "a" are one shard.
	byShard := make(map[string][]string)
	for _, name := range slices.Sorted(maps.Keys(weightMap)) {
		shard := filepath.Clean(filepath.FromSlash(weightMap[name]))
		weightMap[name] = shard
		byShard[shard] = append(byShard[shard], name)
	}
	var files []*File
	fail := func(err error) (*Set, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	for _, shard := range slices.Sorted(maps.Keys(byShard)) {
		first := byShard[shard][0]
		if !filepath.IsLocal(shard) {
			return fail(formatErr(index, first, "shard %q is not a file inside the folder", clip(shard)))
		}
		f, err := Open(filepath.Join(dir, shard))
		if errors.Is(err, fs.ErrNotExist) {
			return fail(&Error{Path: index, Tensor: first, Err: fmt.Errorf("shard %q: %w", shard, errors.Unwrap(err))})
		}
		if err != nil {
			return fail(err) // names the shard, and the tensor if one is at fault
		}
		files = append(files, f)
		for _, name := range byShard[shard] {
			if _, ok := f.tensors[name]; !ok {
				return fail(formatErr(f.path, name, "missing, though %s maps it to this shard", IndexName))
			}
		}
		for _, name := range f.names {
			if weightMap[name] != shard {
				return fail(formatErr(f.path, name, "%s does not map it to this shard", IndexName))
			}
		}
	}
	return newSet(dir, files), nil
}

func newSet(dir string, files []*File) *Set {
	s := &Set{dir: dir, files: files, owner: make(map[string]*File)}
	for _, f := range files {
		for _, name := range f.names {
			s.owner[name] = f
			s.names = append(s.names, name)
		}
		for k, v := range f.meta {
			if s.meta == nil {
				s.meta = make(map[string]string)
			}
			if _, ok := s.meta[k]; !ok {
				s.meta[k] = v
			}
		}
	}
	slices.Sort(s.names)
	return s
}

// readIndex reads the weight_map of a model.safetensors.index.json.
func readIndex(path string) (map[string]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	if st.Size() > maxHeaderSize {
		return nil, formatErr(path, "", "%d bytes, over the limit of %d", st.Size(), maxHeaderSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	var weightMap map[string]string
	err = decodeObject(data, func(key string, val json.RawMessage) error {
		if key != "weight_map" {
			return nil
		}
		weightMap = make(map[string]string)
		err := decodeObject(val, func(name string, val json.RawMessage) error {
			shard, ok := jsonString(val)
			if !ok {
				return formatErr(path, name, "weight_map value %s is not a file name", clip(string(val)))
			}
			weightMap[name] = shard
			return nil
		})
		var dup *dupKeyError
		switch {
		case errors.As(err, &dup):
			return formatErr(path, dup.key, "listed twice in the weight_map")
		case errors.Is(err, errNotObject):
			return formatErr(path, "", "weight_map is not a JSON object")
		}
		return err
	})
	var dup *dupKeyError
	var own *Error
	switch {
	case errors.As(err, &own):
		return nil, err
	case errors.As(err, &dup):
		return nil, formatErr(path, "", "key %q given twice", clip(dup.key))
	case errors.Is(err, errNotObject):
		return nil, formatErr(path, "", "not a JSON object")
	case err != nil:
		return nil, formatErr(path, "", "invalid JSON: %v", jsonErrText(err))
	case weightMap == nil:
		return nil, formatErr(path, "", "no weight_map")
	}
	if _, ok := weightMap[""]; ok {
		return nil, formatErr(path, "", "weight_map lists a tensor with an empty name")
	}
	return weightMap, nil
}

// Close closes every file of the set and returns the first error.
func (s *Set) Close() error {
	var errs []error
	for _, f := range s.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Files returns the paths of the set's files in sorted order.
func (s *Set) Files() []string {
	paths := make([]string, len(s.files))
	for i, f := range s.files {
		paths[i] = f.path
	}
	return paths
}

// Names returns the tensor names of all files in sorted order. The caller
// may modify the returned slice.
func (s *Set) Names() []string { return slices.Clone(s.names) }

// Info describes tensor name; ok is false if there is no such tensor.
func (s *Set) Info(name string) (TensorInfo, bool) {
	f, ok := s.owner[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Info(name)
}

// Metadata returns the union of the files' "__metadata__" (typically
// {"format": "pt"}), the first file in sorted order winning a conflict; nil
// if none has any.
func (s *Set) Metadata() map[string]string {
	return maps.Clone(s.meta)
}

// ReadRaw is [File.ReadRaw] on the file holding name.
func (s *Set) ReadRaw(name string) ([]byte, error) {
	f, err := s.file(name)
	if err != nil {
		return nil, err
	}
	return f.ReadRaw(name)
}

// ReadInto is [File.ReadInto] on the file holding name.
func (s *Set) ReadInto(name string, dst []byte) error {
	f, err := s.file(name)
	if err != nil {
		return err
	}
	return f.ReadInto(name, dst)
}

// ReadF32 is [File.ReadF32] on the file holding name.
func (s *Set) ReadF32(name string) ([]float32, error) {
	f, err := s.file(name)
	if err != nil {
		return nil, err
	}
	return f.ReadF32(name)
}

// ReadF32Into is [File.ReadF32Into] on the file holding name.
func (s *Set) ReadF32Into(name string, dst []float32) error {
	f, err := s.file(name)
	if err != nil {
		return err
	}
	return f.ReadF32Into(name, dst)
}

// ReadU16 is [File.ReadU16] on the file holding name.
func (s *Set) ReadU16(name string) ([]uint16, error) {
	f, err := s.file(name)
	if err != nil {
		return nil, err
	}
	return f.ReadU16(name)
}

func (s *Set) file(name string) (*File, error) {
	f, ok := s.owner[name]
	if !ok {
		return nil, notFound(s.dir, name)
	}
	return f, nil
}
