package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pad pads a header with spaces to a multiple of 8 bytes, as the reference
// writer does.
func pad(h string) string {
	for len(h)%8 != 0 {
		h += " "
	}
	return h
}

func f32le(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// Ensure Write produces, byte for byte, what the reference writer produces:
// compact JSON, dtype-descending then name order, "__metadata__" first,
// header padded with spaces to a multiple of 8.
func TestWrite_ReferenceBytes(t *testing.T) {
	six := f32le(0, 1, 2, 3, 4, 5)
	tests := []struct {
		name    string
		tensors []Tensor
		meta    map[string]string
		header  string // before padding
		data    []byte
	}{
		{
			name:    "one tensor, no padding needed",
			tensors: []Tensor{{Name: "attn.0", DType: F32, Shape: []int{1, 2, 3}, Data: six}},
			header:  `{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`,
			data:    six,
		},
		{
			name:    "one tensor, padded",
			tensors: []Tensor{{Name: "attn0", DType: F32, Shape: []int{1, 1, 2, 3}, Data: six}},
			header:  `{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}`,
			data:    six,
		},
		{name: "empty", header: `{}`},
		{
			name:   "metadata only",
			meta:   map[string]string{"framework": "pt"},
			header: `{"__metadata__":{"framework":"pt"}}`,
		},
		{
			name: "mixed dtypes",
			tensors: []Tensor{
				{Name: "mask", DType: Bool, Shape: []int{3}, Data: []byte{1, 0, 1}},
				{Name: "b.weight", DType: BF16, Shape: []int{2}, Data: []byte{0x80, 0x3f, 0x00, 0x40}},
				{Name: "z", DType: F32, Shape: []int{0}},
				{Name: "step", DType: I64, Shape: []int{}, Data: []byte{7, 0, 0, 0, 0, 0, 0, 0}},
				{Name: "a.bias", DType: F32, Shape: []int{2}, Data: f32le(1, -1)},
			},
			meta: map[string]string{"format": "pt"},
			header: `{"__metadata__":{"format":"pt"},` +
				`"step":{"dtype":"I64","shape":[],"data_offsets":[0,8]},` +
				`"a.bias":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},` +
				`"z":{"dtype":"F32","shape":[0],"data_offsets":[16,16]},` +
				`"b.weight":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]},` +
				`"mask":{"dtype":"BOOL","shape":[3],"data_offsets":[20,23]}}`,
			data: slices.Concat([]byte{7, 0, 0, 0, 0, 0, 0, 0}, f32le(1, -1), []byte{0x80, 0x3f, 0x00, 0x40}, []byte{1, 0, 1}),
		},
		{
			name:    "names escaped like serde_json",
			tensors: []Tensor{{Name: "a\"b\\c\n\r\t\b\f<&>é\x01\x1f\u2028", DType: U8, Shape: []int{1}, Data: []byte{9}}},
			header:  `{"a\"b\\c\n\r\t\b\f<&>é\u0001\u001f` + "\u2028" + `":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`,
			data:    []byte{9},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustWrite(t, tt.tensors, tt.meta)
			want := build(pad(tt.header), tt.data)
			if !bytes.Equal(got, want) {
				t.Fatalf("got\n%q\nwant\n%q", got, want)
			}
			f := mustOpenBytes(t, got)
			for _, tn := range tt.tensors {
				raw, err := f.ReadRaw(tn.Name)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(raw, tn.encoded()) && len(tn.encoded()) > 0 {
					t.Errorf("tensor %q: got %v; want %v", tn.Name, raw, tn.encoded())
				}
			}
		})
	}
}

// Ensure every dtype round-trips with its shape, data and metadata, and
// every tensor starts aligned to its element size.
func TestWrite_RoundTripAllDTypes(t *testing.T) {
	shapes := [][]int{{}, {0}, {3}, {2, 3}, {1, 2, 0, 4}, {2, 1, 3}}
	var tensors []Tensor
	for i, d := range allDTypes() {
		for j, shape := range shapes {
			n, _ := numElements(shape)
			tensors = append(tensors, Tensor{
				Name:  d.String() + "/" + shapeString(shape),
				DType: d,
				Shape: shape,
				Data:  randBytes(uint64(100*i+j), n*d.Size()),
			})
		}
	}
	meta := map[string]string{"format": "pt", "b": "two", "a": "<one & é>"}
	b := mustWrite(t, tensors, meta)
	hlen := binary.LittleEndian.Uint64(b)
	if hlen%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", hlen)
	}
	f := mustOpenBytes(t, b)
	if got, want := f.Names(), sortedNames(tensors); !slices.Equal(got, want) {
		t.Fatalf("Names() = %q; want %q", got, want)
	}
	for _, tn := range tensors {
		info, ok := f.Info(tn.Name)
		if !ok {
			t.Fatalf("Info(%q) missing", tn.Name)
		}
		if info.Name != tn.Name || info.DType != tn.DType || !slices.Equal(info.Shape, tn.Shape) || info.Size != int64(len(tn.encoded())) {
			t.Errorf("Info(%q) = %+v; want dtype %v shape %v size %d", tn.Name, info, tn.DType, tn.Shape, len(tn.encoded()))
		}
		if info.Shape == nil {
			t.Errorf("Info(%q).Shape is nil; want empty", tn.Name)
		}
		raw, err := f.ReadRaw(tn.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, tn.encoded()) {
			t.Errorf("ReadRaw(%q) differs", tn.Name)
		}
		if e := f.tensors[tn.Name]; (f.dataOff+e.begin)%int64(tn.DType.Size()) != 0 {
			t.Errorf("tensor %q starts at file offset %d, not aligned to %d", tn.Name, f.dataOff+e.begin, tn.DType.Size())
		}
	}
	got := f.Metadata()
	if len(got) != len(meta) {
		t.Fatalf("Metadata() = %v; want %v", got, meta)
	}
	for k, v := range meta {
		if got[k] != v {
			t.Errorf("Metadata()[%q] = %q; want %q", k, got[k], v)
		}
	}
}

func sortedNames(tensors []Tensor) []string {
	var names []string
	for _, t := range tensors {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

// Ensure the output depends on the set of tensors, not their order.
func TestWrite_Deterministic(t *testing.T) {
	var tensors []Tensor
	for i, d := range []DType{F32, BF16, F16, I64, U8, F64, I32, Bool} {
		for j := range 4 {
			tensors = append(tensors, Tensor{
				Name:  string(rune('a'+j)) + d.String(),
				DType: d,
				Shape: []int{j + 1},
				Data:  randBytes(uint64(i*10+j), (j+1)*d.Size()),
			})
		}
	}
	meta := map[string]string{"x": "1", "y": "2", "a": "3", "m": "4"}
	want := mustWrite(t, tensors, meta)
	r := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		shuffled := slices.Clone(tensors)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := mustWrite(t, shuffled, meta); !bytes.Equal(got, want) {
			t.Fatal("output depends on the order of tensors")
		}
	}
}

// Ensure Write rejects bad tensors, names the tensor, and writes nothing.
func TestWrite_Errors(t *testing.T) {
	ok := Tensor{Name: "ok", DType: F32, Shape: []int{1}, Data: make([]byte, 4)}
	tests := []struct {
		name    string
		tensors []Tensor
		meta    map[string]string
		tensor  string
		want    string
	}{
		{"empty name", []Tensor{ok, {DType: F32, Shape: []int{1}, Data: make([]byte, 4)}}, nil, "", "empty name"},
		{"reserved name", []Tensor{{Name: "__metadata__", DType: U8}}, nil, "__metadata__", "reserved"},
		{"invalid UTF-8 name", []Tensor{{Name: "a\xff", DType: U8, Shape: []int{0}}}, nil, "a\xff", "UTF-8"},
		{"zero dtype", []Tensor{{Name: "w", Shape: []int{1}, Data: make([]byte, 4)}}, nil, "w", "invalid dtype DType(0)"},
		{"negative dim", []Tensor{{Name: "w", DType: F32, Shape: []int{-1, 2}}}, nil, "w", "invalid shape [-1,2]"},
		{"overflowing shape", []Tensor{{Name: "w", DType: F32, Shape: []int{math.MaxInt / 2, 3}}}, nil, "w", "invalid shape"},
		{"short data", []Tensor{ok, {Name: "w", DType: F32, Shape: []int{2, 3}, Data: make([]byte, 20)}}, nil, "w",
			"shape [2,3] of F32 needs 24 bytes but Data holds 20"},
		{"duplicate", []Tensor{ok, {Name: "ok", DType: U8, Shape: []int{0}}}, nil, "ok", "given twice"},
		{"bad metadata", []Tensor{ok}, map[string]string{"k": "\xff"}, "", `__metadata__ key "k"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tt.tensors, tt.meta)
			checkErr(t, err, ErrFormat, "", tt.tensor, tt.want)
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes; want none", buf.Len())
			}
		})
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n < len(p) {
		n := w.n
		w.n = 0
		return n, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

// Ensure a failing writer's error comes back.
func TestWrite_WriterError(t *testing.T) {
	big := Tensor{Name: "w", DType: U8, Shape: []int{3 << 20}, Data: make([]byte, 3<<20)}
	err := Write(&failWriter{n: 1 << 20}, []Tensor{big}, nil)
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.HasPrefix(err.Error(), "safetensors: ") {
		t.Fatalf("got %v; want a safetensors error wrapping disk full", err)
	}
}

// Ensure FromF32 stores each float dtype as documented and ReadF32 reads
// it back.
func TestFromF32(t *testing.T) {
	vals := []float32{0, 1, -2.5, 0.1, 65504, float32(math.Inf(-1)), 1e-3, 3.140625}
	tests := []struct {
		dtype DType
		want  []float32 // after the round trip
	}{
		{F32, vals},
		{F64, vals},
		{BF16, []float32{0, 1, -2.5, 0.10009765625, 65536, float32(math.Inf(-1)), 0.00099945068359375, 3.140625}},
		{F16, []float32{0, 1, -2.5, 0.0999755859375, 65504, float32(math.Inf(-1)), 0.0010004043579101562, 3.140625}},
	}
	for _, tt := range tests {
		t.Run(tt.dtype.String(), func(t *testing.T) {
			tn := FromF32("w", tt.dtype, []int{2, 4}, vals)
			if len(tn.encoded()) != len(vals)*tt.dtype.Size() {
				t.Fatalf("len(Data) = %d; want %d", len(tn.encoded()), len(vals)*tt.dtype.Size())
			}
			f := mustOpenBytes(t, mustWrite(t, []Tensor{tn}, nil))
			got, err := f.ReadF32("w")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
}

// Ensure FromF32 panics on a dtype it cannot produce (a programmer error).
func TestFromF32_PanicsOnIntDType(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	FromF32("w", I32, []int{1}, []float32{1})
}

// Ensure FromU16 keeps the bit patterns and ReadU16 returns them.
func TestFromU16(t *testing.T) {
	bits := []uint16{0x3f80, 0xc000, 0x7fc0, 0x0001, 0xffff, 0}
	for _, d := range []DType{BF16, F16, I16, U16} {
		f := mustOpenBytes(t, mustWrite(t, []Tensor{FromU16("w", d, []int{3, 2}, bits)}, nil))
		got, err := f.ReadU16("w")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, bits) {
			t.Errorf("%v: got %#x; want %#x", d, got, bits)
		}
	}
	// More elements than one write of the encoding buffer, beside a
	// tensor held as bytes and an empty one.
	long := make([]uint16, 5001)
	for i := range long {
		long[i] = uint16(i*7919 + 3)
	}
	longF := make([]float32, 3001)
	for i := range longF {
		longF[i] = float32(i) * -0.25
	}
	f := mustOpenBytes(t, mustWrite(t, []Tensor{FromU16("long", BF16, []int{3, 1667}, long), FromF32("b", F32, []int{2}, []float32{1, -2}),
		FromU16("empty", F16, []int{0}, nil), FromF32("longf", F32, []int{3001}, longF)}, nil))
	if got, err := f.ReadF32("longf"); err != nil || !slices.Equal(got, longF) {
		t.Errorf("3001 fp32 elements: read back %d, err %v; want them equal", len(got), err)
	}
	if got, err := f.ReadU16("long"); err != nil || !slices.Equal(got, long) {
		t.Errorf("5001 elements: read back %d, err %v; want them equal", len(got), err)
	}
	if got, err := f.ReadF32("b"); err != nil || !slices.Equal(got, []float32{1, -2}) {
		t.Errorf("the tensor after it: %v, %v", got, err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("FromU16 with F32: no panic")
		}
	}()
	FromU16("w", F32, []int{1}, []uint16{1})
}

// Ensure WriteFile replaces a file atomically, and leaves it untouched when
// the tensors are invalid.
func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "adapter.safetensors")
	one := []Tensor{FromF32("a", F32, []int{2}, []float32{1, 2})}
	if err := WriteFile(path, one, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(path)
	if !bytes.Equal(first, mustWrite(t, one, map[string]string{"format": "pt"})) {
		t.Fatal("WriteFile and Write differ")
	}
	bad := []Tensor{{Name: "b", DType: F32, Shape: []int{2}, Data: make([]byte, 3)}}
	checkErr(t, WriteFile(path, bad, nil), ErrFormat, path, "b", "needs 8 bytes but Data holds 3")
	if got, _ := os.ReadFile(path); !bytes.Equal(got, first) {
		t.Fatal("a failed WriteFile changed the file")
	}
	two := []Tensor{FromF32("b", BF16, []int{1}, []float32{3})}
	if err := WriteFile(path, two, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Names(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("Names() = %q; want [b]", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries; want 1 (no temporary files)", len(entries))
	}
	err = WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir.safetensors"), one, nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "safetensors: ") {
		t.Fatalf("WriteFile into a missing folder: got %v; want a safetensors error matching fs.ErrNotExist", err)
	}
}

// encoded returns the tensor's data as the file holds it.
func (t *Tensor) encoded() []byte {
	var b bytes.Buffer
	if err := t.writeData(&b); err != nil {
		return nil
	}
	return b.Bytes()
}
