package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// Ensure the reader takes files laid out as the reference and older writers
// lay them out: any key order, no padding, JSON whitespace, unknown fields,
// a null __metadata__, zero-sized and scalar tensors.
func TestOpen_ReferenceLayouts(t *testing.T) {
	w := f32le(0, 1, 2, 3)           // "w": F32 [2,2]
	h := []byte{0x80, 0x3f, 0, 0xc0} // "h": BF16 [2] = 1, -2
	tests := []struct {
		name   string
		file   []byte
		meta   map[string]string
		tensor map[string][]float32
	}{
		{
			name:   "reference test vector, unpadded",
			file:   build(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`, make([]byte, 16)),
			tensor: map[string][]float32{},
		},
		{
			name: "python json.dumps spacing, name order, metadata",
			file: build(pad(`{"__metadata__": {"format": "pt"}, "h": {"dtype": "BF16", "shape": [2], "data_offsets": [16, 20]}, `+
				`"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}`), slices.Concat(w, h)),
			meta:   map[string]string{"format": "pt"},
			tensor: map[string][]float32{"w": {0, 1, 2, 3}, "h": {1, -2}},
		},
		{
			name:   "leading and trailing whitespace, unknown field, null metadata",
			file:   build("\t\n"+`{"__metadata__":null,"w":{"data_offsets":[0,16],"shape":[2,2],"dtype":"F32","extra":{"x":[1]}}}`+" \r\n\t", w),
			tensor: map[string][]float32{"w": {0, 1, 2, 3}},
		},
		{
			name: "zero-sized and scalar tensors",
			file: build(`{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[2,0],"data_offsets":[8,8]},`+
				`"z":{"dtype":"F16","shape":[0],"data_offsets":[8,8]}}`, binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.5))),
			tensor: map[string][]float32{"s": {0.5}, "e": {}, "z": {}},
		},
		{
			name:   "empty file",
			file:   build(`{}`, nil),
			tensor: map[string][]float32{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustOpenBytes(t, tt.file)
			md := f.Metadata()
			if len(md) != len(tt.meta) || (tt.meta == nil) != (md == nil) {
				t.Errorf("Metadata() = %v; want %v", md, tt.meta)
			}
			for k, v := range tt.meta {
				if md[k] != v {
					t.Errorf("Metadata()[%q] = %q; want %q", k, md[k], v)
				}
			}
			for name, want := range tt.tensor {
				got, err := f.ReadF32(name)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("ReadF32(%q) = %v; want %v", name, got, want)
				}
			}
		})
	}
}

// Ensure ReadF32 converts each float dtype exactly as documented, including
// NaN, infinities, subnormals, and F64 values out of float32 range.
func TestReadF32_Conversions(t *testing.T) {
	f64 := []float64{1.5, -0.1, 1e300, -1e300, math.NaN(), 1e-320, math.Inf(1)}
	var f64b []byte
	for _, v := range f64 {
		f64b = binary.LittleEndian.AppendUint64(f64b, math.Float64bits(v))
	}
	half := []uint16{0x3c00, 0xc000, 0x7c00, 0xfc00, 0x0001, 0x7e00, 0x8000} // F16
	bf := []uint16{0x3f80, 0xc000, 0x7f80, 0xff80, 0x0001, 0x7fc0, 0x8000}   // BF16
	tensors := []Tensor{
		{Name: "d", DType: F64, Shape: []int{len(f64)}, Data: f64b},
		FromU16("h", F16, []int{len(half)}, half),
		FromU16("b", BF16, []int{len(bf)}, bf),
	}
	f := mustOpenBytes(t, mustWrite(t, tensors, nil))
	inf := float32(math.Inf(1))
	tests := []struct {
		name string
		want []float32 // NaN written as NaN
	}{
		{"d", []float32{1.5, float32(-0.1), inf, -inf, float32(math.NaN()), 0, inf}},
		{"h", []float32{1, -2, inf, -inf, 5.960464477539063e-08, float32(math.NaN()), float32(math.Copysign(0, -1))}},
		{"b", []float32{1, -2, inf, -inf, math.Float32frombits(0x00010000), float32(math.NaN()), float32(math.Copysign(0, -1))}},
	}
	for _, tt := range tests {
		got, err := f.ReadF32(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tt.want {
			w, g := tt.want[i], got[i]
			if math.IsNaN(float64(w)) != math.IsNaN(float64(g)) ||
				(!math.IsNaN(float64(w)) && math.Float32bits(w) != math.Float32bits(g)) {
				t.Errorf("%s[%d] = %v (%#x); want %v (%#x)", tt.name, i, g, math.Float32bits(g), w, math.Float32bits(w))
			}
		}
	}
}

// Ensure converting reads cross chunk boundaries correctly.
func TestReadF32_Chunks(t *testing.T) {
	n := chunkBytes/2*3 + 7 // BF16: three chunks and a bit
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i % 256) // exact in bf16
	}
	f := mustOpenBytes(t, mustWrite(t, []Tensor{FromF32("w", BF16, []int{n}, vals)}, nil))
	got, err := f.ReadF32("w")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, vals) {
		t.Fatal("ReadF32 across chunks differs")
	}
	into := make([]float32, n)
	if err := f.ReadF32Into("w", into); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(into, vals) {
		t.Fatal("ReadF32Into across chunks differs")
	}
	u, err := f.ReadU16("w")
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range u {
		if float32(math.Float32frombits(uint32(v)<<16)) != vals[i] {
			t.Fatalf("ReadU16[%d] = %#x; want bf16 of %v", i, v, vals[i])
		}
	}
}

// Ensure reads fail cleanly: unknown name, wrong dtype, wrong buffer size.
func TestRead_Errors(t *testing.T) {
	f := mustOpenBytes(t, mustWrite(t, []Tensor{
		{Name: "ids", DType: I64, Shape: []int{2}, Data: make([]byte, 16)},
		FromF32("w", F32, []int{2}, []float32{1, 2}),
	}, nil))
	const path = "test.safetensors"
	_, err := f.ReadRaw("nope")
	checkErr(t, err, ErrNotFound, path, "nope", "tensor not found")
	_, err = f.ReadF32("ids")
	checkErr(t, err, ErrDType, path, "ids", "cannot read I64 as float32")
	_, err = f.ReadU16("w")
	checkErr(t, err, ErrDType, path, "w", "cannot read F32 as uint16")
	checkErr(t, f.ReadInto("w", make([]byte, 7)), nil, path, "w", "buffer holds 7 bytes, tensor has 8")
	checkErr(t, f.ReadF32Into("w", make([]float32, 3)), nil, path, "w", "buffer holds 3 values, tensor has 2")
	buf := make([]byte, 8)
	if err := f.ReadInto("w", buf); err != nil || !bytes.Equal(buf, f32le(1, 2)) {
		t.Fatalf("ReadInto = %v, %v; want %v", buf, err, f32le(1, 2))
	}
	if _, ok := f.Info("nope"); ok {
		t.Error("Info(nope) found a tensor")
	}
}

// Ensure accessors hand out copies the caller may change.
func TestFile_ReturnsCopies(t *testing.T) {
	f := mustOpenBytes(t, mustWrite(t, []Tensor{FromF32("w", F32, []int{1, 2}, []float32{1, 2})}, map[string]string{"k": "v"}))
	f.Names()[0] = "x"
	info, _ := f.Info("w")
	info.Shape[0] = 9
	f.Metadata()["k"] = "changed"
	info, _ = f.Info("w")
	if f.Names()[0] != "w" || info.Shape[0] != 1 || f.Metadata()["k"] != "v" {
		t.Fatal("changing a returned value changed the File")
	}
	if info.NumElements() != 2 {
		t.Errorf("NumElements() = %d; want 2", info.NumElements())
	}
}

// Ensure Open works on disk, Close closes, and a file truncated after Open
// gives a read error naming the tensor instead of short data.
func TestOpen_Disk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	tensors := []Tensor{FromF32("a", F32, []int{4}, []float32{1, 2, 3, 4}), FromF32("b", F32, []int{2}, []float32{5, 6})}
	if err := WriteFile(path, tensors, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path() != path {
		t.Errorf("Path() = %q; want %q", f.Path(), path)
	}
	if got, err := f.ReadF32("b"); err != nil || !slices.Equal(got, []float32{5, 6}) {
		t.Fatalf("ReadF32(b) = %v, %v", got, err)
	}
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()-4); err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadF32("b")
	checkErr(t, err, nil, path, "b", "read data")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("got %v; want io.ErrUnexpectedEOF", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadRaw("a"); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read after Close: got %v; want os.ErrClosed", err)
	}

	_, err = Open(filepath.Join(t.TempDir(), "missing.safetensors"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing): got %v; want os.ErrNotExist", err)
	}
	dir := t.TempDir()
	_, err = Open(dir)
	checkErr(t, err, ErrFormat, dir, "", "not a regular file")
}

// Ensure a huge declared header length is rejected before any large
// allocation.
func TestOpen_HugeHeaderLengthAllocatesNothing(t *testing.T) {
	for _, n := range []uint64{math.MaxUint64, 1 << 40, maxHeaderSize, maxHeaderSize + 1} {
		file := binary.LittleEndian.AppendUint64(nil, n)
		file = append(file, `{}`...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := openBytes(file, "big.safetensors")
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("header length %d: no error", n)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
			t.Errorf("header length %d: allocated %d bytes", n, got)
		}
	}
}

// Ensure concurrent reads are safe (run with -race).
func TestFile_ConcurrentReads(t *testing.T) {
	var tensors []Tensor
	for i := range 8 {
		tensors = append(tensors, FromF32(string(rune('a'+i)), BF16, []int{1000}, make([]float32, 1000)))
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := WriteFile(path, tensors, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 8 {
		wg.Go(func() {
			for _, name := range f.Names() {
				if _, err := f.ReadF32(name); err != nil {
					errs <- err
				}
				f.Info(name)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
