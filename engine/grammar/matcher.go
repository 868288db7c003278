package grammar

import (
	"fmt"
	"math"
)

// A Matcher tracks one generated sequence against a Grammar, byte by byte,
// as a pushdown automaton: a stack of frames, one per JSON value being
// written (the innermost on top). anyOf makes it nondeterministic, so its
// state is a set of stacks, usually one.
type Matcher struct {
	g      *Grammar
	v      *Vocab
	cur    *state
	a, b   *state   // scratch for Allows and Accept
	levels []*state // one per trie depth, for FillMask
	done   bool     // a stop token was accepted
}

// NewMatcher returns a matcher at the start of a document. It is not safe
// for concurrent use.
func (g *Grammar) NewMatcher(v *Vocab) *Matcher {
	m := &Matcher{g: g, v: v, cur: &state{}, a: &state{}, b: &state{}}
	// The bottom frame stands for the whole document: it starts the root
	// value (which may be a choice) and allows nothing after it.
	m.cur.n = 1
	m.cur.stacks = [][]frame{{{n: rootNode, child: g.root}}}
	return m
}

// Allows reports whether token id may come next.
func (m *Matcher) Allows(id int) bool {
	if m.done || id < 0 || id >= len(m.v.tokens) {
		return false
	}
	if m.v.isStop(id) {
		return m.cur.complete()
	}
	return m.advance(m.v.tokens[id]) != nil
}

// Accept advances past token id; it fails, changing nothing, when id is
// not allowed.
func (m *Matcher) Accept(id int) error {
	if m.done || id < 0 || id >= len(m.v.tokens) {
		return fmt.Errorf("grammar: token %d is not allowed here", id)
	}
	if m.v.isStop(id) {
		if !m.cur.complete() {
			return fmt.Errorf("grammar: %s is not allowed before the document is complete", m.v.tokenText(id))
		}
		m.done = true
		return nil
	}
	next := m.advance(m.v.tokens[id])
	if next == nil {
		return fmt.Errorf("grammar: token %d (%q) is not allowed here", id, m.v.tokenText(id))
	}
	m.cur, m.a, m.b = next, m.cur, other(next, m.a, m.b)
	return nil
}

func other(used, a, b *state) *state {
	if used == a {
		return b
	}
	return a
}

// Complete reports whether the document is complete: only stop tokens may
// come next (nothing at all once one has been accepted).
func (m *Matcher) Complete() bool { return !m.done && m.cur.complete() }

// advance returns the state after bytes (in m.a or m.b), or nil when they
// are not allowed. m.cur is unchanged.
func (m *Matcher) advance(bytes []byte) *state {
	if len(bytes) == 0 {
		return nil
	}
	src, dst := m.cur, m.a
	for _, c := range bytes {
		step(dst, src, c)
		if dst.n == 0 {
			return nil
		}
		if src == m.cur {
			src, dst = dst, m.b
		} else {
			src, dst = dst, src
		}
	}
	return src
}

// state is a set of stacks: stacks[:n] are live, the rest are buffers kept
// for reuse.
type state struct {
	stacks [][]frame
	n      int
	tmp    []frame // a stack being branched
	alts   []*node // the alternatives a value may start with
}

// maxStacks bounds the alternatives tracked at once; a schema ambiguous
// beyond it loses the extra readings (it never lets an invalid byte in).
const maxStacks = 64

// spare returns an empty buffer for the next stack.
func (s *state) spare() []frame {
	if s.n == len(s.stacks) {
		s.stacks = append(s.stacks, nil)
	}
	return s.stacks[s.n][:0]
}

func (s *state) commit(st []frame) {
	if s.n < maxStacks {
		s.stacks[s.n] = st
		s.n++
	}
}

func (s *state) complete() bool {
	for _, st := range s.stacks[:s.n] {
		if len(st) == 1 && st[0].ph == rootDone || len(st) == 2 && st[1].canEnd() {
			return true
		}
	}
	return false
}

// step sets dst to the state after byte c from src.
func step(dst, src *state, c byte) {
	dst.n = 0
	for _, st := range src.stacks[:src.n] {
		run(dst, append(dst.spare(), st...), c)
	}
}

// Outcomes of feeding a byte to the top frame.
type outcome uint8

const (
	reject   outcome = iota
	consumed         // the frame took the byte
	finished         // the frame took the byte and its value is complete
	passed           // the value was complete; the byte belongs to the parent
	startVal         // the byte starts a child value (frame.child)
)

// run feeds c to the stack cur (a buffer of dst) and commits what survives.
// The root frame never pops, so cur is never empty.
func run(dst *state, cur []frame, c byte) {
	for {
		top := &cur[len(cur)-1]
		switch top.feed(c) {
		case reject:
			return
		case consumed:
			dst.commit(cur)
			return
		case finished:
			cur = popped(cur)
			dst.commit(cur)
			return
		case passed:
			cur = popped(cur)
		case startVal:
			begin(dst, cur, top.child, c)
			return
		}
	}
}

// popped removes the top frame, telling its parent a value is done.
func popped(cur []frame) []frame {
	cur = cur[:len(cur)-1]
	if n := len(cur); n > 0 && cur[n-1].n.kind == kArray {
		cur[n-1].count++
	}
	return cur
}

// begin pushes the value n, which starts with byte c, onto cur: one stack
// per alternative of n that can start with c.
func begin(dst *state, cur []frame, n *node, c byte) {
	dst.alts = appendAlts(dst.alts[:0], n, c)
	switch len(dst.alts) {
	case 0:
		return
	case 1:
		run(dst, append(cur, newFrame(dst.alts[0])), c)
		return
	}
	dst.tmp = append(dst.tmp[:0], cur...)
	for i, alt := range dst.alts {
		buf := cur
		if i > 0 {
			buf = append(dst.spare(), dst.tmp...)
		}
		run(dst, append(buf, newFrame(alt)), c)
	}
}

// appendAlts lists the concrete nodes (no anyOf, no $ref) that n may be
// and that may start with byte c.
func appendAlts(out []*node, n *node, c byte) []*node {
	n = n.resolve()
	switch n.kind {
	case kAnyOf:
		for _, a := range n.alts {
			out = appendAlts(out, a, c)
		}
	case kAny:
		if a := anyStartingWith(c); a != nil {
			out = append(out, a)
		}
	default:
		if canStart(n, c) {
			out = append(out, n)
		}
	}
	return out
}

// The nodes of an unconstrained value, by its first byte.
var (
	freeObject  = &node{kind: kObject, free: true}
	freeArray   = &node{kind: kArray, items: anyValue, maxItems: -1}
	freeString  = &node{kind: kString, maxLen: -1}
	freeNumber  = &node{kind: kNumber, lo: math.Inf(-1), hi: math.Inf(1)}
	freeLiteral = &node{kind: kLiteral, lits: [][]byte{[]byte("false"), []byte("null"), []byte("true")}}
	rootNode    = &node{kind: kRoot}
)

func anyStartingWith(c byte) *node {
	switch {
	case c == '{':
		return freeObject
	case c == '[':
		return freeArray
	case c == '"':
		return freeString
	case c == '-' || c >= '0' && c <= '9':
		return freeNumber
	case c == 't' || c == 'f' || c == 'n':
		return freeLiteral
	}
	return nil
}

func canStart(n *node, c byte) bool {
	switch n.kind {
	case kObject:
		return c == '{'
	case kArray:
		return c == '['
	case kString:
		return c == '"'
	case kNumber:
		return c == '-' || c >= '0' && c <= '9'
	case kLiteral:
		for _, l := range n.lits {
			if l[0] == c {
				return true
			}
		}
	}
	return false
}
