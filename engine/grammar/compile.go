package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Compile turns a JSON Schema into a Grammar. A keyword it cannot enforce is
// a *SchemaError naming it: a constraint is never silently dropped.
//
// Beyond OpenAI's strict subset it accepts schemas that leave
// additionalProperties out (no undeclared key is ever generated, as if it
// were false) and properties missing from required (they may be left out).
func Compile(schema []byte) (*Grammar, error) {
	var doc any
	if err := json.Unmarshal(schema, &doc); err != nil {
		return nil, &SchemaError{Msg: fmt.Sprintf("not valid JSON: %v", err)}
	}
	c := &compiler{rootRaw: schema, refs: map[string]*node{}}
	root, err := c.compile(schema, "")
	if err != nil {
		return nil, err
	}
	if err := c.checkRecursion(); err != nil {
		return nil, err
	}
	return &Grammar{root: root}, nil
}

// AnyJSONObject is the grammar of response_format "json_object": any JSON
// object.
func AnyJSONObject() *Grammar { return &Grammar{root: &node{kind: kObject, free: true}} }

// anyValue is the node of any JSON value; it holds no state, so one serves
// every grammar.
var anyValue = &node{kind: kAny}

type compiler struct {
	rootRaw []byte
	refs    map[string]*node // compiled $ref targets by JSON pointer
}

// Keywords that only annotate.
var annotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
	"$schema": true, "$id": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true}

// Keywords by the type they constrain.
var (
	objectKeywords = []string{"properties", "required", "additionalProperties"}
	arrayKeywords  = []string{"items", "minItems", "maxItems", "uniqueItems"}
	stringKeywords = []string{"minLength", "maxLength", "pattern", "format"}
	numberKeywords = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
)

var allTypes = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// orderedObject parses a JSON object keeping its key order.
func orderedObject(raw []byte) (keys []string, vals map[string]json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, false
	}
	vals = map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		if _, dup := vals[k]; !dup {
			keys = append(keys, k)
		}
		vals[k] = v
	}
	return keys, vals, true
}

func (c *compiler) compile(raw []byte, path string) (*node, error) {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "true":
		return anyValue, nil
	case "false":
		return nil, &SchemaError{Path: path, Msg: "the schema false matches nothing"}
	}
	keys, s, ok := orderedObject(raw)
	if !ok {
		return nil, &SchemaError{Path: path, Msg: fmt.Sprintf("a schema must be an object or a boolean, got %.40s", raw)}
	}
	known := map[string]bool{"type": true, "enum": true, "const": true, "anyOf": true, "$ref": true}
	for _, group := range [][]string{objectKeywords, arrayKeywords, stringKeywords, numberKeywords} {
		for _, k := range group {
			known[k] = true
		}
	}
	for _, k := range keys {
		if !known[k] && !annotations[k] {
			return nil, &SchemaError{Path: path, Keyword: k}
		}
	}
	if ref, ok := s["$ref"]; ok {
		for _, k := range keys {
			if k != "$ref" && !annotations[k] {
				return nil, &SchemaError{Path: path, Keyword: k, Msg: "is not supported beside $ref"}
			}
		}
		var ptr string
		if json.Unmarshal(ref, &ptr) != nil {
			return nil, &SchemaError{Path: path, Keyword: "$ref", Msg: "must be a string"}
		}
		return c.ref(ptr, path)
	}
	if alts, ok := s["anyOf"]; ok {
		for _, k := range keys {
			if k != "anyOf" && !annotations[k] {
				return nil, &SchemaError{Path: path, Keyword: k, Msg: "is not supported beside anyOf (move it into each alternative)"}
			}
		}
		var list []json.RawMessage
		if json.Unmarshal(alts, &list) != nil || len(list) == 0 {
			return nil, &SchemaError{Path: path, Keyword: "anyOf", Msg: "must be a non-empty array of schemas"}
		}
		n := &node{kind: kAnyOf}
		for i, a := range list {
			alt, err := c.compile(a, fmt.Sprintf("%s/anyOf/%d", path, i))
			if err != nil {
				return nil, err
			}
			n.alts = append(n.alts, alt)
		}
		return n, nil
	}
	if v, ok := s["const"]; ok {
		if _, dup := s["enum"]; dup {
			return nil, &SchemaError{Path: path, Keyword: "const", Msg: "is not supported beside enum"}
		}
		return c.literals(path, "const", []json.RawMessage{v}, s)
	}
	if v, ok := s["enum"]; ok {
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil || len(list) == 0 {
			return nil, &SchemaError{Path: path, Keyword: "enum", Msg: "must be a non-empty array"}
		}
		return c.literals(path, "enum", list, s)
	}
	types, err := schemaTypes(s, path)
	if err != nil {
		return nil, err
	}
	if len(types) == 0 { // no type: any value, unless keywords say which
		switch {
		case has(s, objectKeywords):
			types = []string{"object"}
		case has(s, arrayKeywords):
			types = []string{"array"}
		case has(s, stringKeywords):
			types = []string{"string"}
		case has(s, numberKeywords):
			types = []string{"number"}
		default:
			return anyValue, nil
		}
	}
	var alts []*node
	for _, t := range types {
		n, err := c.typed(t, s, path)
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &node{kind: kAnyOf, alts: alts}, nil
}

func has(s map[string]json.RawMessage, keywords []string) bool {
	for _, k := range keywords {
		if _, ok := s[k]; ok {
			return true
		}
	}
	return false
}

func schemaTypes(s map[string]json.RawMessage, path string) ([]string, error) {
	raw, ok := s["type"]
	if !ok {
		return nil, nil
	}
	var one string
	var list []string
	if json.Unmarshal(raw, &one) == nil {
		list = []string{one}
	} else if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return nil, &SchemaError{Path: path, Keyword: "type", Msg: "must be a type name or a non-empty array of them"}
	}
	for _, t := range list {
		if !slices.Contains(allTypes, t) {
			return nil, &SchemaError{Path: path, Keyword: "type", Msg: fmt.Sprintf("unknown type %q (want one of %s)", t, strings.Join(allTypes, ", "))}
		}
	}
	return list, nil
}

// typed compiles s as a value of type t; keywords of other types are
// ignored, as JSON Schema says.
func (c *compiler) typed(t string, s map[string]json.RawMessage, path string) (*node, error) {
	switch t {
	case "null":
		return &node{kind: kLiteral, lits: [][]byte{[]byte("null")}}, nil
	case "boolean":
		return &node{kind: kLiteral, lits: [][]byte{[]byte("false"), []byte("true")}}, nil
	case "object":
		return c.object(s, path)
	case "array":
		return c.array(s, path)
	case "string":
		return stringNode(s, path)
	}
	return numberNode(s, path, t == "integer")
}

func (c *compiler) object(s map[string]json.RawMessage, path string) (*node, error) {
	n := &node{kind: kObject}
	if ap, ok := s["additionalProperties"]; ok {
		if v := string(bytes.TrimSpace(ap)); v != "false" && v != "true" {
			return nil, &SchemaError{Path: path, Keyword: "additionalProperties", Msg: "only false is supported (no undeclared keys are generated), not a schema"}
		}
	}
	rawProps, ok := s["properties"]
	if !ok {
		if _, ok := s["required"]; ok {
			return nil, &SchemaError{Path: path, Keyword: "required", Msg: "needs properties"}
		}
		n.free = true
		return n, nil
	}
	names, props, ok := orderedObject(rawProps)
	if !ok {
		return nil, &SchemaError{Path: path, Keyword: "properties", Msg: "must be an object of schemas"}
	}
	var required []string
	if raw, ok := s["required"]; ok && json.Unmarshal(raw, &required) != nil {
		return nil, &SchemaError{Path: path, Keyword: "required", Msg: "must be an array of property names"}
	}
	for _, r := range required {
		if !slices.Contains(names, r) {
			return nil, &SchemaError{Path: path, Keyword: "required", Msg: fmt.Sprintf("names %q, which is not in properties", r)}
		}
	}
	for _, name := range names {
		val, err := c.compile(props[name], path+"/properties/"+escapePointer(name))
		if err != nil {
			return nil, err
		}
		key, _ := marshalNoEscape(name)
		n.props = append(n.props, prop{key: key, val: val, required: slices.Contains(required, name)})
	}
	// After property i-1 (or at the start, i = 0), the next key is any
	// property j >= i up to the first required one; '}' may come when no
	// required property is left.
	for i := 0; i <= len(n.props); i++ {
		var cands []int
		closable := true
		for j := i; j < len(n.props); j++ {
			cands = append(cands, j)
			if n.props[j].required {
				closable = false
				break
			}
		}
		slices.SortFunc(cands, func(a, b int) int { return bytes.Compare(n.props[a].key, n.props[b].key) })
		ks := keySet{props: cands}
		for _, j := range cands {
			ks.keys = append(ks.keys, n.props[j].key)
		}
		n.keys = append(n.keys, ks)
		n.closable = append(n.closable, closable)
	}
	return n, nil
}

func (c *compiler) array(s map[string]json.RawMessage, path string) (*node, error) {
	n := &node{kind: kArray, items: anyValue, maxItems: -1}
	if raw, ok := s["items"]; ok {
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
			return nil, &SchemaError{Path: path, Keyword: "items", Msg: "tuples (an array of schemas) are not supported"}
		}
		items, err := c.compile(raw, path+"/items")
		if err != nil {
			return nil, err
		}
		n.items = items
	}
	if raw, ok := s["uniqueItems"]; ok && string(bytes.TrimSpace(raw)) != "false" {
		return nil, &SchemaError{Path: path, Keyword: "uniqueItems"}
	}
	var err error
	if n.minItems, err = count(s, "minItems", path, 0); err != nil {
		return nil, err
	}
	if n.maxItems, err = count(s, "maxItems", path, -1); err != nil {
		return nil, err
	}
	if n.maxItems >= 0 && n.maxItems < n.minItems {
		return nil, &SchemaError{Path: path, Keyword: "maxItems", Msg: fmt.Sprintf("%d is below minItems %d", n.maxItems, n.minItems)}
	}
	return n, nil
}

// formats are the string formats enforced, as patterns.
var formats = map[string]string{
	"date":      `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`,
	"time":      `^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?$`,
	"date-time": `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`,
	"uuid":      `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`,
	"ipv4":      `^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$`,
	"email":     `^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63}){0,4}\.[A-Za-z]{2,24}$`,
}

func stringNode(s map[string]json.RawMessage, path string) (*node, error) {
	n := &node{kind: kString, maxLen: -1}
	var err error
	if n.minLen, err = count(s, "minLength", path, 0); err != nil {
		return nil, err
	}
	if n.maxLen, err = count(s, "maxLength", path, -1); err != nil {
		return nil, err
	}
	if n.maxLen >= 0 && n.maxLen < n.minLen {
		return nil, &SchemaError{Path: path, Keyword: "maxLength", Msg: fmt.Sprintf("%d is below minLength %d", n.maxLen, n.minLen)}
	}
	var pattern, keyword string
	if raw, ok := s["pattern"]; ok {
		if json.Unmarshal(raw, &pattern) != nil {
			return nil, &SchemaError{Path: path, Keyword: "pattern", Msg: "must be a string"}
		}
		keyword = "pattern"
	}
	if raw, ok := s["format"]; ok {
		var f string
		json.Unmarshal(raw, &f)
		p, ok := formats[f]
		if !ok {
			names := make([]string, 0, len(formats))
			for k := range formats {
				names = append(names, k)
			}
			slices.Sort(names)
			return nil, &SchemaError{Path: path, Keyword: "format", Msg: fmt.Sprintf("%q is not supported (supported: %s)", f, strings.Join(names, ", "))}
		}
		if keyword != "" {
			return nil, &SchemaError{Path: path, Keyword: "format", Msg: "is not supported together with pattern"}
		}
		pattern, keyword = p, "format"
	}
	if keyword != "" {
		re, err := compileRegex(pattern)
		if err != nil {
			return nil, &SchemaError{Path: path, Keyword: keyword, Msg: err.Error()}
		}
		n.pattern = re
		if need := re.minChars(re.start()); n.maxLen >= 0 && need > n.maxLen {
			return nil, &SchemaError{Path: path, Keyword: keyword, Msg: fmt.Sprintf("needs at least %d characters, but maxLength is %d", need, n.maxLen)}
		}
	}
	return n, nil
}

func numberNode(s map[string]json.RawMessage, path string, integer bool) (*node, error) {
	n := &node{kind: kNumber, integer: integer, lo: math.Inf(-1), hi: math.Inf(1)}
	for _, k := range numberKeywords {
		raw, ok := s[k]
		if !ok {
			continue
		}
		var v float64
		if json.Unmarshal(raw, &v) != nil {
			return nil, &SchemaError{Path: path, Keyword: k, Msg: "must be a number"}
		}
		switch k {
		case "minimum":
			if v > n.lo || v == n.lo && n.loEx {
				n.lo, n.loEx = v, false
			}
		case "exclusiveMinimum":
			if v >= n.lo {
				n.lo, n.loEx = v, true
			}
		case "maximum":
			if v < n.hi || v == n.hi && n.hiEx {
				n.hi, n.hiEx = v, false
			}
		case "exclusiveMaximum":
			if v <= n.hi {
				n.hi, n.hiEx = v, true
			}
		}
	}
	if n.lo > n.hi || n.lo == n.hi && (n.loEx || n.hiEx) {
		return nil, &SchemaError{Path: path, Msg: "the bounds leave no number"}
	}
	if integer {
		lo, hi := math.Ceil(n.lo), math.Floor(n.hi)
		if n.loEx && lo == n.lo {
			lo++
		}
		if n.hiEx && hi == n.hi {
			hi--
		}
		if lo > hi {
			return nil, &SchemaError{Path: path, Msg: "the bounds leave no integer"}
		}
		n.lo, n.hi, n.loEx, n.hiEx = lo, hi, false, false
	}
	return n, nil
}

// literals compiles enum or const: the values as compact JSON texts, those
// of another type than a sibling "type" dropped.
func (c *compiler) literals(path, keyword string, values []json.RawMessage, s map[string]json.RawMessage) (*node, error) {
	types, err := schemaTypes(s, path)
	if err != nil {
		return nil, err
	}
	n := &node{kind: kLiteral}
	for _, v := range values {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			return nil, &SchemaError{Path: path, Keyword: keyword, Msg: err.Error()}
		}
		if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return literalHasType(b.Bytes(), t) }) {
			continue
		}
		if !slices.ContainsFunc(n.lits, func(l []byte) bool { return bytes.Equal(l, b.Bytes()) }) {
			n.lits = append(n.lits, b.Bytes())
		}
	}
	if len(n.lits) == 0 {
		return nil, &SchemaError{Path: path, Keyword: keyword, Msg: "no value has the schema's type"}
	}
	slices.SortFunc(n.lits, bytes.Compare)
	return n, nil
}

func literalHasType(lit []byte, t string) bool {
	switch lit[0] {
	case '{':
		return t == "object"
	case '[':
		return t == "array"
	case '"':
		return t == "string"
	case 't', 'f':
		return t == "boolean"
	case 'n':
		return t == "null"
	}
	if t == "number" {
		return true
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	return t == "integer" && err == nil && f == math.Trunc(f)
}

func count(s map[string]json.RawMessage, k, path string, absent int) (int, error) {
	raw, ok := s[k]
	if !ok {
		return absent, nil
	}
	var v float64
	if json.Unmarshal(raw, &v) != nil || v < 0 || v != math.Trunc(v) || v > 1<<30 {
		return 0, &SchemaError{Path: path, Keyword: k, Msg: "must be a whole number >= 0"}
	}
	return int(v), nil
}

// ref compiles the schema at a JSON pointer into the document ("#" is the
// root, "#/$defs/x" a definition); each target is compiled once, so
// recursive schemas become cycles.
func (c *compiler) ref(ptr, path string) (*node, error) {
	if n, ok := c.refs[ptr]; ok {
		return n, nil
	}
	if !strings.HasPrefix(ptr, "#") {
		return nil, &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("only references into this schema (#...) are supported, got %q", ptr)}
	}
	raw, err := lookupPointer(c.rootRaw, strings.TrimPrefix(ptr, "#"))
	if err != nil {
		return nil, &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q: %v", ptr, err)}
	}
	fwd := &node{}
	c.refs[ptr] = fwd
	n, err := c.compile(raw, strings.TrimPrefix(ptr, "#"))
	if err != nil {
		return nil, err
	}
	fwd.ref = n
	return fwd, nil
}

func lookupPointer(doc []byte, ptr string) ([]byte, error) {
	if ptr == "" {
		return doc, nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, fmt.Errorf("a JSON pointer starts with /")
	}
	cur := doc
	for _, part := range strings.Split(ptr[1:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		t := bytes.TrimSpace(cur)
		switch {
		case len(t) > 0 && t[0] == '{':
			var m map[string]json.RawMessage
			if json.Unmarshal(t, &m) != nil {
				return nil, fmt.Errorf("malformed schema")
			}
			v, ok := m[part]
			if !ok {
				return nil, fmt.Errorf("no %q", part)
			}
			cur = v
		case len(t) > 0 && t[0] == '[':
			var a []json.RawMessage
			i, err := strconv.Atoi(part)
			if json.Unmarshal(t, &a) != nil || err != nil || i < 0 || i >= len(a) {
				return nil, fmt.Errorf("no element %q", part)
			}
			cur = a[i]
		default:
			return nil, fmt.Errorf("no %q", part)
		}
	}
	return cur, nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func marshalNoEscape(s string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// checkRecursion refuses references that loop without consuming a byte
// ({"anyOf":[{"$ref":"#"}]}): starting such a value would never end.
func (c *compiler) checkRecursion() error {
	onPath := map[*node]bool{}
	var loops func(n *node) bool
	loops = func(n *node) bool {
		if onPath[n] {
			return true
		}
		onPath[n] = true
		defer delete(onPath, n)
		if n.ref != nil {
			return loops(n.ref)
		}
		if n.kind == kAnyOf {
			return slices.ContainsFunc(n.alts, loops)
		}
		return false
	}
	for _, ptr := range slices.Sorted(maps.Keys(c.refs)) {
		if loops(c.refs[ptr]) {
			return &SchemaError{Path: strings.TrimPrefix(ptr, "#"), Keyword: "$ref", Msg: "refers to itself without an object or array in between"}
		}
	}
	return nil
}
