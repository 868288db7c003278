package safetensors

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layerTensors returns n F32 tensors of 4 values each (16 bytes), named
// in model order.
func layerTensors(n int) []Tensor {
	var ts []Tensor
	for i := range n {
		v := float32(i)
		ts = append(ts, FromF32("model.layers."+string(rune('a'+i))+".weight", F32, []int{2, 2}, []float32{v, v + 1, v + 2, v + 3}))
	}
	return ts
}

func mustWriteFile(tb testing.TB, path string, tensors []Tensor) {
	tb.Helper()
	if err := WriteFile(path, tensors, map[string]string{"format": "pt"}); err != nil {
		tb.Fatal(err)
	}
}

func writeIndex(tb testing.TB, dir, content string) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(dir, IndexName), []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// checkSet checks that s holds exactly tensors.
func checkSet(tb testing.TB, s *Set, tensors []Tensor) {
	tb.Helper()
	if got, want := s.Names(), sortedNames(tensors); !slices.Equal(got, want) {
		tb.Fatalf("Names() = %q; want %q", got, want)
	}
	for _, tn := range tensors {
		info, ok := s.Info(tn.Name)
		if !ok || info.DType != tn.DType || !slices.Equal(info.Shape, tn.Shape) {
			tb.Errorf("Info(%q) = %+v, %v", tn.Name, info, ok)
		}
		raw, err := s.ReadRaw(tn.Name)
		if err != nil || !slices.Equal(raw, tn.encoded()) {
			tb.Errorf("ReadRaw(%q) = %v, %v; want %v", tn.Name, raw, err, tn.encoded())
		}
		if _, err := s.ReadF32(tn.Name); err != nil {
			tb.Error(err)
		}
	}
}

// Ensure WriteSharded splits greedily in the given order, writes the HF
// index, and OpenDir reads the shards back as one set.
func TestWriteSharded_OpenDir(t *testing.T) {
	dir := t.TempDir()
	tensors := layerTensors(5) // 16 bytes each
	tensors = append(tensors, FromF32("big", F32, []int{10}, make([]float32, 10)))
	if err := WriteSharded(dir, tensors, map[string]string{"format": "pt"}, 40); err != nil {
		t.Fatal(err)
	}
	// 16+16 | 16+16 | 16 | 40 (own shard: adding it would exceed 40)
	index, err := os.ReadFile(filepath.Join(dir, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "metadata": {
    "total_size": 120
  },
  "weight_map": {
    "big": "model-00004-of-00004.safetensors",
    "model.layers.a.weight": "model-00001-of-00004.safetensors",
    "model.layers.b.weight": "model-00001-of-00004.safetensors",
    "model.layers.c.weight": "model-00002-of-00004.safetensors",
    "model.layers.d.weight": "model-00002-of-00004.safetensors",
    "model.layers.e.weight": "model-00003-of-00004.safetensors"
  }
}
`
	if string(index) != want {
		t.Fatalf("index:\n%s\nwant:\n%s", index, want)
	}
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkSet(t, s, tensors)
	if got := len(s.Files()); got != 4 {
		t.Errorf("len(Files()) = %d; want 4", got)
	}
	if got := s.Metadata(); len(got) != 1 || got["format"] != "pt" {
		t.Errorf("Metadata() = %v; want format: pt", got)
	}
	_, err = s.ReadU16("nope")
	checkErr(t, err, ErrNotFound, dir, "nope", "tensor not found")
	if _, ok := s.Info("nope"); ok {
		t.Error("Info(nope) found a tensor")
	}
	dst := make([]float32, 4)
	if err := s.ReadF32Into("model.layers.c.weight", dst); err != nil || !slices.Equal(dst, []float32{2, 3, 4, 5}) {
		t.Errorf("ReadF32Into = %v, %v", dst, err)
	}
	raw := make([]byte, 40)
	if err := s.ReadInto("big", raw); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadRaw("big"); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read after Close: got %v; want os.ErrClosed", err)
	}
}

// Ensure WriteSharded writes one model.safetensors when everything fits,
// and each layout removes the other's entry file so OpenDir sees the newest.
func TestWriteSharded_SwitchLayouts(t *testing.T) {
	dir := t.TempDir()
	small := layerTensors(2)
	if err := WriteSharded(dir, layerTensors(4), nil, 32); err != nil {
		t.Fatal(err)
	}
	if err := WriteSharded(dir, small, nil, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, IndexName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale index left: %v", err)
	}
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSet(t, s, small)
	if got := s.Files(); !slices.Equal(got, []string{filepath.Join(dir, SingleName)}) {
		t.Errorf("Files() = %q", got)
	}
	s.Close()

	if err := WriteSharded(dir, layerTensors(3), nil, 16); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, SingleName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale model.safetensors left: %v", err)
	}
	s, err = OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSet(t, s, layerTensors(3))
	s.Close()

	// An empty model is one empty file.
	empty := t.TempDir()
	if err := WriteSharded(empty, nil, nil, 1); err != nil {
		t.Fatal(err)
	}
	s, err = OpenDir(empty)
	if err != nil {
		t.Fatal(err)
	}
	checkSet(t, s, nil)
	s.Close()
}

// Ensure WriteSharded checks all tensors before writing anything.
func TestWriteSharded_Errors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	tensors := append(layerTensors(3), layerTensors(1)...)
	checkErr(t, WriteSharded(dir, tensors, nil, 16), ErrFormat, dir, "model.layers.a.weight", "given twice")
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteSharded made %s despite the error", dir)
	}
	checkErr(t, WriteSharded(dir, layerTensors(1), nil, 0), nil, dir, "", "maxShardBytes is 0")
}

// Ensure model.safetensors wins over an index, as in transformers.
func TestOpenDir_PrefersSingleFile(t *testing.T) {
	dir := t.TempDir()
	mustWriteFile(t, filepath.Join(dir, SingleName), layerTensors(1))
	writeIndex(t, dir, `{"weight_map":{"x":"missing.safetensors"}}`)
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkSet(t, s, layerTensors(1))
}

// Ensure OpenDir rejects every disagreement between index and shards,
// naming the file and the tensor.
func TestOpenDir_Errors(t *testing.T) {
	ts := layerTensors(3)
	a, b, c := ts[0].Name, ts[1].Name, ts[2].Name
	tests := []struct {
		name   string
		shards map[string][]Tensor
		index  string // "" for no index
		kind   error
		file   string // the Path of the error, relative to dir ("" = dir)
		tensor string
		want   string
	}{
		{
			name: "no weights", kind: fs.ErrNotExist,
			want: "no model.safetensors or model.safetensors.index.json",
		},
		{
			name:   "missing shard",
			shards: map[string][]Tensor{"s1.safetensors": {ts[0]}},
			index:  `{"weight_map":{"` + a + `":"s1.safetensors","` + b + `":"s2.safetensors"}}`,
			kind:   fs.ErrNotExist, file: IndexName, tensor: b, want: `shard "s2.safetensors": open `,
		},
		{
			name:   "tensor missing from its shard",
			shards: map[string][]Tensor{"s1.safetensors": {ts[0]}},
			index:  `{"weight_map":{"` + a + `":"s1.safetensors","` + b + `":"s1.safetensors"}}`,
			kind:   ErrFormat, file: "s1.safetensors", tensor: b,
			want: "missing, though model.safetensors.index.json maps it to this shard",
		},
		{
			name:   "tensor not in the weight map",
			shards: map[string][]Tensor{"s1.safetensors": {ts[0], ts[1]}},
			index:  `{"weight_map":{"` + a + `":"s1.safetensors"}}`,
			kind:   ErrFormat, file: "s1.safetensors", tensor: b,
			want: "model.safetensors.index.json does not map it to this shard",
		},
		{
			name:   "tensor in two shards",
			shards: map[string][]Tensor{"s1.safetensors": {ts[0], ts[2]}, "s2.safetensors": {ts[1], ts[2]}},
			index:  `{"weight_map":{"` + a + `":"s1.safetensors","` + b + `":"s2.safetensors","` + c + `":"s2.safetensors"}}`,
			kind:   ErrFormat, file: "s1.safetensors", tensor: c, want: "does not map it to this shard",
		},
		{
			name:   "shard outside the folder",
			shards: map[string][]Tensor{"s1.safetensors": {ts[0]}},
			index:  `{"weight_map":{"` + a + `":"../s1.safetensors"}}`,
			kind:   ErrFormat, file: IndexName, tensor: a, want: `shard "../s1.safetensors" is not a file inside the folder`,
		},
		{
			name:   "absolute shard path",
			shards: map[string][]Tensor{"s1.safetensors": {ts[0]}},
			index:  `{"weight_map":{"` + a + `":"/etc/passwd"}}`,
			kind:   ErrFormat, file: IndexName, tensor: a, want: "is not a file inside the folder",
		},
		{
			name:   "corrupt shard",
			shards: map[string][]Tensor{"s1.safetensors": {ts[0]}},
			index:  `{"weight_map":{"` + a + `":"s1.safetensors","` + b + `":"bad.safetensors"}}`,
			kind:   ErrFormat, file: "bad.safetensors", want: "too short",
		},
		{name: "index not JSON", index: `{"weight_map":`, kind: ErrFormat, file: IndexName, want: "invalid JSON"},
		{name: "index not an object", index: `[]`, kind: ErrFormat, file: IndexName, want: "not a JSON object"},
		{name: "no weight_map", index: `{"metadata":{"total_size":0}}`, kind: ErrFormat, file: IndexName, want: "no weight_map"},
		{name: "weight_map not an object", index: `{"weight_map":[]}`, kind: ErrFormat, file: IndexName, want: "weight_map is not a JSON object"},
		{name: "shard not a string", index: `{"weight_map":{"w":3}}`, kind: ErrFormat, file: IndexName, tensor: "w", want: "weight_map value 3 is not a file name"},
		{name: "tensor twice", index: `{"weight_map":{"w":"a","w":"b"}}`, kind: ErrFormat, file: IndexName, tensor: "w", want: "listed twice in the weight_map"},
		{name: "empty name", index: `{"weight_map":{"":"a"}}`, kind: ErrFormat, file: IndexName, want: "empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, tensors := range tt.shards {
				mustWriteFile(t, filepath.Join(dir, name), tensors)
			}
			if strings.Contains(tt.index, "bad.safetensors") {
				os.WriteFile(filepath.Join(dir, "bad.safetensors"), []byte{1}, 0o644)
			}
			if tt.index != "" {
				writeIndex(t, dir, tt.index)
			}
			s, err := OpenDir(dir)
			if err == nil {
				s.Close()
				t.Fatal("no error")
			}
			path := dir
			if tt.file != "" {
				path = filepath.Join(dir, tt.file)
			}
			checkErr(t, err, tt.kind, path, tt.tensor, tt.want)
		})
	}
}

// Ensure an index may spell one shard two ways ("a" and "./a").
func TestOpenDir_ShardSpelling(t *testing.T) {
	dir := t.TempDir()
	ts := layerTensors(2)
	mustWriteFile(t, filepath.Join(dir, "s1.safetensors"), ts)
	writeIndex(t, dir, `{"metadata":{"total_size":32},"weight_map":{"`+ts[0].Name+`":"./s1.safetensors","`+ts[1].Name+`":"s1.safetensors"}}`)
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkSet(t, s, ts)
	if got := len(s.Files()); got != 1 {
		t.Errorf("len(Files()) = %d; want 1", got)
	}
}
