package grammar

// phase is where a frame is within its value.
type phase uint8

const (
	rootStart phase = iota // the document has not started
	rootDone               // the document's value is written

	objStart // before '{'
	objOpen  // after '{'
	objKey   // inside a declared key: k bytes of candidates lo..hi of keys[slot]
	objColon // after a key
	objValue // after ':' (one space may come first)
	objAfter // after a value
	objComma // after ',' (one space may come first)
	arrStart // before '['
	arrOpen  // after '['
	arrAfter // after an item
	arrComma // after ',' (one space may come first)
	strStart // before the opening quote
	strIn    // inside the string
	litIn    // matching one of a literal set
	numIn    // writing a number
)

// frame is the state of one value being written.
type frame struct {
	n     *node
	child *node // the value a startVal outcome begins
	ph    phase
	space bool // the optional space may come now

	slot      int32 // object: keys[slot] lists the next key's candidates
	prop      int32 // object: the property whose key was matched
	k, lo, hi int32 // literal and declared-key matching: bytes matched, candidates
	count     int32 // array: items so far; string: characters so far

	// strings
	esc            uint8 // 1 after '\', 2..5 within the hex digits of \u
	need           uint8 // UTF-8 continuation bytes still to come
	nextLo, nextHi byte  // the range of the next continuation byte
	cp             rune  // the character being decoded
	re             []uint32

	num number
}

func newFrame(n *node) frame {
	f := frame{n: n}
	switch n.kind {
	case kObject:
		f.ph = objStart
	case kArray:
		f.ph = arrStart
	case kString:
		f.ph = strStart
	case kNumber:
		f.ph = numIn
	case kLiteral:
		f.ph, f.hi = litIn, int32(len(n.lits)-1)
	}
	return f
}

// canEnd reports whether the value is complete without another byte (a
// number or a literal such as 1 in enum [1, 12]).
func (f *frame) canEnd() bool {
	switch f.ph {
	case numIn:
		return f.num.complete(f.n)
	case litIn:
		return f.k > 0 && int(f.k) == len(f.n.lits[f.lo])
	}
	return false
}

// freeKey is the key of an object with undeclared keys.
var freeKey = freeString

// feed offers byte c to the frame.
func (f *frame) feed(c byte) outcome {
	n := f.n
	switch f.ph {
	case rootStart:
		f.ph = rootDone // f.child is the root value
		return startVal
	case rootDone:
		return reject

	case objStart:
		if c == '{' {
			f.ph = objOpen
			return consumed
		}
	case objOpen, objComma:
		if f.ph == objComma && f.space && c == ' ' {
			f.space = false
			return consumed
		}
		if f.ph == objOpen && c == '}' && (n.free || n.closable[0]) {
			return finished
		}
		if c != '"' {
			return reject
		}
		if n.free {
			f.ph, f.child = objColon, freeKey
			return startVal
		}
		if len(n.keys[f.slot].keys) == 0 {
			return reject
		}
		f.ph, f.k, f.lo, f.hi = objKey, 1, 0, int32(len(n.keys[f.slot].keys)-1)
		return consumed
	case objKey:
		ks := &n.keys[f.slot]
		lo, hi, ok := narrow(ks.keys, f.lo, f.hi, f.k, c)
		if !ok {
			return reject
		}
		f.lo, f.hi, f.k = lo, hi, f.k+1
		if int(f.k) == len(ks.keys[lo]) { // keys are quoted: a complete one is the only candidate left
			f.ph, f.prop = objColon, int32(ks.props[lo])
		}
		return consumed
	case objColon:
		if c == ':' {
			f.ph, f.space = objValue, true
			return consumed
		}
	case objValue:
		if f.space && c == ' ' {
			f.space = false
			return consumed
		}
		f.ph, f.space = objAfter, false
		if n.free {
			f.child = anyValue
		} else {
			f.child = n.props[f.prop].val
		}
		return startVal
	case objAfter:
		switch {
		case c == ',' && n.free:
			f.ph, f.space = objComma, true
			return consumed
		case c == ',' && len(n.keys[f.prop+1].keys) > 0:
			f.ph, f.space, f.slot = objComma, true, f.prop+1
			return consumed
		case c == '}' && (n.free || n.closable[f.prop+1]):
			return finished
		}

	case arrStart:
		if c == '[' {
			f.ph = arrOpen
			return consumed
		}
	case arrOpen:
		if c == ']' && n.minItems == 0 {
			return finished
		}
		if n.maxItems == 0 {
			return reject
		}
		f.ph, f.child = arrAfter, n.items
		return startVal
	case arrAfter:
		switch {
		case c == ',' && (n.maxItems < 0 || int(f.count) < n.maxItems):
			f.ph, f.space = arrComma, true
			return consumed
		case c == ']' && int(f.count) >= n.minItems:
			return finished
		}
	case arrComma:
		if f.space && c == ' ' {
			f.space = false
			return consumed
		}
		f.ph, f.space, f.child = arrAfter, false, n.items
		return startVal

	case strStart:
		if c == '"' {
			f.ph = strIn
			if n.pattern != nil {
				f.re = n.pattern.start()
			}
			return consumed
		}
	case strIn:
		return f.stringByte(c)

	case litIn:
		lo, hi, ok := narrow(n.lits, f.lo, f.hi, f.k, c)
		if !ok {
			if f.canEnd() {
				return passed
			}
			return reject
		}
		f.lo, f.hi, f.k = lo, hi, f.k+1
		if lo == hi && int(f.k) == len(n.lits[lo]) {
			return finished
		}
		return consumed
	case numIn:
		if next, ok := f.num.next(n, c); ok {
			f.num = next
			return consumed
		}
		if f.num.complete(n) {
			return passed
		}
	}
	return reject
}

// narrow keeps, of the sorted texts lo..hi that agree on their first k
// bytes, those whose byte k is c: a contiguous run.
func narrow(texts [][]byte, lo, hi, k int32, c byte) (int32, int32, bool) {
	first := int32(-1)
	for i := lo; i <= hi; i++ {
		t := texts[i]
		match := int(k) < len(t) && t[k] == c
		switch {
		case match && first < 0:
			first = i
		case !match && first >= 0:
			return first, i - 1, true
		}
	}
	return first, hi, first >= 0
}

// stringByte handles a byte inside a string: JSON's escapes, valid UTF-8
// (a character may be split across tokens), the length bounds in
// characters, and the pattern, run on the decoded characters.
func (f *frame) stringByte(c byte) outcome {
	n := f.n
	switch {
	case f.need > 0:
		if c < f.nextLo || c > f.nextHi {
			return reject
		}
		f.cp = f.cp<<6 | rune(c&0x3f)
		f.need--
		f.nextLo, f.nextHi = 0x80, 0xbf
		if f.need == 0 {
			return f.char(f.cp)
		}
		return f.partial()
	case f.esc == 1:
		r, ok := escapes[c]
		if !ok {
			return reject
		}
		if c == 'u' {
			f.esc, f.cp = 2, 0
			return f.partial()
		}
		f.esc = 0
		return f.char(r)
	case f.esc >= 2:
		h, ok := hexValue(c)
		if !ok {
			return reject
		}
		f.cp = f.cp<<4 | rune(h)
		if f.esc == 3 && f.cp >= 0xd8 && f.cp <= 0xdf {
			return reject // surrogates: a lone one is not a character
		}
		if f.esc++; f.esc < 6 {
			return f.partial()
		}
		f.esc = 0
		return f.char(f.cp)
	case c == '"':
		if int(f.count) < n.minLen || n.pattern != nil && !n.pattern.accepts(f.re, f.count == 0) {
			return reject
		}
		return finished
	case c < 0x20:
		return reject
	}
	if n.maxLen >= 0 && int(f.count) >= n.maxLen {
		return reject
	}
	switch {
	case c == '\\':
		f.esc = 1
		return f.partial()
	case c < 0x80:
		return f.char(rune(c))
	case c >= 0xc2 && c <= 0xdf:
		f.need, f.cp, f.nextLo, f.nextHi = 1, rune(c&0x1f), 0x80, 0xbf
	case c >= 0xe0 && c <= 0xef:
		f.need, f.cp, f.nextLo, f.nextHi = 2, rune(c&0x0f), 0x80, 0xbf
		if c == 0xe0 {
			f.nextLo = 0xa0 // no overlong forms
		} else if c == 0xed {
			f.nextHi = 0x9f // no surrogates
		}
	case c >= 0xf0 && c <= 0xf4:
		f.need, f.cp, f.nextLo, f.nextHi = 3, rune(c&0x07), 0x80, 0xbf
		if c == 0xf0 {
			f.nextLo = 0x90
		} else if c == 0xf4 {
			f.nextHi = 0x8f
		}
	default:
		return reject
	}
	return f.partial()
}

// partial checks, for a string with a pattern, that the character being
// written (a UTF-8 sequence or an escape not yet finished) can still be
// one the pattern takes next.
func (f *frame) partial() outcome {
	if f.n.pattern == nil {
		return consumed
	}
	lo, hi := rune(0), rune(utf8Max)
	switch {
	case f.need > 0:
		shift := 6 * uint(f.need)
		lo = f.cp<<shift | rune(f.nextLo&0x3f)<<(shift-6)
		hi = f.cp<<shift | rune(f.nextHi&0x3f)<<(shift-6) | (1<<(shift-6) - 1)
	case f.esc >= 2:
		rest := 4 * uint(6-f.esc)
		lo, hi = f.cp<<rest, f.cp<<rest|(1<<rest-1)
	}
	budget := -1
	if f.n.maxLen >= 0 {
		budget = f.n.maxLen - int(f.count) - 1
	}
	if !f.n.pattern.canStep(f.re, lo, hi, budget) {
		return reject
	}
	return consumed
}

const utf8Max = 0x10ffff

// char counts a decoded character and runs the pattern on it.
func (f *frame) char(r rune) outcome {
	f.count++
	if f.n.pattern != nil {
		f.re = f.n.pattern.step(f.re, r)
		if len(f.re) == 0 || f.n.maxLen >= 0 && int(f.count)+f.n.pattern.minChars(f.re) > f.n.maxLen {
			return reject
		}
	}
	return consumed
}

var escapes = map[byte]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'u': 0}

func hexValue(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
