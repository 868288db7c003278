package main

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Limits of Eval: an expression is model output, so its size and nesting
// are bounded before any arithmetic happens.
const (
	MaxExprLen   = 256 // bytes
	MaxExprDepth = 32  // nested parentheses and unary signs
	maxDigits    = 40  // digits in one number literal
)

// ErrExpr is wrapped by every error of Eval.
var ErrExpr = errors.New("calculator: bad expression")

// Eval evaluates an arithmetic expression exactly, in rational arithmetic:
// decimal numbers (12, 3.5, .25), the binary operators + - * / with the
// usual precedence and left associativity, unary + and -, and parentheses.
// Spaces are ignored, and so are commas between digits ("1,250"). Anything
// else (names, "**", "%", division by zero, an expression longer than
// MaxExprLen or nested deeper than MaxExprDepth) is an error wrapping
// ErrExpr that says where it went wrong.
func Eval(expr string) (*big.Rat, error) {
	if len(expr) > MaxExprLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrExpr, MaxExprLen)
	}
	p := &parser{s: expr}
	v, err := p.sum(0)
	if err != nil {
		return nil, err
	}
	if p.skip(); p.i < len(p.s) {
		return nil, p.errorf("unexpected %q", p.s[p.i])
	}
	return v, nil
}

// FormatRat writes r as the calculator shows it: an integer as is, any
// other number as a decimal rounded to 10 places without trailing zeros.
func FormatRat(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	s := strings.TrimRight(r.FloatString(10), "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// parser is a recursive-descent parser over the grammar
//
//	sum     = product { ("+" | "-") product }
//	product = unary { ("*" | "/") unary }
//	unary   = ("+" | "-") unary | primary
//	primary = number | "(" sum ")"
type parser struct {
	s string
	i int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrExpr, p.i, fmt.Sprintf(format, args...))
}

func (p *parser) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *parser) peek() byte {
	if p.skip(); p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *parser) sum(depth int) (*big.Rat, error) {
	v, err := p.product(depth)
	if err != nil {
		return nil, err
	}
	for {
		op := p.peek()
		if op != '+' && op != '-' {
			return v, nil
		}
		p.i++
		w, err := p.product(depth)
		if err != nil {
			return nil, err
		}
		if op == '+' {
			v.Add(v, w)
		} else {
			v.Sub(v, w)
		}
	}
}

func (p *parser) product(depth int) (*big.Rat, error) {
	v, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for {
		op := p.peek()
		if op != '*' && op != '/' {
			return v, nil
		}
		p.i++
		if p.peek() == '*' {
			return nil, p.errorf("** is not supported; multiply explicitly")
		}
		at := p.i
		w, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		if op == '*' {
			v.Mul(v, w)
		} else {
			if w.Sign() == 0 {
				p.i = at
				return nil, p.errorf("division by zero")
			}
			v.Quo(v, w)
		}
	}
}

func (p *parser) unary(depth int) (*big.Rat, error) {
	if depth >= MaxExprDepth {
		return nil, p.errorf("nested deeper than %d", MaxExprDepth)
	}
	switch p.peek() {
	case '-':
		p.i++
		v, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return v.Neg(v), nil
	case '+':
		p.i++
		return p.unary(depth + 1)
	case '(':
		p.i++
		v, err := p.sum(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, p.errorf("missing )")
		}
		p.i++
		return v, nil
	case 0:
		return nil, p.errorf("unexpected end of expression")
	}
	return p.number()
}

// number reads a decimal literal: digits (commas allowed between them), an
// optional fraction.
func (p *parser) number() (*big.Rat, error) {
	start := p.i
	var digits strings.Builder
	dot := false
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c >= '0' && c <= '9':
			digits.WriteByte(c)
		case c == '.' && !dot:
			dot = true
			digits.WriteByte(c)
		case c == ',' && p.i > start && isDigit(p.s[p.i-1]) && p.i+1 < len(p.s) && isDigit(p.s[p.i+1]) && !dot:
			// a thousands separator
		default:
			goto done
		}
		p.i++
	}
done:
	lit := digits.String()
	if lit == "" || lit == "." {
		p.i = start
		if start < len(p.s) {
			return nil, p.errorf("unexpected %q", p.s[start])
		}
		return nil, p.errorf("unexpected end of expression")
	}
	if len(lit) > maxDigits {
		p.i = start
		return nil, p.errorf("number longer than %d digits", maxDigits)
	}
	v, ok := new(big.Rat).SetString(lit)
	if !ok {
		p.i = start
		return nil, p.errorf("bad number %q", lit)
	}
	return v, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
