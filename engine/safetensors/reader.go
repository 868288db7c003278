package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"

	"github.com/artgo/art/engine/kernels"
)

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int // [] for a scalar
	Size  int64 // bytes of data: NumElements() × DType.Size()
}

// NumElements returns the product of Shape (1 for a scalar).
func (t TensorInfo) NumElements() int {
	n, _ := numElements(t.Shape)
	return n
}

// File is one open safetensors file. Its header has been validated; its
// data is read on demand. A File is safe for concurrent use.
type File struct {
	path    string
	r       io.ReaderAt
	closer  io.Closer // nil if the caller owns r
	dataOff int64     // file offset of the data section: 8 + header length
	tensors map[string]*entry
	names   []string // sorted
	meta    map[string]string
}

// Open opens the safetensors file at path and validates its header (see the
// package documentation for the rules).
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &Error{Path: path, Err: err}
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, formatErr(path, "", "not a regular file")
	}
	sf, err := NewFile(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	sf.closer = f
	return sf, nil
}

// NewFile reads a safetensors file of size bytes from r and validates its
// header. name is used only in error messages. The File reads from r
// whenever tensor data is asked for; r must stay valid until then, and
// Close does not close it.
func NewFile(r io.ReaderAt, size int64, name string) (*File, error) {
	if size < 8 {
		return nil, formatErr(name, "", "file is %d bytes, too short for the 8-byte header length (not a safetensors file?)", size)
	}
	var prefix [8]byte
	if err := readFull(r, prefix[:], 0); err != nil {
		return nil, &Error{Path: name, Err: fmt.Errorf("read header length: %w", err)}
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	switch {
	case n > maxHeaderSize:
		return nil, formatErr(name, "", "header length %d exceeds the limit of %d bytes (not a safetensors file?)", n, maxHeaderSize)
	case n > uint64(size-8):
		return nil, formatErr(name, "", "header length %d exceeds the %d bytes that follow it (truncated or not a safetensors file?)", n, size-8)
	case n == 0:
		return nil, formatErr(name, "", "header is empty")
	}
	hdr := make([]byte, n)
	if err := readFull(r, hdr, 8); err != nil {
		return nil, &Error{Path: name, Err: fmt.Errorf("read header: %w", err)}
	}
	dataOff := 8 + int64(n)
	entries, meta, err := parseHeader(name, hdr, size-dataOff)
	if err != nil {
		return nil, err
	}
	f := &File{
		path:    name,
		r:       r,
		dataOff: dataOff,
		tensors: make(map[string]*entry, len(entries)),
		names:   make([]string, 0, len(entries)),
		meta:    meta,
	}
	for _, e := range entries {
		f.tensors[e.name] = e
		f.names = append(f.names, e.name)
	}
	slices.Sort(f.names)
	return f, nil
}

// Close closes the underlying file (not the reader given to NewFile).
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	return f.closer.Close()
}

// Path returns the path or name the File was opened with.
func (f *File) Path() string { return f.path }

// Names returns the tensor names in sorted order. The caller may modify the
// returned slice.
func (f *File) Names() []string { return slices.Clone(f.names) }

// Info describes tensor name; ok is false if there is no such tensor.
func (f *File) Info(name string) (info TensorInfo, ok bool) {
	e, ok := f.tensors[name]
	if !ok {
		return TensorInfo{}, false
	}
	return e.info(), true
}

// Metadata returns a copy of the header's "__metadata__", or nil if it has
// none.
func (f *File) Metadata() map[string]string { return maps.Clone(f.meta) }

// ReadRaw returns the bytes of tensor name as stored: row-major,
// little-endian.
func (f *File) ReadRaw(name string) ([]byte, error) {
	e, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, e.end-e.begin)
	return buf, f.readAt(e, buf, 0)
}

// ReadInto reads the bytes of tensor name into dst, whose length must equal
// the tensor's Size.
func (f *File) ReadInto(name string, dst []byte) error {
	e, err := f.lookup(name)
	if err != nil {
		return err
	}
	if int64(len(dst)) != e.end-e.begin {
		return &Error{Path: f.path, Tensor: name, Err: fmt.Errorf("ReadInto: buffer holds %d bytes, tensor has %d", len(dst), e.end-e.begin)}
	}
	return f.readAt(e, dst, 0)
}

// ReadF32 returns tensor name as float32s. F32 is read as is, F16 and BF16
// are widened exactly, and F64 is rounded to the nearest float32 (values
// beyond its range become ±Inf). Other dtypes fail with ErrDType.
func (f *File) ReadF32(name string) ([]float32, error) {
	e, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	dst := make([]float32, e.numel)
	return dst, f.readF32(e, dst)
}

// ReadF32Into is ReadF32 into dst, whose length must equal the tensor's
// element count. It converts in chunks, so it needs no buffer the size of
// the tensor.
func (f *File) ReadF32Into(name string, dst []float32) error {
	e, err := f.lookup(name)
	if err != nil {
		return err
	}
	if len(dst) != e.numel {
		return &Error{Path: f.path, Tensor: name, Err: fmt.Errorf("ReadF32Into: buffer holds %d values, tensor has %d", len(dst), e.numel)}
	}
	return f.readF32(e, dst)
}

// ReadU16 returns the raw 16-bit patterns of tensor name, whose dtype must
// be two bytes wide (F16, BF16, I16 or U16); others fail with ErrDType. This
// is how half-precision weights are loaded without widening.
func (f *File) ReadU16(name string) ([]uint16, error) {
	e, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	if e.dtype.Size() != 2 {
		return nil, f.dtypeErr(e, "uint16")
	}
	dst := make([]uint16, e.numel)
	err = f.readChunks(e, func(chunk []byte, i int) {
		out := dst[i : i+len(chunk)/2]
		for j := range out {
			out[j] = binary.LittleEndian.Uint16(chunk[2*j : 2*j+2])
		}
	})
	return dst, err
}

func (f *File) readF32(e *entry, dst []float32) error {
	var conv func(chunk []byte, i int)
	switch e.dtype {
	case F32:
		conv = func(chunk []byte, i int) {
			out := dst[i : i+len(chunk)/4]
			for j := range out {
				out[j] = math.Float32frombits(binary.LittleEndian.Uint32(chunk[4*j : 4*j+4]))
			}
		}
	case BF16:
		conv = func(chunk []byte, i int) {
			out := dst[i : i+len(chunk)/2]
			for j := range out {
				out[j] = kernels.BF16ToF32(binary.LittleEndian.Uint16(chunk[2*j : 2*j+2]))
			}
		}
	case F16:
		conv = func(chunk []byte, i int) {
			out := dst[i : i+len(chunk)/2]
			for j := range out {
				out[j] = kernels.F16ToF32(binary.LittleEndian.Uint16(chunk[2*j : 2*j+2]))
			}
		}
	case F64:
		conv = func(chunk []byte, i int) {
			out := dst[i : i+len(chunk)/8]
			for j := range out {
				out[j] = float32(math.Float64frombits(binary.LittleEndian.Uint64(chunk[8*j : 8*j+8])))
			}
		}
	default:
		return f.dtypeErr(e, "float32")
	}
	return f.readChunks(e, conv)
}

// chunkBytes is how much tensor data the converting reads hold at once; a
// multiple of every dtype size.
const chunkBytes = 1 << 18

// readChunks reads e's data in chunks of whole elements and calls conv with
// each chunk and the index of its first element.
func (f *File) readChunks(e *entry, conv func(chunk []byte, i int)) error {
	size := e.end - e.begin
	buf := make([]byte, min(size, chunkBytes))
	es := int64(e.dtype.Size())
	for off := int64(0); off < size; {
		chunk := buf[:min(size-off, int64(len(buf)))]
		if err := f.readAt(e, chunk, off); err != nil {
			return err
		}
		conv(chunk, int(off/es))
		off += int64(len(chunk))
	}
	return nil
}

// readAt fills p from e's data starting off bytes in.
func (f *File) readAt(e *entry, p []byte, off int64) error {
	if err := readFull(f.r, p, f.dataOff+e.begin+off); err != nil {
		return &Error{Path: f.path, Tensor: e.name, Err: fmt.Errorf("read data: %w", err)}
	}
	return nil
}

func (f *File) lookup(name string) (*entry, error) {
	e, ok := f.tensors[name]
	if !ok {
		return nil, notFound(f.path, name)
	}
	return e, nil
}

func (f *File) dtypeErr(e *entry, as string) error {
	return &Error{Path: f.path, Tensor: e.name, Err: &kindError{fmt.Sprintf("cannot read %v as %s", e.dtype, as), ErrDType}}
}

// readFull reads len(p) bytes at off; a short read is io.ErrUnexpectedEOF
// (the file shrank after it was opened).
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
