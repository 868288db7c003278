package gguf

import (
	"errors"
	"fmt"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// Version is the format version this package writes (and the one it reads).
const Version = 3

// DefaultAlignment is the tensor data alignment when general.alignment is
// absent.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that sets the tensor data alignment.
const KeyAlignment = "general.alignment"

// Limits from the specification.
const (
	maxTensorName = 64 // bytes in a tensor name
	maxDims       = 4  // dimensions of a tensor
)

// Type is a ggml tensor element type (enum ggml_type).
type Type uint32

// The tensor types this package writes and reads. Of the block-quantized
// types only Q8_0 and Q4_0 are supported.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2 // blocks of 32: an fp16 scale d, then 16 bytes, byte j holding 4-bit n of weight j (low) and j+16 (high); the values (n−8)·d
	Q8_0 Type = 8 // blocks of 32: an fp16 scale d, then 32 int8 q; the values d·q
	I8   Type = 24
	I16  Type = 25
	I32  Type = 26
	I64  Type = 27
	F64  Type = 28
	BF16 Type = 30
)

var typeNames = map[Type]string{
	F32: "F32", F16: "F16", Q4_0: "Q4_0", Q8_0: "Q8_0", I8: "I8", I16: "I16", I32: "I32", I64: "I64", F64: "F64", BF16: "BF16",
}

func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("Type(%d)", uint32(t))
}

// Size returns the bytes of one element of t, or 0 for block-quantized types
// and types this package does not handle.
func (t Type) Size() int {
	switch t {
	case I8:
		return 1
	case F16, BF16, I16:
		return 2
	case F32, I32:
		return 4
	case I64, F64:
		return 8
	}
	return 0
}

// valueType is a metadata value type (enum gguf_metadata_value_type).
type valueType uint32

const (
	vtUint8   valueType = 0
	vtInt8    valueType = 1
	vtUint16  valueType = 2
	vtInt16   valueType = 3
	vtUint32  valueType = 4
	vtInt32   valueType = 5
	vtFloat32 valueType = 6
	vtBool    valueType = 7
	vtString  valueType = 8
	vtArray   valueType = 9
	vtUint64  valueType = 10
	vtInt64   valueType = 11
	vtFloat64 valueType = 12
)

// KV is one metadata key-value pair. Value holds one of the Go types that map
// to a GGUF value type: uint8, int8, uint16, int16, uint32, int32, float32,
// bool, string, uint64, int64, float64, or a slice of any of those (a GGUF
// array). Read returns values with exactly these types, so a written KV reads
// back reflect.DeepEqual to itself; arrays of arrays, which Write does not
// produce, read as []any. Counts that llama.cpp reads (block_count,
// head_count, ...) must be uint32: llama.cpp checks value types strictly.
type KV struct {
	Key   string
	Value any
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	// Dims are ggml's ne: Dims[0] varies fastest. A PyTorch [rows, cols]
	// matrix is Dims {cols, rows}.
	Dims []uint64
	Type Type
	// Offset is the start of the tensor's data relative to the data section
	// (File.DataOffset); a multiple of the alignment.
	Offset uint64
}

// Elements returns the number of elements of the tensor.
func (ti TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range ti.Dims {
		n *= d
	}
	return n
}

// Bytes returns the size of the tensor's data.
func (ti TensorInfo) Bytes() uint64 {
	elems, bytes := ti.Type.block()
	if elems == 0 {
		return 0
	}
	return ti.Elements() / elems * bytes
}

// q8Block is the number of weights of a Q8_0 or Q4_0 block, which takes
// q8BlockBytes or q4BlockBytes bytes.
const (
	q8Block      = 32
	q8BlockBytes = 2 + q8Block
	q4BlockBytes = 2 + q8Block/2
)

// block returns how many elements of t are stored together and their
// bytes: 1 and Size() for element types, a block of 32 in 34 bytes for
// Q8_0 and 18 for Q4_0, and 0, 0 for types this package does not handle.
// A tensor's rows (Dims[0]) are whole blocks.
func (t Type) block() (elems, bytes uint64) {
	switch t {
	case Q8_0:
		return q8Block, q8BlockBytes
	case Q4_0:
		return q8Block, q4BlockBytes
	}
	if s := t.Size(); s > 0 {
		return 1, uint64(s)
	}
	return 0, 0
}

// checkBlocks reports whether a tensor of type t and dims has a supported
// type and rows of whole blocks.
func checkBlocks(name string, t Type, dims []uint64) error {
	elems, _ := t.block()
	if elems == 0 {
		return fmt.Errorf("tensor %s: type %v is not supported", name, t)
	}
	if len(dims) > 0 && dims[0]%elems != 0 {
		return fmt.Errorf("tensor %s: type %v needs rows of whole blocks of %d, has %d", name, t, elems, dims[0])
	}
	return nil
}

// ErrFormat is wrapped by every error about a malformed GGUF file.
var ErrFormat = errors.New("gguf: malformed file")

func alignUp(n, align uint64) uint64 { return (n + align - 1) / align * align }
