package chat

import (
	"strings"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// gonja parses Jinja's conditional expression `A if C else B` only as the
// whole of a {{ }} output or a {% set %} value, not as an operand: inside
// parentheses, brackets, braces or call arguments, such as Gemma 3's
// `'<start_of_turn>' + role + '\n' + (prefix if loop.first else "")`, it
// fails with "Unbalanced parenthesis". rewriteConditionals turns each such
// nested conditional, and each chained one (`A if C else B if D else E`,
// which gonja cannot parse even as a whole output or set value), into an
// expression gonja parses and that evaluates exactly as Jinja's does,
// lazily included:
//
//	A if C else B   →   ((C) and [(A)] or [(B)])[0]
//	A if C          →   ((C) and [(A)] or [undefinedName])[0]
//
// `and` and `or` return an operand and evaluate their right side only when
// needed (Python's semantics, which gonja follows), and a one-element list
// is always true, so C is evaluated first, then A when C is true, B (or the
// undefined value Jinja gives) when it is not. Single conditionals at the
// top of an output or a set are left to gonja, as is every template
// without nested or chained conditionals (returned unchanged).

// undefinedName is a variable no template defines: the value of `A if C`
// when C is false is Jinja's undefined.
const undefinedName = "__chat_undefined__"

// rewriteConditionals returns src with its nested and chained conditional
// expressions rewritten for gonja (see above). It works on gonja's own tokens, so
// strings and template data are never mistaken for expressions; a source
// whose brackets do not balance is returned as it is, for the parser to
// report.
func rewriteConditionals(src string, cfg *config.Config) string {
	// The lexer's offsets are into its normalised input; normalising the
	// line ends here, as it does, keeps them offsets into src.
	src = strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n")
	r := condRewriter{src: src}
	stream := tokens.LexAll(src, cfg)
	for !stream.End() {
		r.toks = append(r.toks, stream.Next())
	}
	if !stream.EOF() {
		return src // a lexing error: gonja will report it
	}
	r.toks = append(r.toks, stream.Current()) // EOF: where the text ends
	if !r.offsetsHold() || !r.matchBrackets() || !r.hasNestedConditional() && !r.top(nil) {
		return src
	}
	var b strings.Builder
	b.WriteString(src[:r.toks[0].Pos])
	r.top(&b)
	b.WriteString(src[r.toks[len(r.toks)-1].Pos:])
	return b.String()
}

// top writes the template's tokens to b, rewriting nested conditionals and
// the chained conditionals that make up an output or a set value. With b
// nil it writes nothing and reports whether there is a chained one.
func (r *condRewriter) top(b *strings.Builder) (chained bool) {
	last := len(r.toks) - 1 // EOF
	for i := 0; i < last; i++ {
		from, end := -1, -1 // the expression [from, end) of an output or set
		switch t := r.toks[i]; t.Type {
		case tokens.VariableBegin:
			from, end = i+1, r.next(i, tokens.VariableEnd)
		case tokens.BlockBegin:
			if i+1 < last && r.isKeyword(r.toks[i+1], "set") {
				if end = r.next(i, tokens.BlockEnd); end >= 0 {
					if eq := r.nextOutside(i, end, tokens.Assign); eq >= 0 {
						from = eq + 1
					}
				}
			}
		}
		if from < 0 || end < 0 || !r.isChain(from, end) {
			if b != nil {
				r.emit(b, i, i+1)
				if m := r.match[i]; m >= 0 {
					i = m - 1
				}
			}
			continue
		}
		chained = true
		if b == nil {
			return true
		}
		r.emit(b, i, from)
		r.item(b, from, end)
		i = end - 1
	}
	return chained
}

// isChain reports whether [from, to) is a chained conditional: two if
// keywords outside brackets.
func (r *condRewriter) isChain(from, to int) bool {
	first := r.find(from, to, "if")
	return first >= 0 && r.find(first+1, to, "if") >= 0
}

// next returns the index of the first token of type typ after i, or -1.
func (r *condRewriter) next(i int, typ tokens.Type) int {
	for j := i + 1; j < len(r.toks); j++ {
		if r.toks[j].Type == typ {
			return j
		}
	}
	return -1
}

// nextOutside returns the index of the first token of type typ in
// (i, end) outside brackets, or -1.
func (r *condRewriter) nextOutside(i, end int, typ tokens.Type) int {
	for j := i + 1; j < end; j++ {
		if m := r.match[j]; m >= 0 {
			j = m
			continue
		}
		if r.toks[j].Type == typ {
			return j
		}
	}
	return -1
}

type condRewriter struct {
	src   string
	toks  []*tokens.Token // without whitespace; the last is EOF
	match []int           // match[i]: the closing bracket of opening bracket i, or -1
}

// offsetsHold checks that the tokens this rewrite moves or drops are
// where their offsets say, in order, so the rewrite cuts src exactly.
func (r *condRewriter) offsetsHold() bool {
	prev := 0
	for _, t := range r.toks {
		if t.Pos < prev || t.Pos > len(r.src) {
			return false
		}
		prev = t.Pos
		switch t.Type {
		case tokens.Name, tokens.Comma, tokens.Colon, tokens.Assign,
			tokens.LeftParenthesis, tokens.RightParenthesis, tokens.LeftBracket,
			tokens.RightBracket, tokens.LeftBrace, tokens.RightBrace:
			if !strings.HasPrefix(r.src[t.Pos:], t.Val) {
				return false
			}
		}
	}
	return true
}

// matchBrackets pairs every bracket; false when they do not balance.
func (r *condRewriter) matchBrackets() bool {
	closer := map[tokens.Type]tokens.Type{
		tokens.LeftParenthesis: tokens.RightParenthesis,
		tokens.LeftBracket:     tokens.RightBracket,
		tokens.LeftBrace:       tokens.RightBrace,
	}
	r.match = make([]int, len(r.toks))
	var open []int
	for i, t := range r.toks {
		r.match[i] = -1
		if _, ok := closer[t.Type]; ok {
			open = append(open, i)
			continue
		}
		switch t.Type {
		case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
			if len(open) == 0 || closer[r.toks[open[len(open)-1]].Type] != t.Type {
				return false
			}
			r.match[open[len(open)-1]] = i
			open = open[:len(open)-1]
		}
	}
	return len(open) == 0
}

// hasNestedConditional reports whether an `if` keyword sits inside a
// bracket (outside them, `if` starts a tag or is a conditional gonja
// parses itself).
func (r *condRewriter) hasNestedConditional() bool {
	depth := 0
	for _, t := range r.toks {
		switch {
		case r.isKeyword(t, "if") && depth > 0:
			return true
		case t.Type == tokens.LeftParenthesis || t.Type == tokens.LeftBracket || t.Type == tokens.LeftBrace:
			depth++
		case t.Type == tokens.RightParenthesis || t.Type == tokens.RightBracket || t.Type == tokens.RightBrace:
			depth--
		}
	}
	return false
}

func (r *condRewriter) isKeyword(t *tokens.Token, word string) bool {
	return t.Type == tokens.Name && t.Val == word
}

// text is the source of token i up to the next token.
func (r *condRewriter) text(i int) string { return r.src[r.toks[i].Pos:r.toks[i+1].Pos] }

// emit writes tokens [from, to), each bracket's contents rewritten.
func (r *condRewriter) emit(b *strings.Builder, from, to int) {
	for i := from; i < to; i++ {
		b.WriteString(r.text(i))
		if end := r.match[i]; end >= 0 {
			r.group(b, i+1, end)
			i = end - 1 // the closing bracket is written next
		}
	}
}

// group writes the contents [from, to) of a bracket: its items, separated
// by commas, colons (dicts, slices) or = (keyword arguments), each of
// which may be a conditional.
func (r *condRewriter) group(b *strings.Builder, from, to int) {
	start := from
	for i := from; i < to; i++ {
		if end := r.match[i]; end >= 0 {
			i = end
			continue
		}
		switch r.toks[i].Type {
		case tokens.Comma, tokens.Colon, tokens.Assign:
			r.item(b, start, i)
			b.WriteString(r.text(i))
			start = i + 1
		}
	}
	r.item(b, start, to)
}

// item writes the expression [from, to), rewriting it when it is a
// conditional: A if C [else B], B itself possibly one.
func (r *condRewriter) item(b *strings.Builder, from, to int) {
	at, other := r.find(from, to, "if"), -1
	if at < 0 {
		r.emit(b, from, to)
		return
	}
	// The condition cannot hold a bare conditional, so the first else
	// after the if is this conditional's.
	if other = r.find(at+1, to, "else"); other < 0 {
		other = to
	}
	b.WriteString("((")
	r.emit(b, at+1, other)
	b.WriteString(") and [(")
	r.emit(b, from, at)
	b.WriteString(")] or [")
	if other < to {
		b.WriteString("(")
		r.item(b, other+1, to)
		b.WriteString(")")
	} else {
		b.WriteString(undefinedName)
	}
	b.WriteString("])[0]")
}

// find returns the index of the first keyword word in [from, to) outside
// nested brackets, or -1.
func (r *condRewriter) find(from, to int, word string) int {
	for i := from; i < to; i++ {
		if end := r.match[i]; end >= 0 {
			i = end
			continue
		}
		if r.isKeyword(r.toks[i], word) {
			return i
		}
	}
	return -1
}
