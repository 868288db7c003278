package grammar

import (
	"fmt"
	"regexp/syntax"
)

// regex runs a string's "pattern" over its characters as a Thompson NFA:
// a state is the set of instructions the threads are at. JSON Schema
// patterns match anywhere in the string unless anchored, so the pattern is
// compiled as .*(pattern).* with ^ and $ meaning the string's ends.
type regex struct {
	prog *syntax.Prog
	// useful[pc]: a match is reachable from pc past the string's first
	// character (where ^ no longer holds). Threads that cannot match are
	// dropped, so a state with no useful thread is dead at once.
	useful []bool
	// dist[pc]: the fewest characters from pc to a match (past the first
	// character), so a maxLength can be checked before it is too late.
	dist []int
}

func compileRegex(pattern string) (*regex, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%q is not a pattern this grammar can run: %v", pattern, err)
	}
	anyStar := &syntax.Regexp{Op: syntax.OpStar, Flags: syntax.NonGreedy, Sub: []*syntax.Regexp{{Op: syntax.OpAnyChar}}}
	wrapped := &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{anyStar, re, {Op: syntax.OpStar, Sub: []*syntax.Regexp{{Op: syntax.OpAnyChar}}}}}
	prog, err := syntax.Compile(wrapped.Simplify())
	if err != nil {
		return nil, fmt.Errorf("%q: %v", pattern, err)
	}
	for _, in := range prog.Inst {
		if in.Op == syntax.InstEmptyWidth && syntax.EmptyOp(in.Arg)&^(syntax.EmptyBeginText|syntax.EmptyEndText) != 0 {
			return nil, fmt.Errorf("%q: word boundaries and line anchors are not supported (^ and $ are)", pattern)
		}
	}
	r := &regex{prog: prog, useful: make([]bool, len(prog.Inst))}
	for changed := true; changed; {
		changed = false
		for pc := range prog.Inst {
			if r.useful[pc] {
				continue
			}
			in := &prog.Inst[pc]
			u := false
			switch in.Op {
			case syntax.InstMatch:
				u = true
			case syntax.InstAlt, syntax.InstAltMatch:
				u = r.useful[in.Out] || r.useful[in.Arg]
			case syntax.InstEmptyWidth:
				u = syntax.EmptyOp(in.Arg)&syntax.EmptyBeginText == 0 && r.useful[in.Out]
			case syntax.InstFail:
			default:
				u = r.useful[in.Out]
			}
			if u {
				r.useful[pc], changed = true, true
			}
		}
	}
	const inf = 1 << 30
	r.dist = make([]int, len(prog.Inst))
	for i := range r.dist {
		r.dist[i] = inf
	}
	for changed := true; changed; {
		changed = false
		for pc := range prog.Inst {
			in := &prog.Inst[pc]
			d := inf
			switch in.Op {
			case syntax.InstMatch:
				d = 0
			case syntax.InstAlt, syntax.InstAltMatch:
				d = min(r.dist[in.Out], r.dist[in.Arg])
			case syntax.InstCapture, syntax.InstNop:
				d = r.dist[in.Out]
			case syntax.InstEmptyWidth:
				if syntax.EmptyOp(in.Arg)&syntax.EmptyBeginText == 0 {
					d = r.dist[in.Out]
				}
			case syntax.InstFail:
			default:
				d = min(inf, r.dist[in.Out]+1)
			}
			if d < r.dist[pc] {
				r.dist[pc], changed = d, true
			}
		}
	}
	return r, nil
}

// minChars is the fewest characters that complete a match from set.
func (r *regex) minChars(set []uint32) int {
	m := 1 << 30
	for _, pc := range set {
		m = min(m, r.dist[pc])
	}
	return m
}

// start is the state before the first character.
func (r *regex) start() []uint32 {
	var set []uint32
	r.add(&set, make([]bool, len(r.prog.Inst)), uint32(r.prog.Start), true)
	return set
}

// add puts pc and what it reaches without consuming a character into set.
// An end-of-text assertion stays in the set: it holds only when the
// string closes (see accepts).
func (r *regex) add(set *[]uint32, seen []bool, pc uint32, atStart bool) {
	if seen[pc] {
		return
	}
	seen[pc] = true
	in := &r.prog.Inst[pc]
	switch in.Op {
	case syntax.InstAlt, syntax.InstAltMatch:
		r.add(set, seen, in.Out, atStart)
		r.add(set, seen, in.Arg, atStart)
	case syntax.InstCapture, syntax.InstNop:
		r.add(set, seen, in.Out, atStart)
	case syntax.InstEmptyWidth:
		if syntax.EmptyOp(in.Arg)&syntax.EmptyEndText != 0 {
			if atStart || r.useful[pc] {
				*set = append(*set, pc)
			}
		} else if atStart {
			r.add(set, seen, in.Out, atStart)
		}
	case syntax.InstFail:
	default: // runes and Match
		if atStart || r.useful[pc] {
			*set = append(*set, pc)
		}
	}
}

// step returns the state after character c, nil when no thread survives.
func (r *regex) step(set []uint32, c rune) []uint32 {
	var next []uint32
	var seen []bool
	for _, pc := range set {
		in := &r.prog.Inst[pc]
		switch in.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			if in.MatchRune(c) {
				if seen == nil {
					seen = make([]bool, len(r.prog.Inst))
				}
				r.add(&next, seen, in.Out, false)
			}
		}
	}
	return next
}

// canStep reports whether some character in lo..hi keeps a thread alive:
// a character being written (a UTF-8 sequence or \u escape not yet
// finished) must still be able to match.
// budget, when >= 0, is how many characters may follow this one.
func (r *regex) canStep(set []uint32, lo, hi rune, budget int) bool {
	for _, pc := range set {
		if !r.useful[pc] || budget >= 0 && r.dist[pc]-1 > budget { // needed ^ later, or too long
			continue
		}
		in := &r.prog.Inst[pc]
		switch in.Op {
		case syntax.InstRuneAny:
			return true
		case syntax.InstRuneAnyNotNL:
			if lo != '\n' || hi != '\n' {
				return true
			}
		case syntax.InstRune1:
			if in.Rune[0] >= lo && in.Rune[0] <= hi {
				return true
			}
		case syntax.InstRune:
			if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
				return true // case folding: do not try to be exact
			}
			for i := 0; i+1 < len(in.Rune); i += 2 {
				if in.Rune[i] <= hi && in.Rune[i+1] >= lo {
					return true
				}
			}
			if len(in.Rune) == 1 && in.Rune[0] >= lo && in.Rune[0] <= hi {
				return true
			}
		}
	}
	return false
}

// accepts reports whether the string may end in state set.
func (r *regex) accepts(set []uint32, atStart bool) bool {
	seen := make([]bool, len(r.prog.Inst))
	var walk func(pc uint32) bool
	walk = func(pc uint32) bool {
		if seen[pc] {
			return false
		}
		seen[pc] = true
		in := &r.prog.Inst[pc]
		switch in.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstAlt, syntax.InstAltMatch:
			return walk(in.Out) || walk(in.Arg)
		case syntax.InstCapture, syntax.InstNop:
			return walk(in.Out)
		case syntax.InstEmptyWidth:
			op := syntax.EmptyOp(in.Arg)
			if op&syntax.EmptyBeginText != 0 && !atStart {
				return false
			}
			return walk(in.Out)
		}
		return false
	}
	for _, pc := range set {
		if walk(pc) {
			return true
		}
	}
	return false
}
