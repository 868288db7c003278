package grammar

import (
	"math"
	"strconv"
)

// number is the text of a JSON number being written: -?(0|[1-9][0-9]*)(\.[0-9]+)?
// with at most maxIntDigits and maxFracDigits digits, and no exponent.
type number struct {
	buf  [1 + maxIntDigits + 1 + maxFracDigits]byte
	n    uint8
	neg  bool
	ints uint8 // integer digits
	dot  bool
	frac uint8 // fraction digits
}

// next returns the number after byte b, and whether b may come next given
// the grammar of numbers and n's bounds.
func (x number) next(n *node, b byte) (number, bool) {
	switch {
	case b == '-':
		if x.n != 0 {
			return x, false
		}
		x.neg = true
	case b == '.':
		if n.integer || x.dot || x.ints == 0 {
			return x, false
		}
		x.dot = true
	case b >= '0' && b <= '9':
		switch {
		case x.dot:
			if x.frac == maxFracDigits {
				return x, false
			}
			x.frac++
		case x.ints == 1 && x.buf[x.n-1] == '0', x.ints == maxIntDigits:
			return x, false
		default:
			x.ints++
		}
	default:
		return x, false
	}
	x.buf[x.n] = b
	x.n++
	return x, x.reachable(n)
}

// complete reports whether the text so far is a number within n's bounds.
func (x *number) complete(n *node) bool {
	if x.ints == 0 || x.dot && x.frac == 0 {
		return false
	}
	v, err := strconv.ParseFloat(string(x.buf[:x.n]), 64)
	return err == nil && inBounds(n, v)
}

func inBounds(n *node, v float64) bool {
	return (v > n.lo || v == n.lo && !n.loEx) && (v < n.hi || v == n.hi && !n.hiEx)
}

// reachable reports whether some completion of the text lies within n's
// bounds: the completions of a prefix form a few intervals (one per count
// of integer digits still to come), each checked against the bounds.
func (x *number) reachable(n *node) bool {
	if math.IsInf(n.lo, -1) && math.IsInf(n.hi, 1) {
		return true
	}
	// magnitude intervals [a, b], b excluded unless closed
	check := func(a, b float64, closed bool) bool {
		lo, hi, loIn, hiIn := a, b, true, closed
		if x.neg {
			lo, hi, loIn, hiIn = -b, -a, closed, true
		}
		return intersects(n, lo, hi, loIn, hiIn)
	}
	if x.ints == 0 { // "" or "-": any magnitude
		return check(0, math.Pow(10, maxIntDigits), false)
	}
	start := 0
	if x.neg {
		start = 1
	}
	m, _ := strconv.ParseFloat(string(x.buf[start:start+int(x.ints)]), 64)
	if x.dot {
		v := m
		if x.frac > 0 {
			f, _ := strconv.ParseFloat(string(x.buf[start+int(x.ints)+1:x.n]), 64)
			v += f / math.Pow(10, float64(x.frac))
		}
		if x.frac == maxFracDigits {
			return check(v, v, true)
		}
		return check(v, v+math.Pow(10, -float64(x.frac)), false)
	}
	if n.integer {
		if m == 0 {
			return check(0, 0, true)
		}
		for j := 0; int(x.ints)+j <= maxIntDigits; j++ {
			p := math.Pow(10, float64(j))
			if check(m*p, m*p+p-1, true) {
				return true
			}
		}
		return false
	}
	if m == 0 {
		return check(0, 1, false)
	}
	for j := 0; int(x.ints)+j <= maxIntDigits; j++ {
		p := math.Pow(10, float64(j))
		if check(m*p, (m+1)*p, false) {
			return true
		}
	}
	return false
}

// intersects reports whether the interval from lo to hi (ends included as
// loIn, hiIn say) meets n's bounds.
func intersects(n *node, lo, hi float64, loIn, hiIn bool) bool {
	a, aIn := lo, loIn
	if n.lo > a || n.lo == a && n.loEx {
		a, aIn = n.lo, !n.loEx
	}
	b, bIn := hi, hiIn
	if n.hi < b || n.hi == b && n.hiEx {
		b, bIn = n.hi, !n.hiEx
	}
	return a < b || a == b && aIn && bIn
}
