package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Pre-tokenizers. Hugging Face tokenizers split text with a regex before BPE.
// The regexes of the byte-level families are few and fixed, and they use
// look-ahead, which Go's regexp lacks, so each known pattern is a hand-written
// scanner: split(s, i) returns the end of the piece that starts at s[i],
// exactly as the reference regex engine (JavaScript, leftmost alternative
// first, greedy with backtracking) would match it.
//
// Character classes are those of the reference: \p{L}, \p{N} and
// JavaScript's \s, from unicode_tables.go. \r and \n are kept apart because
// the newer patterns treat them specially. A byte that is not valid UTF-8 is
// a one-byte character of class "other".

// Character classes.
const (
	clsOther   uint8 = iota // none of the below: punctuation, symbols, marks, invalid bytes
	clsLetter               // \p{L}
	clsNumber               // \p{N}
	clsSpace                // \s except \r and \n
	clsNewline              // \r or \n
)

// asciiClass classifies the bytes below 0x80.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			t[c] = clsLetter
		case c >= '0' && c <= '9':
			t[c] = clsNumber
		case c == '\r', c == '\n':
			t[c] = clsNewline
		case c == ' ', c >= '\t' && c <= '\f':
			t[c] = clsSpace
		}
	}
	return t
}()

// classAt returns the class of the character at s[i] and its width in bytes.
func classAt(s string, i int) (cls uint8, width int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return clsOther, 1
	}
	return runeClass(r), w
}

// runeClass classifies a non-ASCII code point.
func runeClass(r rune) uint8 {
	switch {
	case unicode.Is(letterTable, r):
		return clsLetter
	case unicode.Is(numberTable, r):
		return clsNumber
	case unicode.Is(spaceTable, r):
		return clsSpace
	}
	return clsOther
}

// pattern identifies one of the known pre-tokenizer regexes.
type pattern uint8

const (
	patGPT2   pattern = iota + 1 // GPT-2: 's|'t|... ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	patQwen2                     // Qwen2: like Llama 3 with \p{N} single digits
	patLlama3                    // Llama 3 / cl100k: (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|...
)

func (p pattern) String() string {
	switch p {
	case patGPT2:
		return "gpt2"
	case patQwen2:
		return "qwen2"
	case patLlama3:
		return "llama3"
	}
	return "unknown"
}

// knownPatterns maps the Split regexes found in tokenizer.json files to their
// scanners. The key is the pattern exactly as the file spells it.
var knownPatterns = map[string]pattern{
	`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`:                                          patGPT2,
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:      patQwen2,
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: patLlama3,
}

// split returns the end of the piece of s that starts at i < len(s).
func (p pattern) split(s string, i int) int {
	switch p {
	case patGPT2:
		return splitGPT2(s, i)
	case patQwen2:
		return splitLlama3(s, i, 1)
	default:
		return splitLlama3(s, i, 3)
	}
}

// contraction returns the length of the contraction suffix ('s 't 're 've
// 'm 'll 'd without the apostrophe) at the start of s, or 0. With fold set,
// ASCII letters match in either case, as in the reference's rewrite of
// (?i:'s|'t|'re|'ve|'m|'ll|'d) to [sS], [rR][eE], ...
func contraction(s string, fold bool) int {
	if len(s) == 0 {
		return 0
	}
	lower := func(c byte) byte {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch lower(s[0]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && lower(s[1]) == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && lower(s[1]) == 'l' {
			return 2
		}
	}
	return 0
}

// run returns the end of the run of characters of class cls starting at i.
func run(s string, i int, cls uint8) int {
	for i < len(s) {
		c, w := classAt(s, i)
		if c != cls {
			break
		}
		i += w
	}
	return i
}

// splitWhitespace matches \s+(?!\S)|\s+ at a whitespace character s[i]:
// the whole run when it ends the text, else the run less its last character
// (which then prefixes the next piece), but at least one character.
func splitWhitespace(s string, i int) int {
	end, last := i, i
	for end < len(s) {
		c, w := classAt(s, end)
		if c != clsSpace && c != clsNewline {
			break
		}
		last = end
		end += w
	}
	if end == len(s) || last == i {
		return end
	}
	return last
}

// splitGPT2 implements
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(s string, i int) int {
	if s[i] == '\'' {
		if n := contraction(s[i+1:], false); n > 0 {
			return i + 1 + n
		}
	}
	c, w := classAt(s, i)
	j := i // start of the class run after an optional leading space
	if s[i] == ' ' && i+1 < len(s) {
		c, w = classAt(s, i+1)
		if c == clsSpace || c == clsNewline {
			return splitWhitespace(s, i)
		}
		j = i + 1
	}
	switch c {
	case clsLetter, clsNumber, clsOther:
		return run(s, j+w, c)
	}
	return splitWhitespace(s, i)
}

// splitLlama3 implements, with maxDigits 3 (Llama 3, cl100k) or 1 (Qwen2),
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitLlama3(s string, i int, maxDigits int) int {
	if s[i] == '\'' {
		if n := contraction(s[i+1:], true); n > 0 {
			return i + 1 + n
		}
	}
	c, w := classAt(s, i)
	switch c {
	case clsLetter: // \p{L}+
		return run(s, i+w, clsLetter)
	case clsOther, clsSpace: // [^\r\n\p{L}\p{N}]\p{L}+
		if j := i + w; j < len(s) {
			if c2, w2 := classAt(s, j); c2 == clsLetter {
				return run(s, j+w2, clsLetter)
			}
		}
	case clsNumber: // \p{N}{1,maxDigits}
		j := i + w
		for n := 1; n < maxDigits && j < len(s); n++ {
			c2, w2 := classAt(s, j)
			if c2 != clsNumber {
				break
			}
			j += w2
		}
		return j
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	j, cj, wj := i, c, w
	if s[i] == ' ' && i+1 < len(s) {
		j = i + 1
		cj, wj = classAt(s, j)
	}
	if cj == clsOther {
		j = run(s, j+wj, clsOther)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	// Here s[i] is whitespace. `\s*[\r\n]+`: up to the last \r or \n of the run.
	end, lastNL := i, -1
	for end < len(s) {
		c2, w2 := classAt(s, end)
		if c2 == clsNewline {
			lastNL = end
		} else if c2 != clsSpace {
			break
		}
		end += w2
	}
	if lastNL >= 0 {
		return lastNL + 1
	}
	return splitWhitespace(s, i)
}
