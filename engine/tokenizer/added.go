package tokenizer

import "strings"

// matcher finds added tokens in text the way the reference's
// DictionarySplitter does: scanning left to right, the first position where
// some token matches wins, and there the longest token. It is a byte trie.
type matcher struct {
	// first marks the bytes that start some token; when only one byte does
	// (usually '<'), only is that byte and the scan uses IndexByte.
	first  [256]bool
	only   int
	edges  map[uint32]int32 // node<<8 | byte -> child node; node 0 is the root
	isWord []bool           // isWord[node]: a token ends at node
}

// newMatcher returns a matcher for words, or nil if there are none.
func newMatcher(words []string) *matcher {
	if len(words) == 0 {
		return nil
	}
	m := &matcher{edges: make(map[uint32]int32), isWord: []bool{false}}
	for _, w := range words {
		m.first[w[0]] = true
		node := int32(0)
		for i := 0; i < len(w); i++ {
			key := uint32(node)<<8 | uint32(w[i])
			child, ok := m.edges[key]
			if !ok {
				child = int32(len(m.isWord))
				m.isWord = append(m.isWord, false)
				m.edges[key] = child
			}
			node = child
		}
		m.isWord[node] = true
	}
	m.only = -1
	for b, ok := range m.first {
		if ok {
			if m.only != -1 {
				m.only = -1
				break
			}
			m.only = b
		}
	}
	return m
}

// next returns the position and length of the first token in s at or after
// i, or n == 0 if there is none.
func (m *matcher) next(s string, i int) (pos, n int) {
	for i < len(s) {
		if m.only >= 0 {
			k := strings.IndexByte(s[i:], byte(m.only))
			if k < 0 {
				break
			}
			i += k
		} else if !m.first[s[i]] {
			i++
			continue
		}
		node, best := int32(0), 0
		for j := i; j < len(s); j++ {
			child, ok := m.edges[uint32(node)<<8|uint32(s[j])]
			if !ok {
				break
			}
			node = child
			if m.isWord[node] {
				best = j + 1 - i
			}
		}
		if best > 0 {
			return i, best
		}
		i++
	}
	return len(s), 0
}
