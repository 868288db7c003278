package safetensors

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxHeaderSize bounds the JSON header, as in the reference implementation:
// a longer header length is rejected before anything is allocated.
const maxHeaderSize = 100_000_000

// metadataKey is the reserved header key holding string → string metadata.
const metadataKey = "__metadata__"

// entry is one tensor of a file, as validated by parseHeader.
type entry struct {
	name       string
	dtype      DType
	shape      []int
	numel      int
	begin, end int64 // byte offsets into the data section, begin <= end
}

func (e *entry) info() TensorInfo {
	return TensorInfo{Name: e.name, DType: e.dtype, Shape: slices.Clone(e.shape), Size: e.end - e.begin}
}

// parseHeader parses and validates hdr, the JSON header of the file at path
// whose data section holds dataLen bytes. It returns the tensors in header
// order and the metadata (nil if absent). Every error is an *Error matching
// ErrFormat.
func parseHeader(path string, hdr []byte, dataLen int64) ([]*entry, map[string]string, error) {
	if !utf8.Valid(hdr) {
		return nil, nil, formatErr(path, "", "header is not valid UTF-8")
	}
	var (
		entries []*entry
		meta    map[string]string
	)
	err := decodeObject(hdr, func(key string, val json.RawMessage) error {
		if key == metadataKey {
			m, err := parseMetadata(path, val)
			meta = m
			return err
		}
		if key == "" {
			return formatErr(path, "", "header lists a tensor with an empty name")
		}
		e, err := parseEntry(path, key, val, dataLen)
		if err != nil {
			return err
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		var dup *dupKeyError
		var own *Error
		switch {
		case errors.As(err, &own):
			return nil, nil, err
		case errors.As(err, &dup) && dup.key == metadataKey:
			return nil, nil, formatErr(path, "", "%s given twice", metadataKey)
		case errors.As(err, &dup):
			return nil, nil, formatErr(path, dup.key, "listed twice in the header")
		case errors.Is(err, errNotObject):
			return nil, nil, formatErr(path, "", "header is not a JSON object (not a safetensors file?)")
		default:
			return nil, nil, formatErr(path, "", "invalid JSON header: %v", jsonErrText(err))
		}
	}
	if err := checkLayout(path, entries, dataLen); err != nil {
		return nil, nil, err
	}
	return entries, meta, nil
}

// checkLayout checks that the tensors, sorted by offset, tile the data
// section exactly: no overlap, no gap, nothing left over at the end. This is
// the reference implementation's rule.
func checkLayout(path string, entries []*entry, dataLen int64) error {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b *entry) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), strings.Compare(a.name, b.name))
	})
	var prev *entry
	for _, e := range sorted {
		var at int64
		if prev != nil {
			at = prev.end
		}
		switch {
		case e.begin < at:
			return formatErr(path, e.name, "data_offsets [%d, %d] overlap tensor %q at [%d, %d]",
				e.begin, e.end, prev.name, prev.begin, prev.end)
		case e.begin > at && prev == nil:
			return formatErr(path, e.name, "data_offsets [%d, %d] leave the first %d bytes of the data section unused",
				e.begin, e.end, e.begin)
		case e.begin > at:
			return formatErr(path, e.name, "data_offsets [%d, %d] leave a gap of %d bytes after tensor %q at [%d, %d]",
				e.begin, e.end, e.begin-at, prev.name, prev.begin, prev.end)
		}
		prev = e
	}
	switch {
	case prev == nil && dataLen > 0:
		return formatErr(path, "", "header lists no tensors but the data section holds %d bytes", dataLen)
	case prev != nil && prev.end < dataLen:
		return formatErr(path, prev.name, "last tensor ends at %d but the data section holds %d bytes (%d trailing bytes belong to no tensor)",
			prev.end, dataLen, dataLen-prev.end)
	}
	return nil
}

// parseEntry parses the header entry of tensor name.
func parseEntry(path, name string, raw json.RawMessage, dataLen int64) (*entry, error) {
	var dtypeRaw, shapeRaw, offRaw json.RawMessage
	err := decodeObject(raw, func(key string, val json.RawMessage) error {
		switch key { // other fields are ignored, as by the reference
		case "dtype":
			dtypeRaw = val
		case "shape":
			shapeRaw = val
		case "data_offsets":
			offRaw = val
		}
		return nil
	})
	var dup *dupKeyError
	switch {
	case errors.As(err, &dup):
		return nil, formatErr(path, name, "field %q given twice", dup.key)
	case err != nil:
		return nil, formatErr(path, name, "header entry is not a JSON object")
	case dtypeRaw == nil:
		return nil, formatErr(path, name, `missing "dtype"`)
	case shapeRaw == nil:
		return nil, formatErr(path, name, `missing "shape"`)
	case offRaw == nil:
		return nil, formatErr(path, name, `missing "data_offsets"`)
	}

	e := &entry{name: name}
	ds, ok := jsonString(dtypeRaw)
	if !ok {
		return nil, formatErr(path, name, `"dtype" is %s, not a string`, clip(string(dtypeRaw)))
	}
	if e.dtype, ok = parseDType(ds); !ok {
		return nil, formatErr(path, name, "unknown dtype %q", clip(ds))
	}

	dims, bad, ok := uintArray(shapeRaw, strconv.IntSize)
	if !ok {
		return nil, formatErr(path, name, `"shape" %s`, bad)
	}
	e.shape = make([]int, len(dims))
	for i, d := range dims {
		e.shape[i] = int(d)
	}
	numel, ok := numElements(e.shape)
	if !ok {
		return nil, formatErr(path, name, "shape %s has too many elements", shapeString(e.shape))
	}
	e.numel = numel
	if int64(numel) > math.MaxInt64/int64(e.dtype.Size()) {
		return nil, formatErr(path, name, "shape %s of %v is too large", shapeString(e.shape), e.dtype)
	}
	need := int64(numel) * int64(e.dtype.Size())

	offs, bad, ok := uintArray(offRaw, 64)
	if !ok {
		return nil, formatErr(path, name, `"data_offsets" %s`, bad)
	}
	if len(offs) != 2 {
		return nil, formatErr(path, name, `"data_offsets" has %d elements, want [begin, end]`, len(offs))
	}
	e.begin, e.end = offs[0], offs[1]
	switch {
	case e.begin > e.end:
		return nil, formatErr(path, name, "data_offsets [%d, %d]: begin is after end", e.begin, e.end)
	case e.end-e.begin != need:
		return nil, formatErr(path, name, "data_offsets [%d, %d] but shape %s of %v needs %d bytes",
			e.begin, e.end, shapeString(e.shape), e.dtype, need)
	case e.end > dataLen:
		return nil, formatErr(path, name, "data_offsets [%d, %d] reach past the end of the data section (%d bytes; file truncated?)",
			e.begin, e.end, dataLen)
	}
	return e, nil
}

// parseMetadata parses the "__metadata__" object; null means none.
func parseMetadata(path string, raw json.RawMessage) (map[string]string, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	meta := make(map[string]string)
	err := decodeObject(raw, func(key string, val json.RawMessage) error {
		s, ok := jsonString(val)
		if !ok {
			return formatErr(path, "", "%s key %q has value %s, not a string", metadataKey, clip(key), clip(string(val)))
		}
		meta[key] = s
		return nil
	})
	var dup *dupKeyError
	var own *Error
	switch {
	case errors.As(err, &own):
		return nil, err
	case errors.As(err, &dup):
		return nil, formatErr(path, "", "%s key %q given twice", metadataKey, clip(dup.key))
	case err != nil:
		return nil, formatErr(path, "", "%s is not a JSON object", metadataKey)
	}
	return meta, nil
}

// numElements returns the product of shape, or false if a partial product
// overflows an int (as the reference does, even when a later dimension is
// zero) or a dimension is negative.
func numElements(shape []int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d < 0 || (d != 0 && n > math.MaxInt/d) {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// shapeString formats a shape as the error messages show it: [10,10].
func shapeString(shape []int) string {
	const show = 8
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i == show {
			b.WriteString(",...")
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteByte(']')
	return b.String()
}

// clip shortens s for an error message and blanks control characters, so
// that the message stays on one line.
func clip(s string) string {
	const max = 40
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// jsonString decodes raw if it is a JSON string.
func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// uintArray decodes raw as a JSON array of integers in [0, 2^(bits-1)).
// On failure it returns a phrase saying what is wrong.
func uintArray(raw json.RawMessage, bits int) ([]int64, string, bool) {
	var elems []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &elems) != nil {
		return nil, "is " + clip(string(raw)) + ", not an array of integers", false
	}
	out := make([]int64, len(elems))
	for i, el := range elems {
		s := string(el)
		if s == "" || strings.Trim(s, "0123456789") != "" {
			if s != "" && s[0] == '-' {
				return nil, "holds " + clip(s) + ", which is negative", false
			}
			return nil, "holds " + clip(s) + ", not an integer", false
		}
		v, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return nil, "holds " + clip(s) + ", which overflows", false
		}
		out[i] = v
	}
	return out, "", true
}

var errNotObject = errors.New("not a JSON object")

type dupKeyError struct{ key string }

func (e *dupKeyError) Error() string { return fmt.Sprintf("key %q given twice", e.key) }

// decodeObject calls each for every member of the JSON object in data, in
// order. It fails with errNotObject if data is not an object, with a
// *dupKeyError on a repeated key, and if anything but whitespace follows
// the object; an error from each stops it and is returned as is.
func decodeObject(data []byte, each func(key string, val json.RawMessage) error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return errNotObject
	}
	seen := make(map[string]struct{})
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string) // the decoder only yields strings as keys
		if _, dup := seen[key]; dup {
			return &dupKeyError{key}
		}
		seen[key] = struct{}{}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return err
		}
		if err := each(key, val); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return err
	}
	switch _, err := dec.Token(); err {
	case io.EOF:
		return nil
	case nil:
		return errors.New("data after the JSON object")
	default:
		return err
	}
}

// jsonErrText describes a JSON decoding error in one line.
func jsonErrText(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of JSON"
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("%v (at byte %d)", syn, syn.Offset)
	}
	return err.Error()
}
