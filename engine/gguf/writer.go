package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
)

// Tensor is one tensor to write: its shape and type, and a function that
// produces its data when the writer reaches it.
type Tensor struct {
	Name string
	Dims []uint64 // ne0 first (see TensorInfo)
	Type Type
	// WriteData writes exactly TensorInfo.Bytes() bytes to w. It is
	// called once, in tensor order, after all metadata has been written, so
	// data can be produced on the fly (converted row by row) instead of being
	// held in memory.
	WriteData func(w io.Writer) error
}

// Write encodes a GGUF v3 file to w: the header, kvs in order, the tensor
// infos, then each tensor's data, aligned to general.alignment (taken from
// kvs when present, else DefaultAlignment). Tensor offsets are computed from
// the tensors' sizes, so nothing is buffered beyond a small write buffer.
func Write(w io.Writer, kvs []KV, tensors []Tensor) error {
	align := uint64(DefaultAlignment)
	seenKey := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		if err := checkKey(kv.Key); err != nil {
			return err
		}
		if seenKey[kv.Key] {
			return fmt.Errorf("gguf: duplicate metadata key %q", kv.Key)
		}
		seenKey[kv.Key] = true
		if kv.Key == KeyAlignment {
			a, ok := kv.Value.(uint32)
			if !ok || a == 0 || a%8 != 0 {
				return fmt.Errorf("gguf: %s must be a uint32 multiple of 8, got %T %v", KeyAlignment, kv.Value, kv.Value)
			}
			align = uint64(a)
		}
	}
	infos := make([]TensorInfo, len(tensors))
	seenName := make(map[string]bool, len(tensors))
	var offset uint64
	for i, t := range tensors {
		if err := checkTensor(t); err != nil {
			return err
		}
		if seenName[t.Name] {
			return fmt.Errorf("gguf: duplicate tensor %q", t.Name)
		}
		seenName[t.Name] = true
		infos[i] = TensorInfo{Name: t.Name, Dims: t.Dims, Type: t.Type, Offset: offset}
		offset = alignUp(offset+infos[i].Bytes(), align)
	}

	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countingWriter{w: bw}
	e := encoder{w: cw}
	e.raw([]byte(Magic))
	e.u32(Version)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		if err := e.value(kv.Value); err != nil {
			return fmt.Errorf("gguf: metadata %s: %w", kv.Key, err)
		}
	}
	for _, ti := range infos {
		e.str(ti.Name)
		e.u32(uint32(len(ti.Dims)))
		for _, d := range ti.Dims {
			e.u64(d)
		}
		e.u32(uint32(ti.Type))
		e.u64(ti.Offset)
	}
	e.pad(align)
	if e.err != nil {
		return fmt.Errorf("gguf: write header: %w", e.err)
	}
	dataStart := cw.n
	for i, t := range tensors {
		want := dataStart + infos[i].Offset
		if cw.n != want {
			return fmt.Errorf("gguf: internal error: tensor %s at %d, want %d", t.Name, cw.n, want)
		}
		if err := t.WriteData(cw); err != nil {
			return fmt.Errorf("gguf: tensor %s: %w", t.Name, err)
		}
		if got := cw.n - want; got != infos[i].Bytes() {
			return fmt.Errorf("gguf: tensor %s: wrote %d bytes, want %d", t.Name, got, infos[i].Bytes())
		}
		e.pad(align)
		if e.err != nil {
			return fmt.Errorf("gguf: tensor %s: %w", t.Name, e.err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gguf: flush: %w", err)
	}
	return nil
}

func checkKey(k string) error {
	if k == "" || len(k) > math.MaxUint16 {
		return fmt.Errorf("gguf: invalid metadata key %q", k)
	}
	for i := 0; i < len(k); i++ {
		if k[i] >= 0x80 {
			return fmt.Errorf("gguf: metadata key %q is not ASCII", k)
		}
	}
	return nil
}

func checkTensor(t Tensor) error {
	if t.Name == "" || len(t.Name) > maxTensorName {
		return fmt.Errorf("gguf: tensor name %q must be 1 to %d bytes", t.Name, maxTensorName)
	}
	if len(t.Dims) == 0 || len(t.Dims) > maxDims {
		return fmt.Errorf("gguf: tensor %s has %d dims, want 1 to %d", t.Name, len(t.Dims), maxDims)
	}
	for _, d := range t.Dims {
		if d == 0 {
			return fmt.Errorf("gguf: tensor %s has a zero dimension %v", t.Name, t.Dims)
		}
	}
	if err := checkBlocks(t.Name, t.Type, t.Dims); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if t.WriteData == nil {
		return fmt.Errorf("gguf: tensor %s has no WriteData", t.Name)
	}
	return nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}

// encoder writes little-endian GGUF primitives, keeping the first error.
type encoder struct {
	w   *countingWriter
	err error
	buf [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

func (e *encoder) u8(v uint8)   { e.buf[0] = v; e.raw(e.buf[:1]) }
func (e *encoder) u16(v uint16) { binary.LittleEndian.PutUint16(e.buf[:], v); e.raw(e.buf[:2]) }
func (e *encoder) u32(v uint32) { binary.LittleEndian.PutUint32(e.buf[:], v); e.raw(e.buf[:4]) }
func (e *encoder) u64(v uint64) { binary.LittleEndian.PutUint64(e.buf[:], v); e.raw(e.buf[:8]) }

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

// pad writes zeros up to the next multiple of align.
func (e *encoder) pad(align uint64) {
	var zeros [64]byte
	for n := alignUp(e.w.n, align) - e.w.n; n > 0; {
		k := min(n, uint64(len(zeros)))
		e.raw(zeros[:k])
		n -= k
	}
}

// value writes a metadata value's type tag and payload.
func (e *encoder) value(v any) error {
	switch x := v.(type) {
	case uint8:
		e.u32(uint32(vtUint8))
		e.u8(x)
	case int8:
		e.u32(uint32(vtInt8))
		e.u8(uint8(x))
	case uint16:
		e.u32(uint32(vtUint16))
		e.u16(x)
	case int16:
		e.u32(uint32(vtInt16))
		e.u16(uint16(x))
	case uint32:
		e.u32(uint32(vtUint32))
		e.u32(x)
	case int32:
		e.u32(uint32(vtInt32))
		e.u32(uint32(x))
	case float32:
		e.u32(uint32(vtFloat32))
		e.u32(math.Float32bits(x))
	case bool:
		e.u32(uint32(vtBool))
		e.u8(boolByte(x))
	case string:
		e.u32(uint32(vtString))
		e.str(x)
	case uint64:
		e.u32(uint32(vtUint64))
		e.u64(x)
	case int64:
		e.u32(uint32(vtInt64))
		e.u64(uint64(x))
	case float64:
		e.u32(uint32(vtFloat64))
		e.u64(math.Float64bits(x))
	case []uint8:
		arrayOf(e, vtUint8, x, e.u8)
	case []int8:
		arrayOf(e, vtInt8, x, func(v int8) { e.u8(uint8(v)) })
	case []uint16:
		arrayOf(e, vtUint16, x, e.u16)
	case []int16:
		arrayOf(e, vtInt16, x, func(v int16) { e.u16(uint16(v)) })
	case []uint32:
		arrayOf(e, vtUint32, x, e.u32)
	case []int32:
		arrayOf(e, vtInt32, x, func(v int32) { e.u32(uint32(v)) })
	case []float32:
		arrayOf(e, vtFloat32, x, func(v float32) { e.u32(math.Float32bits(v)) })
	case []bool:
		arrayOf(e, vtBool, x, func(v bool) { e.u8(boolByte(v)) })
	case []string:
		arrayOf(e, vtString, x, e.str)
	case []uint64:
		arrayOf(e, vtUint64, x, e.u64)
	case []int64:
		arrayOf(e, vtInt64, x, func(v int64) { e.u64(uint64(v)) })
	case []float64:
		arrayOf(e, vtFloat64, x, func(v float64) { e.u64(math.Float64bits(v)) })
	default:
		return fmt.Errorf("unsupported value type %T (want %s)", v, strings.Join(supportedValueTypes, ", "))
	}
	return nil
}

var supportedValueTypes = []string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "uint64", "int64", "float64", "or a slice of one of them"}

func arrayOf[T any](e *encoder, vt valueType, xs []T, put func(T)) {
	e.u32(uint32(vtArray))
	e.u32(uint32(vt))
	e.u64(uint64(len(xs)))
	for _, x := range xs {
		if e.err != nil {
			return
		}
		put(x)
	}
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
