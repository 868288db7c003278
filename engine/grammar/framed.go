package grammar

import (
	"fmt"
	"slices"
)

// Framed is a Matcher between fixed token sequences: exactly the prefix
// ids, then one document of the grammar, then exactly the suffix ids, then
// a stop token. It forces a tool call (tool_choice "required" or a named
// function): the prefix and suffix are the model's call markers (Hermes'
// "<tool_call>\n" … "\n</tool_call>"), which are often special tokens no
// document may spell, and the document is the call object. It satisfies
// engine/generate's Constraint and is not safe for concurrent use.
type Framed struct {
	prefix, suffix []int
	m              *Matcher
	pos            int // tokens of prefix (then suffix) accepted
	inDoc, after   bool
	done           bool
}

// NewFramedMatcher returns a Framed matcher for g between prefix and
// suffix (either may be empty).
func (g *Grammar) NewFramedMatcher(v *Vocab, prefix, suffix []int) *Framed {
	return &Framed{prefix: slices.Clone(prefix), suffix: slices.Clone(suffix), m: g.NewMatcher(v), inDoc: len(prefix) == 0}
}

// next returns the one id the frame forces now, or -1 inside the document,
// or -2 when only a stop token may come.
func (f *Framed) next() int {
	switch {
	case !f.inDoc && !f.after:
		return f.prefix[f.pos]
	case f.inDoc:
		return -1
	case f.pos < len(f.suffix):
		return f.suffix[f.pos]
	}
	return -2
}

// Allows reports whether token id may come next.
func (f *Framed) Allows(id int) bool {
	if f.done {
		return false
	}
	switch want := f.next(); want {
	case -1:
		return !f.m.v.isStop(id) && f.m.Allows(id)
	case -2:
		return id >= 0 && id < len(f.m.v.stops) && f.m.v.isStop(id)
	default:
		return id == want
	}
}

// FillMask sets bit id of mask for every token allowed next and clears
// the rest.
func (f *Framed) FillMask(mask []uint64) {
	if f.done {
		clear(mask)
		return
	}
	switch want := f.next(); want {
	case -1:
		f.m.FillMask(mask)
		for _, id := range f.m.v.stop { // the document ends with the suffix, not a stop
			mask[id/64] &^= 1 << (id % 64)
		}
	case -2:
		clear(mask)
		for _, id := range f.m.v.stop {
			mask[id/64] |= 1 << (id % 64)
		}
	default:
		clear(mask)
		mask[want/64] |= 1 << (want % 64)
	}
}

// Accept advances past token id; it fails, changing nothing, when id is
// not allowed.
func (f *Framed) Accept(id int) error {
	if !f.Allows(id) {
		return fmt.Errorf("grammar: token %d is not allowed here", id)
	}
	switch f.next() {
	case -1:
		if err := f.m.Accept(id); err != nil {
			return err
		}
		if f.m.Complete() {
			f.inDoc, f.after, f.pos = false, true, 0
		}
	case -2:
		f.done = true
	default:
		f.pos++
		if !f.after && f.pos == len(f.prefix) {
			f.inDoc, f.pos = true, 0
		}
	}
	return nil
}

// Complete reports whether the frame is complete: only a stop token may
// come next.
func (f *Framed) Complete() bool { return !f.done && f.next() == -2 }
