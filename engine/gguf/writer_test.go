package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
)

// rawTensor is a tensor whose data is already in memory.
func rawTensor(name string, dims []uint64, typ Type, data []byte) Tensor {
	return Tensor{Name: name, Dims: dims, Type: typ, WriteData: func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}}
}

func f32Data(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// Ensure every metadata value type and several tensor types survive a write
// and a read unchanged, with aligned offsets.
func TestWrite_RoundTrip(t *testing.T) {
	kvs := []KV{
		{"general.architecture", "test"},
		{KeyAlignment, uint32(64)},
		{"t.u8", uint8(200)}, {"t.i8", int8(-5)}, {"t.u16", uint16(60000)}, {"t.i16", int16(-30000)},
		{"t.u32", uint32(4000000000)}, {"t.i32", int32(-2000000000)}, {"t.f32", float32(1.5e-6)},
		{"t.bool", true}, {"t.false", false}, {"t.str", "héllo\x00world"}, {"t.empty", ""},
		{"t.u64", uint64(1) << 60}, {"t.i64", int64(-1) << 60}, {"t.f64", math.Pi},
		{"t.a_u8", []uint8{1, 2, 3}}, {"t.a_i8", []int8{-1, 1}}, {"t.a_u16", []uint16{7}},
		{"t.a_i16", []int16{-7, 7}}, {"t.a_u32", []uint32{1, 1 << 31}}, {"t.a_i32", []int32{-1, 3, 5}},
		{"t.a_f32", []float32{0.5, -2}}, {"t.a_bool", []bool{true, false, true}},
		{"t.a_str", []string{"a b", "", "Ġhello"}}, {"t.a_u64", []uint64{1 << 40}},
		{"t.a_i64", []int64{-1 << 40}}, {"t.a_f64", []float64{1e300}}, {"t.a_empty", []string{}},
	}
	i32 := make([]byte, 4*3)
	for i, v := range []int32{-1, 0, 7} {
		binary.LittleEndian.PutUint32(i32[4*i:], uint32(v))
	}
	f16 := []byte{0x00, 0x3c, 0x00, 0xc0} // 1, -2
	tensors := []Tensor{
		rawTensor("a.weight", []uint64{3, 2}, F32, f32Data(1, 2, 3, 4, 5, 6)),
		rawTensor("b", []uint64{2}, F16, f16),
		rawTensor("c.ids", []uint64{3, 1, 1}, I32, i32),
	}
	var buf bytes.Buffer
	if err := Write(&buf, kvs, tensors); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != Version {
		t.Errorf("version %d; want %d", f.Version, Version)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("alignment %d, data offset %d; want 64 and a multiple of it", f.Alignment, f.DataOffset)
	}
	if !reflect.DeepEqual(f.KV, kvs) {
		for i := range kvs {
			if i >= len(f.KV) || !reflect.DeepEqual(f.KV[i], kvs[i]) {
				t.Fatalf("KV %d: got %#v; want %#v", i, f.KV[min(i, len(f.KV)-1)], kvs[i])
			}
		}
		t.Fatalf("got %d KVs; want %d", len(f.KV), len(kvs))
	}
	if len(f.Tensors) != len(tensors) {
		t.Fatalf("got %d tensors; want %d", len(f.Tensors), len(tensors))
	}
	for i, ti := range f.Tensors {
		if ti.Name != tensors[i].Name || !reflect.DeepEqual(ti.Dims, tensors[i].Dims) || ti.Type != tensors[i].Type {
			t.Errorf("tensor %d: got %s %v %v; want %s %v %v", i, ti.Name, ti.Dims, ti.Type, tensors[i].Name, tensors[i].Dims, tensors[i].Type)
		}
		if ti.Offset%64 != 0 {
			t.Errorf("tensor %s offset %d not aligned to 64", ti.Name, ti.Offset)
		}
	}
	a, err := f.TensorF32("a.weight")
	if err != nil || !reflect.DeepEqual(a, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("a.weight = %v, %v; want [1 2 3 4 5 6]", a, err)
	}
	b, err := f.TensorF32("b")
	if err != nil || !reflect.DeepEqual(b, []float32{1, -2}) {
		t.Errorf("b = %v, %v; want [1 -2]", b, err)
	}
	c, err := f.TensorData("c.ids")
	if err != nil || !bytes.Equal(c, i32) {
		t.Errorf("c.ids = %v, %v; want %v", c, err, i32)
	}
	if int64(buf.Len()) != f.DataOffset+int64(alignUp(f.Tensors[2].Offset+12, 64)) {
		t.Errorf("file is %d bytes; want the last tensor padded to the alignment", buf.Len())
	}
}

// Ensure Write refuses inputs that would make an invalid file.
func TestWrite_BadInput(t *testing.T) {
	ok := rawTensor("x", []uint64{1}, F32, f32Data(1))
	tests := []struct {
		name    string
		kvs     []KV
		tensors []Tensor
		want    string
	}{
		{"DuplicateKey", []KV{{"a", uint32(1)}, {"a", uint32(2)}}, nil, "duplicate metadata key"},
		{"BadValue", []KV{{"a", 3}}, nil, "unsupported value type int"},
		{"BadAlignment", []KV{{KeyAlignment, uint32(12)}}, nil, "multiple of 8"},
		{"AlignmentType", []KV{{KeyAlignment, uint64(32)}}, nil, "multiple of 8"},
		{"NonASCIIKey", []KV{{"é", true}}, nil, "not ASCII"},
		{"DuplicateTensor", nil, []Tensor{ok, ok}, "duplicate tensor"},
		{"LongName", nil, []Tensor{rawTensor(strings.Repeat("n", 65), []uint64{1}, F32, f32Data(1))}, "1 to 64 bytes"},
		{"NoDims", nil, []Tensor{rawTensor("x", nil, F32, nil)}, "0 dims"},
		{"ZeroDim", nil, []Tensor{rawTensor("x", []uint64{0}, F32, nil)}, "zero dimension"},
		{"Quantized", nil, []Tensor{rawTensor("x", []uint64{32}, Type(3), nil)}, "not supported"},
		{"PartialQ8Block", nil, []Tensor{rawTensor("x", []uint64{48, 2}, Q8_0, nil)}, "whole blocks of 32"},
		{"ShortData", nil, []Tensor{rawTensor("x", []uint64{2}, F32, f32Data(1))}, "wrote 4 bytes, want 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Write(io.Discard, tt.kvs, tt.tensors)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

// Ensure Read rejects truncated and corrupt files with ErrFormat instead of
// allocating what a corrupt length asks for.
func TestRead_Malformed(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, []KV{{"general.architecture", "x"}, {"a", []string{"p", "q"}}},
		[]Tensor{rawTensor("w", []uint64{2, 2}, F32, f32Data(1, 2, 3, 4))})
	if err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	corrupt := func(off int, b ...byte) []byte {
		c := bytes.Clone(good)
		copy(c[off:], b)
		return c
	}
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
	tests := []struct {
		name string
		data []byte
	}{
		{"Empty", nil},
		{"BadMagic", corrupt(0, 'G', 'G', 'M', 'L')},
		{"BadVersion", corrupt(4, 9)},
		{"BigEndian", corrupt(4, 0, 0, 0, 3)},
		{"HugeTensorCount", corrupt(8, huge...)},
		{"HugeKeyLength", corrupt(24, huge...)},
		{"Truncated", good[:40]},
		{"TruncatedData", good[:len(good)-32]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.data), int64(len(tt.data)))
			if !errors.Is(err, ErrFormat) {
				t.Errorf("got %v; want ErrFormat", err)
			}
		})
	}
}
