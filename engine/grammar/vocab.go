package grammar

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Vocab is a model's vocabulary prepared for token masks, once per model:
// a byte trie of the tokens (a mask is a walk of the trie that stops at the
// first byte the grammar refuses), and the tokens that can sit inside a
// JSON string by how many characters they add (inside a long free string,
// where nearly every token is allowed and a walk would visit the whole
// trie, the mask is a copy of a precomputed one plus a check of the few
// tokens holding a quote or a backslash). It is safe for concurrent use.
type Vocab struct {
	tokens [][]byte
	stop   []int
	stops  []bool
	words  int // mask length in 64-bit words

	nodes []trieNode // nodes[0] is the root (the empty prefix)
	more  map[int32][]int32

	// inString[c] has a bit for every token made of plain string content
	// (no quote, backslash or control byte; valid UTF-8, possibly ending
	// inside a character) adding at most c characters; the last entry
	// holds them all.
	inString [][]uint64
	quoted   []int32 // tokens with a quote or backslash (checked one by one)
}

type trieNode struct {
	first, count int32 // children: nodes[first : first+count], by byte
	b            byte
	id           int32 // a token ending here, or -1 (more in Vocab.more)
}

// NewVocab prepares tokens (tokens[id] = the bytes token id stands for;
// nil or empty for tokens never allowed, such as special tokens) and the
// stop ids (end of turn), which are allowed only, and then exclusively,
// once a document is complete.
func NewVocab(tokens [][]byte, stop []int) (*Vocab, error) {
	v := &Vocab{tokens: tokens, stop: slices.Clone(stop), stops: make([]bool, len(tokens)), words: (len(tokens) + 63) / 64,
		more: map[int32][]int32{}}
	for _, id := range stop {
		if id < 0 || id >= len(tokens) {
			return nil, fmt.Errorf("grammar: stop token %d is outside the vocabulary of %d tokens", id, len(tokens))
		}
		v.stops[id] = true
	}
	var ids []int32
	for id, t := range tokens {
		if len(t) > 0 && !v.stops[id] {
			ids = append(ids, int32(id))
		}
	}
	slices.SortFunc(ids, func(a, b int32) int {
		if c := bytes.Compare(tokens[a], tokens[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	v.nodes = []trieNode{{id: -1}}
	v.build(0, ids, 0)
	v.classify(ids)
	return v, nil
}

// build fills node's subtree from ids, sorted, all sharing their first
// depth bytes; children are laid out next to each other.
func (v *Vocab) build(node int32, ids []int32, depth int) {
	for len(ids) > 0 && len(v.tokens[ids[0]]) == depth {
		if v.nodes[node].id < 0 {
			v.nodes[node].id = ids[0]
		} else {
			v.more[node] = append(v.more[node], ids[0])
		}
		ids = ids[1:]
	}
	type group struct{ lo, hi int }
	var groups []group
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && v.tokens[ids[j]][depth] == v.tokens[ids[i]][depth] {
			j++
		}
		groups = append(groups, group{i, j})
		i = j
	}
	first := int32(len(v.nodes))
	v.nodes[node].first, v.nodes[node].count = first, int32(len(groups))
	for _, g := range groups {
		v.nodes = append(v.nodes, trieNode{b: v.tokens[ids[g.lo]][depth], id: -1})
	}
	for k, g := range groups {
		v.build(first+int32(k), ids[g.lo:g.hi], depth+1)
	}
}

// classify finds the tokens that are plain string content, by characters.
func (v *Vocab) classify(ids []int32) {
	byChars := map[int][]int32{}
	most := 0
	for _, id := range ids {
		t := v.tokens[id]
		if bytes.ContainsAny(t, "\"\\") {
			v.quoted = append(v.quoted, id)
			continue
		}
		if n, ok := plainChars(t); ok {
			byChars[n] = append(byChars[n], id)
			most = max(most, n)
		}
	}
	v.inString = make([][]uint64, most+1)
	acc := make([]uint64, v.words)
	for c := 0; c <= most; c++ {
		for _, id := range byChars[c] {
			acc[id/64] |= 1 << (id % 64)
		}
		v.inString[c] = slices.Clone(acc)
	}
}

// plainChars reports whether t can follow a complete character inside a
// JSON string without a quote, escape or control byte, and how many
// characters it adds (a character it leaves unfinished counts).
func plainChars(t []byte) (int, bool) {
	n := 0
	for i := 0; i < len(t); {
		if t[i] < 0x20 {
			return 0, false
		}
		if t[i] < 0x80 {
			i++
			n++
			continue
		}
		r, size := utf8.DecodeRune(t[i:])
		if r == utf8.RuneError && size <= 1 {
			// Invalid, or a character cut off by the token's end: valid
			// only as a prefix of a character.
			if !utf8.FullRune(t[i:]) && validPrefix(t[i:]) {
				return n + 1, true
			}
			return 0, false
		}
		i += size
		n++
	}
	return n, true
}

// validPrefix reports whether p (shorter than a full character) can begin
// a valid UTF-8 character, with the same ranges the matcher enforces.
func validPrefix(p []byte) bool {
	c := p[0]
	lo, hi := byte(0x80), byte(0xbf)
	switch {
	case c >= 0xc2 && c <= 0xdf:
	case c >= 0xe0 && c <= 0xef:
		if c == 0xe0 {
			lo = 0xa0
		} else if c == 0xed {
			hi = 0x9f
		}
	case c >= 0xf0 && c <= 0xf4:
		if c == 0xf0 {
			lo = 0x90
		} else if c == 0xf4 {
			hi = 0x8f
		}
	default:
		return false
	}
	for i, b := range p[1:] {
		if i == 0 && (b < lo || b > hi) || i > 0 && (b < 0x80 || b > 0xbf) {
			return false
		}
	}
	return true
}

// Size returns the number of token ids.
func (v *Vocab) Size() int { return len(v.tokens) }

func (v *Vocab) isStop(id int) bool { return v.stops[id] }

func (v *Vocab) tokenText(id int) string {
	if v.stops[id] {
		return fmt.Sprintf("stop token %d", id)
	}
	return string(v.tokens[id])
}

// FillMask sets bit id of mask for every token allowed next and clears
// the rest. mask must hold at least (Size()+63)/64 words.
func (m *Matcher) FillMask(mask []uint64) {
	clear(mask)
	if m.done {
		return
	}
	if m.cur.complete() {
		for _, id := range m.v.stop {
			mask[id/64] |= 1 << (id % 64)
		}
	}
	if m.inFreeString(mask) {
		return
	}
	m.walk(mask, 0, 0, m.cur)
}

// inFreeString fills mask the fast way when the only reading is inside a
// string without a pattern, between characters.
func (m *Matcher) inFreeString(mask []uint64) bool {
	if m.cur.n != 1 {
		return false
	}
	st := m.cur.stacks[0]
	top := &st[len(st)-1]
	if top.ph != strIn || top.n.pattern != nil || top.esc != 0 || top.need != 0 {
		return false
	}
	plain := m.v.inString[len(m.v.inString)-1]
	if top.n.maxLen >= 0 {
		room := top.n.maxLen - int(top.count)
		plain = m.v.inString[min(room, len(m.v.inString)-1)]
	}
	for i, w := range plain {
		mask[i] |= w
	}
	for _, id := range m.v.quoted {
		if m.advance(m.v.tokens[id]) != nil {
			mask[id/64] |= 1 << (id % 64)
		}
	}
	return true
}

// walk marks the tokens below trie node whose bytes, from state st, the
// grammar allows.
func (m *Matcher) walk(mask []uint64, node int32, depth int, st *state) {
	for len(m.levels) <= depth+1 {
		m.levels = append(m.levels, &state{})
	}
	next := m.levels[depth+1]
	tn := &m.v.nodes[node]
	for c := tn.first; c < tn.first+tn.count; c++ {
		child := &m.v.nodes[c]
		step(next, st, child.b)
		if next.n == 0 {
			continue
		}
		if child.id >= 0 {
			mask[child.id/64] |= 1 << (child.id % 64)
			for _, id := range m.v.more[c] {
				mask[id/64] |= 1 << (id % 64)
			}
		}
		if child.count > 0 {
			m.walk(mask, c, depth+1, next)
		}
	}
}
