package safetensors

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/atomicfile"
)

// Tensor is a tensor to write.
type Tensor struct {
	Name  string
	DType DType
	Shape []int  // nil or [] for a scalar
	Data  []byte // row-major, little-endian; len = product(Shape) × DType.Size()
	// bits, set by FromU16 and FromU16Func in place of Data, gives the
	// 16-bit elements when the tensor is written, encoded as they are
	// written: saving a model holds no second copy of its weights.
	bits func() []uint16
	// f32, set by FromF32 for F32 storage in place of Data, is likewise
	// encoded as it is written.
	f32 []float32
}

// size is the number of bytes the tensor's data takes in the file.
func (t *Tensor) size() int {
	if t.f32 != nil {
		return 4 * len(t.f32)
	}
	if t.bits != nil {
		n := 2
		for _, d := range t.Shape {
			n *= d
		}
		return n
	}
	return len(t.Data)
}

// writeData writes the tensor's data to w.
func (t *Tensor) writeData(w io.Writer) error {
	switch {
	case t.f32 != nil:
		return writeLE(w, t.f32, 4, func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) })
	case t.bits != nil:
		all := t.bits()
		if 2*len(all) != t.size() {
			return fmt.Errorf("tensor %q: shape %s holds %d elements, its data %d", t.Name, shapeString(t.Shape), t.size()/2, len(all))
		}
		return writeLE(w, all, 2, binary.LittleEndian.PutUint16)
	}
	_, err := w.Write(t.Data)
	return err
}

// writeLE writes vals to w, each as size little-endian bytes (put), through
// one small buffer.
func writeLE[T uint16 | float32](w io.Writer, vals []T, size int, put func([]byte, T)) error {
	var buf [4096]byte
	for len(vals) > 0 {
		n := min(len(vals), len(buf)/size)
		for i, v := range vals[:n] {
			put(buf[size*i:], v)
		}
		if _, err := w.Write(buf[:size*n]); err != nil {
			return err
		}
		vals = vals[n:]
	}
	return nil
}

// FromF32 returns a tensor holding data stored as dtype, which must be F32,
// F16, BF16 or F64; F16 and BF16 round to nearest, ties to even. It panics
// for any other dtype. Shape is copied; Write checks it against len(data).
func FromF32(name string, dtype DType, shape []int, data []float32) Tensor {
	t := Tensor{Name: name, DType: dtype, Shape: slices.Clone(shape)}
	switch dtype {
	case F32: // encoded as written: no copy of a model's weights
		t.f32 = data
		if data == nil {
			t.Data = []byte{}
		}
	case F64:
		t.Data = make([]byte, 8*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint64(t.Data[8*i:], math.Float64bits(float64(v)))
		}
	case BF16:
		t.Data = make([]byte, 2*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint16(t.Data[2*i:], kernels.F32ToBF16(v))
		}
	case F16:
		t.Data = make([]byte, 2*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint16(t.Data[2*i:], kernels.F32ToF16(v))
		}
	default:
		panic("safetensors: FromF32 with dtype " + dtype.String())
	}
	return t
}

// FromU16 returns a tensor whose elements are the 16-bit patterns bits, such
// as bfloat16 weights kept as uint16. dtype must be two bytes wide (F16,
// BF16, I16 or U16); FromU16 panics otherwise. Shape is copied; bits is
// not (a model's weights are not duplicated to be saved), so it must not
// change until the tensor is written.
func FromU16(name string, dtype DType, shape []int, bits []uint16) Tensor {
	t := FromU16Func(name, dtype, shape, func() []uint16 { return bits })
	if n := 2 * len(bits); n != t.size() {
		// Data of bits' length instead, so that Write reports the
		// mismatch before writing anything.
		t.Data, t.bits = make([]byte, n), nil
	}
	return t
}

// FromU16Func is FromU16 for elements produced only when the tensor is
// written, by bits (which must return as many as shape holds): a model is
// then encoded one weight at a time, never all of it at once.
func FromU16Func(name string, dtype DType, shape []int, bits func() []uint16) Tensor {
	if dtype.Size() != 2 {
		panic("safetensors: FromU16 with dtype " + dtype.String())
	}
	return Tensor{Name: name, DType: dtype, Shape: slices.Clone(shape), bits: bits}
}

// Write writes tensors and metadata (which may be nil) to w in the
// safetensors format, laid out as the reference writer does (see the
// package documentation). It checks every tensor before writing anything:
// names must be non-empty, unique, valid UTF-8 and not "__metadata__", and
// each Data must match its DType and Shape. Write does not retain tensors.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	order, hdr, err := prepare("", tensors, metadata)
	if err != nil {
		return err
	}
	if err := emit(w, order, hdr); err != nil {
		return &Error{Err: err}
	}
	return nil
}

// WriteFile writes tensors and metadata to path atomically: a reader sees
// the old file or the complete new one, never a partial one.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	order, hdr, err := prepare(path, tensors, metadata)
	if err != nil {
		return err
	}
	err = atomicfile.Write(path, fileMode, func(w io.Writer) error {
		return emit(w, order, hdr)
	})
	if err != nil {
		return &Error{Path: path, Err: err}
	}
	return nil
}

// emit writes the header length, the header and the tensors' data.
func emit(w io.Writer, order []*Tensor, hdr []byte) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	bw.Write(n[:])
	bw.Write(hdr)
	for _, t := range order {
		if err := t.writeData(bw); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// prepare validates tensors and returns them in layout order with the
// padded JSON header. path is for error messages.
func prepare(path string, tensors []Tensor, metadata map[string]string) ([]*Tensor, []byte, error) {
	if err := checkTensors(path, tensors); err != nil {
		return nil, nil, err
	}
	order := make([]*Tensor, len(tensors))
	for i := range tensors {
		order[i] = &tensors[i]
	}
	// The reference's layout: dtype descending (so every tensor is aligned
	// to its element size), then name.
	slices.SortFunc(order, func(a, b *Tensor) int {
		return cmp.Or(cmp.Compare(b.DType, a.DType), strings.Compare(a.Name, b.Name))
	})

	var b bytes.Buffer
	b.WriteByte('{')
	if len(metadata) > 0 {
		b.WriteString(`"__metadata__":{`)
		for i, k := range slices.Sorted(maps.Keys(metadata)) {
			v := metadata[k]
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, nil, formatErr(path, "", "%s key %q: key or value is not valid UTF-8", metadataKey, clip(k))
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
			b.WriteByte(':')
			writeJSONString(&b, v)
		}
		b.WriteByte('}')
	}
	var off int64
	for i, t := range order {
		if i > 0 || len(metadata) > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, t.Name)
		b.WriteString(`:{"dtype":"`)
		b.WriteString(t.DType.String())
		b.WriteString(`","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		end := off + int64(t.size())
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > maxHeaderSize {
		return nil, nil, formatErr(path, "", "header would be %d bytes, over the limit of %d", b.Len(), maxHeaderSize)
	}
	return order, b.Bytes(), nil
}

// checkTensors validates tensors to write: each one, and that no name is
// given twice.
func checkTensors(path string, tensors []Tensor) error {
	seen := make(map[string]struct{}, len(tensors))
	for i := range tensors {
		t := &tensors[i]
		if err := checkTensor(path, t); err != nil {
			return err
		}
		if _, dup := seen[t.Name]; dup {
			return formatErr(path, t.Name, "given twice")
		}
		seen[t.Name] = struct{}{}
	}
	return nil
}

// checkTensor validates one tensor to write.
func checkTensor(path string, t *Tensor) error {
	switch {
	case t.Name == "":
		return formatErr(path, "", "tensor with an empty name")
	case t.Name == metadataKey:
		return formatErr(path, t.Name, "name is reserved for metadata")
	case !utf8.ValidString(t.Name):
		return formatErr(path, t.Name, "name is not valid UTF-8")
	case !t.DType.valid():
		return formatErr(path, t.Name, "invalid dtype %v", t.DType)
	}
	numel, ok := numElements(t.Shape)
	if !ok || numel > math.MaxInt/t.DType.Size() {
		return formatErr(path, t.Name, "invalid shape %s", shapeString(t.Shape))
	}
	if need := numel * t.DType.Size(); need != t.size() {
		return formatErr(path, t.Name, "shape %s of %v needs %d bytes but Data holds %d",
			shapeString(t.Shape), t.DType, need, t.size())
	}
	return nil
}

// writeJSONString writes s as a JSON string escaped as the reference
// (serde_json) escapes it: only '"', '\\' and control characters, so that
// names with '<', '&' or non-ASCII letters stay as they are.
func writeJSONString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// fileMode is the permission of written files (before the umask).
const fileMode os.FileMode = 0o644
