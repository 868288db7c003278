// Package grammar is grammar-constrained decoding for structured outputs:
// it compiles a JSON Schema (the strict subset OpenAI documents for
// response_format) into a pushdown matcher over bytes, and turns the
// matcher's state into token masks over a model's vocabulary, so that a
// sampler can only ever produce a prefix of a document valid against the
// schema, and can end the turn only once the document is complete.
//
// The pieces:
//   - Compile (schema → Grammar, immutable, shared by every request that
//     sends the same schema) and AnyJSONObject (response_format json_object);
//   - NewVocab (the tokens' bytes, prepared once per model: a byte trie and
//     the tokens that may sit inside a JSON string, by character count);
//   - Matcher (one per generated sequence): Allows, FillMask, Accept,
//     Complete — it satisfies engine/generate's Constraint.
//
// The documents it lets through are a little narrower than the schema:
// keys come in the schema's property order, numbers have no exponent and
// at most 16 integer and 16 fraction digits, and the only insignificant
// whitespace is one optional space after ':' and ',' (as Python's
// json.dumps writes). That keeps every bounded schema finite, so even a
// random-weight model finishes.
package grammar

import "fmt"

// Grammar is a compiled schema. It is immutable and safe for concurrent
// use; each generated sequence gets its own Matcher.
type Grammar struct {
	root *node
}

// SchemaError is a schema the grammar cannot enforce: an unsupported
// keyword, a malformed value, or constraints no document can meet.
type SchemaError struct {
	Path    string // JSON pointer to the offending schema ("" is the root)
	Keyword string // the keyword at fault, when there is one
	Msg     string
}

func (e *SchemaError) Error() string {
	at := e.Path
	if at == "" {
		at = "/"
	}
	if e.Keyword != "" && e.Msg == "" {
		return fmt.Sprintf("grammar: schema at %s: keyword %q is not supported", at, e.Keyword)
	}
	if e.Keyword != "" {
		return fmt.Sprintf("grammar: schema at %s: %q: %s", at, e.Keyword, e.Msg)
	}
	return fmt.Sprintf("grammar: schema at %s: %s", at, e.Msg)
}

// Limits of the documents a Grammar allows (see the package comment).
const (
	maxIntDigits  = 16
	maxFracDigits = 16
)

type kind uint8

const (
	kObject  kind = iota // properties in order; or free keys when free
	kArray               // items, minItems..maxItems
	kString              // minLength..maxLength, optional pattern
	kNumber              // integer or number, optional range
	kLiteral             // one of a set of JSON texts (enum, const, true, false, null)
	kAnyOf               // one of alts (expanded when the value starts)
	kAny                 // any JSON value
	kRoot                // the document: its one value, then nothing
)

// node is one schema, compiled. Nodes form a graph: $ref makes cycles.
type node struct {
	kind kind

	// kObject: props in schema order; keys[i] lists the properties that may
	// come after property i-1 (i = 0: first), sorted by their encoded key,
	// and closable[i] says whether '}' may come after property i-1 (no
	// required property after it). free: any keys, values kAny.
	props    []prop
	keys     []keySet
	closable []bool
	free     bool

	// kArray
	items              *node
	minItems, maxItems int // maxItems < 0: unbounded

	// kString
	minLen, maxLen int // maxLen < 0: unbounded
	pattern        *regex

	// kNumber
	integer    bool
	lo, hi     float64 // bounds (±Inf when absent)
	loEx, hiEx bool    // exclusive bounds

	// kLiteral: the JSON texts, sorted
	lits [][]byte

	// kAnyOf
	alts []*node

	// ref is set while compiling a $ref whose target is not compiled yet.
	ref *node
}

type prop struct {
	key      []byte // the key as JSON text, quotes included
	val      *node
	required bool
}

// keySet is the keys that may come next in an object, sorted, with the
// index of each one's property.
type keySet struct {
	keys  [][]byte
	props []int
}

// resolve follows forwarding $ref nodes.
func (n *node) resolve() *node {
	for n.ref != nil {
		n = n.ref
	}
	return n
}
