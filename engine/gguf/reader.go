package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/artgo/art/engine/kernels"
)

// File is a decoded GGUF header: metadata and tensor table. Tensor data is
// read on demand from the underlying reader.
type File struct {
	Version    uint32
	KV         []KV // in file order
	Tensors    []TensorInfo
	Alignment  uint64
	DataOffset int64 // absolute offset of the tensor data section

	r      io.ReaderAt
	size   int64
	closer io.Closer
}

// Open reads the header of the GGUF file at path. Close the File when done.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	gf, err := Read(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	gf.closer = f
	return gf, nil
}

// Close closes the file opened by Open; it is a no-op for Read's Files.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	return f.closer.Close()
}

// Read decodes the header, metadata and tensor infos of a GGUF file of size
// bytes held by r, and checks that every tensor lies inside the file.
func Read(r io.ReaderAt, size int64) (*File, error) {
	d := &decoder{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16), size: size}
	var magic [4]byte
	d.read(magic[:])
	if d.err == nil && string(magic[:]) != Magic {
		return nil, fmt.Errorf("%w: bad magic %q, want %q", ErrFormat, magic[:], Magic)
	}
	f := &File{r: r, size: size, Alignment: DefaultAlignment}
	f.Version = d.u32()
	if d.err == nil && f.Version != 2 && f.Version != 3 {
		if bswap := f.Version>>24 | f.Version<<24; bswap == 2 || bswap == 3 {
			return nil, fmt.Errorf("%w: big-endian files are not supported", ErrFormat)
		}
		return nil, fmt.Errorf("%w: version %d, want 2 or 3", ErrFormat, f.Version)
	}
	nTensors := d.u64()
	nKV := d.u64()
	// Each KV takes at least 8+4 bytes and each tensor info at least 8+4+8+4+8.
	if d.err == nil && (nKV > uint64(size)/12 || nTensors > uint64(size)/32) {
		return nil, fmt.Errorf("%w: %d tensors and %d metadata pairs cannot fit in %d bytes", ErrFormat, nTensors, nKV, size)
	}
	for i := uint64(0); i < nKV && d.err == nil; i++ {
		key := d.str()
		v := d.value(valueType(d.u32()), 0)
		f.KV = append(f.KV, KV{Key: key, Value: v})
		if key == KeyAlignment && d.err == nil {
			a, ok := v.(uint32)
			if !ok || a == 0 || a%8 != 0 {
				return nil, fmt.Errorf("%w: %s is %T %v, want a uint32 multiple of 8", ErrFormat, KeyAlignment, v, v)
			}
			f.Alignment = uint64(a)
		}
	}
	names := make(map[string]bool)
	for i := uint64(0); i < nTensors && d.err == nil; i++ {
		var ti TensorInfo
		ti.Name = d.str()
		nd := d.u32()
		if d.err == nil && (nd == 0 || nd > maxDims) {
			return nil, fmt.Errorf("%w: tensor %q has %d dims", ErrFormat, ti.Name, nd)
		}
		for j := uint32(0); j < nd && d.err == nil; j++ {
			ti.Dims = append(ti.Dims, d.u64())
		}
		ti.Type = Type(d.u32())
		ti.Offset = d.u64()
		if d.err != nil {
			break
		}
		if names[ti.Name] {
			return nil, fmt.Errorf("%w: duplicate tensor %q", ErrFormat, ti.Name)
		}
		names[ti.Name] = true
		f.Tensors = append(f.Tensors, ti)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: at byte %d: %v", ErrFormat, d.pos, d.err)
	}
	f.DataOffset = int64(alignUp(uint64(d.pos), f.Alignment))
	for _, ti := range f.Tensors {
		if err := checkBlocks(ti.Name, ti.Type, ti.Dims); err != nil {
			return nil, fmt.Errorf("gguf: this reader cannot read %w", err)
		}
		if ti.Offset%f.Alignment != 0 {
			return nil, fmt.Errorf("%w: tensor %s offset %d is not a multiple of the alignment %d", ErrFormat, ti.Name, ti.Offset, f.Alignment)
		}
		var n uint64 = 1
		for _, dim := range ti.Dims {
			if dim != 0 && n > math.MaxInt64/dim {
				return nil, fmt.Errorf("%w: tensor %s dims %v overflow", ErrFormat, ti.Name, ti.Dims)
			}
			n *= dim
		}
		end := uint64(f.DataOffset) + ti.Offset + ti.Bytes()
		if n > uint64(size) || end > uint64(size) {
			return nil, fmt.Errorf("%w: tensor %s (%v %v at %d) extends past the end of the file (%d bytes)", ErrFormat, ti.Name, ti.Type, ti.Dims, ti.Offset, size)
		}
	}
	return f, nil
}

// Value returns the metadata value of key.
func (f *File) Value(key string) (any, bool) {
	for _, kv := range f.KV {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, ti := range f.Tensors {
		if ti.Name == name {
			return ti, true
		}
	}
	return TensorInfo{}, false
}

// TensorData reads the raw bytes of the named tensor.
func (f *File) TensorData(name string) ([]byte, error) {
	ti, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	b := make([]byte, ti.Bytes())
	if _, err := f.r.ReadAt(b, f.DataOffset+int64(ti.Offset)); err != nil {
		return nil, fmt.Errorf("gguf: read tensor %s: %w", name, err)
	}
	return b, nil
}

// TensorF32 reads the named F32, F16, BF16, Q8_0 or Q4_0 tensor widened (or
// dequantized) to float32, in storage order (Dims[0] fastest).
func (f *File) TensorF32(name string) ([]float32, error) {
	ti, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	b, err := f.TensorData(name)
	if err != nil {
		return nil, err
	}
	out := make([]float32, ti.Elements())
	switch ti.Type {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case F16:
		for i := range out {
			out[i] = kernels.F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = kernels.BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case Q8_0: // d·q, exact in fp32
		for blk := range len(out) / q8Block {
			src := b[blk*q8BlockBytes:]
			d := kernels.F16ToF32(binary.LittleEndian.Uint16(src))
			for i, q := range src[2 : 2+q8Block] {
				out[blk*q8Block+i] = float32(int8(q)) * d
			}
		}
	case Q4_0: // (n−8)·d, exact in fp32
		for blk := range len(out) / q8Block {
			src := b[blk*q4BlockBytes:]
			d := kernels.F16ToF32(binary.LittleEndian.Uint16(src))
			o := out[blk*q8Block:]
			for j, v := range src[2:q4BlockBytes] {
				o[j] = float32(int(v&15)-8) * d
				o[j+q8Block/2] = float32(int(v>>4)-8) * d
			}
		}
	default:
		return nil, fmt.Errorf("gguf: tensor %s has type %v; TensorF32 reads F32, F16, BF16, Q8_0 and Q4_0", name, ti.Type)
	}
	return out, nil
}

// decoder reads little-endian GGUF primitives, keeping the first error and
// refusing lengths that cannot fit in the rest of the file.
type decoder struct {
	r    *bufio.Reader
	size int64
	pos  int64
	err  error
	buf  [8]byte
}

// maxDepth bounds nested arrays in metadata.
const maxDepth = 4

func (d *decoder) read(p []byte) {
	if d.err != nil {
		clear(p)
		return
	}
	n, err := io.ReadFull(d.r, p)
	d.pos += int64(n)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("unexpected end of file")
		}
		d.err = err
	}
}

func (d *decoder) u8() uint8   { d.read(d.buf[:1]); return d.buf[0] }
func (d *decoder) u16() uint16 { d.read(d.buf[:2]); return binary.LittleEndian.Uint16(d.buf[:]) }
func (d *decoder) u32() uint32 { d.read(d.buf[:4]); return binary.LittleEndian.Uint32(d.buf[:]) }
func (d *decoder) u64() uint64 { d.read(d.buf[:8]); return binary.LittleEndian.Uint64(d.buf[:]) }

// fits reports whether n items of at least each bytes can still be read.
func (d *decoder) fits(n, each uint64) bool {
	left := uint64(d.size - d.pos)
	if d.pos > d.size {
		left = 0
	}
	if each > 0 && n > left/each {
		d.err = fmt.Errorf("length %d exceeds the %d bytes left", n, left)
		return false
	}
	return true
}

func (d *decoder) str() string {
	n := d.u64()
	if d.err != nil || !d.fits(n, 1) {
		return ""
	}
	b := make([]byte, n)
	d.read(b)
	return string(b)
}

func (d *decoder) boolean() bool {
	b := d.u8()
	if d.err == nil && b > 1 {
		d.err = fmt.Errorf("bool value %d", b)
	}
	return b == 1
}

// value reads a value of type vt, returning the Go type documented on KV.
func (d *decoder) value(vt valueType, depth int) any {
	if d.err != nil {
		return nil
	}
	switch vt {
	case vtUint8:
		return d.u8()
	case vtInt8:
		return int8(d.u8())
	case vtUint16:
		return d.u16()
	case vtInt16:
		return int16(d.u16())
	case vtUint32:
		return d.u32()
	case vtInt32:
		return int32(d.u32())
	case vtFloat32:
		return math.Float32frombits(d.u32())
	case vtBool:
		return d.boolean()
	case vtString:
		return d.str()
	case vtUint64:
		return d.u64()
	case vtInt64:
		return int64(d.u64())
	case vtFloat64:
		return math.Float64frombits(d.u64())
	case vtArray:
		if depth >= maxDepth {
			d.err = fmt.Errorf("arrays nested deeper than %d", maxDepth)
			return nil
		}
		et := valueType(d.u32())
		n := d.u64()
		return d.array(et, n, depth)
	}
	d.err = fmt.Errorf("unknown metadata value type %d", vt)
	return nil
}

func (d *decoder) array(et valueType, n uint64, depth int) any {
	minSize := map[valueType]uint64{vtUint8: 1, vtInt8: 1, vtBool: 1, vtUint16: 2, vtInt16: 2, vtUint32: 4,
		vtInt32: 4, vtFloat32: 4, vtUint64: 8, vtInt64: 8, vtFloat64: 8, vtString: 8, vtArray: 12}[et]
	if minSize == 0 {
		d.err = fmt.Errorf("unknown array element type %d", et)
		return nil
	}
	if d.err != nil || !d.fits(n, minSize) {
		return nil
	}
	switch et {
	case vtUint8:
		return readArray(d, n, d.u8)
	case vtInt8:
		return readArray(d, n, func() int8 { return int8(d.u8()) })
	case vtUint16:
		return readArray(d, n, d.u16)
	case vtInt16:
		return readArray(d, n, func() int16 { return int16(d.u16()) })
	case vtUint32:
		return readArray(d, n, d.u32)
	case vtInt32:
		return readArray(d, n, func() int32 { return int32(d.u32()) })
	case vtFloat32:
		return readArray(d, n, func() float32 { return math.Float32frombits(d.u32()) })
	case vtBool:
		return readArray(d, n, d.boolean)
	case vtString:
		return readArray(d, n, d.str)
	case vtUint64:
		return readArray(d, n, d.u64)
	case vtInt64:
		return readArray(d, n, func() int64 { return int64(d.u64()) })
	case vtFloat64:
		return readArray(d, n, func() float64 { return math.Float64frombits(d.u64()) })
	default: // vtArray: arrays of arrays come back as []any
		return readArray(d, n, func() any {
			return d.array(valueType(d.u32()), d.u64(), depth+1)
		})
	}
}

func readArray[T any](d *decoder, n uint64, get func() T) []T {
	out := make([]T, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		out = append(out, get())
	}
	return out
}
