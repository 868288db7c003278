package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// This file converts between JSON and the values a gonja template sees.
//
// Decoding keeps Python's semantics: a JSON object becomes an ordered
// *exec.Dict (Python dicts keep insertion order, and `tojson` must print the
// keys in the order the user sent them), except the empty object, which
// becomes an empty Go map because gonja treats every Dict struct as truthy
// while Python's `{}` is falsy. Arrays become []any, integers int, other
// numbers float64, null nil.
//
// Encoding (pyJSON) is Python's json.dumps(x, ensure_ascii=False, indent=...,
// separators=..., sort_keys=...), which is what transformers installs as the
// `tojson` filter of chat templates.

// decodeJSON decodes one JSON value into gonja-ready Go values.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := &exec.Dict{}
			seen := map[string]int{} // key -> index in d.Pairs
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				// A repeated key keeps its first position and takes the last
				// value, as in a Python dict.
				if i, dup := seen[key]; dup {
					d.Pairs[i].Value = exec.ToValue(v)
					continue
				}
				seen[key] = len(d.Pairs)
				d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.ToValue(v)})
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			if len(d.Pairs) == 0 {
				return map[string]any{}, nil
			}
			return d, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	case json.Number:
		return decodeNumber(t), nil
	default: // string, bool, nil
		return t, nil
	}
}

// decodeNumber returns an int for integer literals, a *big.Int for those
// beyond int64 (Python's ints are exact at any size), and a float64 for the
// rest, as Python's json module does.
func decodeNumber(n json.Number) any {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return int(i)
		}
		if i, ok := new(big.Int).SetString(s, 10); ok {
			return i
		}
	}
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// setPair sets key in d, in place when present (keeping its position, as a
// Python dict does), appended otherwise.
func setPair(d *exec.Dict, key string, v any) {
	for _, p := range d.Pairs {
		if p.Key.String() == key {
			p.Value = exec.ToValue(v)
			return
		}
	}
	d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.ToValue(v)})
}

// dictGet returns the value stored under key in an ordered dict.
func dictGet(d *exec.Dict, key string) (any, bool) {
	for _, p := range d.Pairs {
		if p.Key.IsString() && p.Key.String() == key {
			return p.Value.Interface(), true
		}
	}
	return nil, false
}

// pyJSONOptions are the keyword arguments of Python's json.dumps that chat
// templates use.
type pyJSONOptions struct {
	indent      *string // nil: single line; otherwise the per-level indent
	itemSep     string  // "" means the default: ", ", or "," with indent
	keySep      string  // "" means ": "
	sortKeys    bool
	ensureASCII bool   // escape non-ASCII as \uXXXX (transformers passes False)
	curIndent   string // the current indent while encoding
}

// pyJSON encodes v as Python's json.dumps(v, ensure_ascii=False, ...) does.
func pyJSON(v any, opts pyJSONOptions) (string, error) {
	if opts.itemSep == "" {
		if opts.indent != nil {
			opts.itemSep = ","
		} else {
			opts.itemSep = ", "
		}
	}
	if opts.keySep == "" {
		opts.keySep = ": "
	}
	var b strings.Builder
	if err := encodePy(&b, v, &opts, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

const maxJSONDepth = 1000 // Python raises RecursionError near here too

func encodePy(b *strings.Builder, v any, o *pyJSONOptions, depth int) error {
	if depth > maxJSONDepth {
		return errors.New("tojson: nesting too deep")
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
		return nil
	case *exec.Value:
		if x == nil || x.IsNil() {
			b.WriteString("null")
			return nil
		}
		return encodePy(b, x.Interface(), o, depth)
	case string:
		writePyString(b, x, o.ensureASCII)
		return nil
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
		return nil
	case int:
		b.WriteString(strconv.Itoa(x))
		return nil
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
		return nil
	case float64:
		b.WriteString(pyFloat(x, true))
		return nil
	case *big.Int:
		b.WriteString(x.String())
		return nil
	case *exec.Dict:
		return encodePyObject(b, x.Pairs, o, depth)
	case exec.Dict:
		return encodePyObject(b, x.Pairs, o, depth)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // Go maps have no order; sorted is deterministic
		pairs := make([]*exec.Pair, len(keys))
		for i, k := range keys {
			pairs[i] = &exec.Pair{Key: exec.AsValue(k), Value: exec.ToValue(x[k])}
		}
		return encodePyObject(b, pairs, o, depth)
	case []any:
		return encodePyArray(b, len(x), func(i int) any { return x[i] }, o, depth)
	case exec.ValuesList:
		return encodePyArray(b, len(x), func(i int) any { return x[i] }, o, depth)
	case []*exec.Value:
		return encodePyArray(b, len(x), func(i int) any { return x[i] }, o, depth)
	}
	// Other Go values reach here through gonja built-ins (e.g. []string from a
	// method, int sizes, arrays of *Value). Handle them by kind.
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			b.WriteString("null")
			return nil
		}
		return encodePy(b, rv.Elem().Interface(), o, depth)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(rv.Int(), 10))
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(rv.Uint(), 10))
		return nil
	case reflect.Float32:
		b.WriteString(pyFloat(rv.Float(), true))
		return nil
	case reflect.String:
		writePyString(b, rv.String(), o.ensureASCII)
		return nil
	case reflect.Bool:
		return encodePy(b, rv.Bool(), o, depth)
	case reflect.Slice, reflect.Array:
		return encodePyArray(b, rv.Len(), func(i int) any { return rv.Index(i).Interface() }, o, depth)
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		m := make(map[string]any, rv.Len())
		for _, k := range rv.MapKeys() {
			m[k.String()] = rv.MapIndex(k).Interface()
		}
		return encodePy(b, m, o, depth)
	}
	return fmt.Errorf("tojson: object of type %T is not JSON serializable", v)
}

func encodePyObject(b *strings.Builder, pairs []*exec.Pair, o *pyJSONOptions, depth int) error {
	if len(pairs) == 0 {
		b.WriteString("{}")
		return nil
	}
	if o.sortKeys {
		pairs = append([]*exec.Pair(nil), pairs...)
		sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].Key.String() < pairs[j].Key.String() })
	}
	b.WriteByte('{')
	inner, sep := o.open(b)
	for i, p := range pairs {
		if i > 0 {
			b.WriteString(sep)
		}
		if err := writePyKey(b, p.Key, o.ensureASCII); err != nil {
			return err
		}
		b.WriteString(o.keySep)
		if err := encodePy(b, p.Value, o, depth+1); err != nil {
			return err
		}
	}
	o.close(b, inner)
	b.WriteByte('}')
	return nil
}

func encodePyArray(b *strings.Builder, n int, at func(int) any, o *pyJSONOptions, depth int) error {
	if n == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	inner, sep := o.open(b)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(sep)
		}
		if err := encodePy(b, at(i), o, depth+1); err != nil {
			return err
		}
	}
	o.close(b, inner)
	b.WriteByte(']')
	return nil
}

// open starts a non-empty container: with indent it writes the newline and
// the deeper indent and returns the outer indent to restore; sep is the
// separator between items.
func (o *pyJSONOptions) open(b *strings.Builder) (outer, sep string) {
	outer = o.curIndent
	if o.indent == nil {
		return outer, o.itemSep
	}
	o.curIndent += *o.indent
	b.WriteByte('\n')
	b.WriteString(o.curIndent)
	return outer, o.itemSep + "\n" + o.curIndent
}

func (o *pyJSONOptions) close(b *strings.Builder, outer string) {
	if o.indent == nil {
		return
	}
	o.curIndent = outer
	b.WriteByte('\n')
	b.WriteString(outer)
}

// writePyKey writes a dict key as json.dumps does: strings as is, and
// Python's coercion of int, float, bool and None keys to strings.
func writePyKey(b *strings.Builder, k *exec.Value, ascii bool) error {
	switch {
	case k.IsString():
		writePyString(b, k.String(), ascii)
	case k.IsNil():
		b.WriteString(`"null"`)
	case k.IsBool():
		if k.Bool() {
			b.WriteString(`"true"`)
		} else {
			b.WriteString(`"false"`)
		}
	case k.IsInteger():
		b.WriteString(`"` + strconv.Itoa(k.Integer()) + `"`)
	case k.IsFloat():
		b.WriteString(`"` + pyFloat(k.Float(), true) + `"`)
	default:
		return fmt.Errorf("tojson: keys must be str, int, float, bool or None, not %T", k.Interface())
	}
	return nil
}

// writePyString writes s as a JSON string the way Python's json module
// does: '"', '\\' and control characters below 0x20 are escaped (short forms
// for \b \f \n \r \t, \u00XX otherwise), there is no HTML escaping, and
// non-ASCII text is written as is, or, with ascii, as \uXXXX escapes (UTF-16
// surrogate pairs beyond the BMP).
func writePyString(b *strings.Builder, s string, ascii bool) {
	const hex = "0123456789abcdef"
	u4 := func(r rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[(r>>shift)&0xf])
		}
	}
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x80 {
			if !ascii {
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteString(s[start:i])
			if r >= 0x10000 {
				hi, lo := utf16.EncodeRune(r)
				u4(hi)
				u4(lo)
			} else {
				u4(r)
			}
			i += size
			start = i
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' && !(ascii && c == 0x7f) {
			i++
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			u4(rune(c))
		}
		i++
		start = i
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// pyFloat formats f as Python's repr(float) (json=true: NaN and Infinity as
// json.dumps spells them; false: nan and inf as str() does).
// repr uses the shortest round-tripping digits, in positional notation when
// the decimal exponent is in [-4, 16) and in exponent notation otherwise,
// with at least two exponent digits.
func pyFloat(f float64, json bool) string {
	switch {
	case math.IsNaN(f):
		if json {
			return "NaN"
		}
		return "nan"
	case math.IsInf(f, 1):
		if json {
			return "Infinity"
		}
		return "inf"
	case math.IsInf(f, -1):
		if json {
			return "-Infinity"
		}
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // e.g. -1.2345e+06
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
	}
	var s string
	switch point := exp + 1; {
	case point <= 0:
		s = "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		s = digits + strings.Repeat("0", point-len(digits)) + ".0"
	default:
		s = digits[:point] + "." + digits[point:]
	}
	return sign + s
}
