package main

import (
	"errors"
	"math/big"
	"strings"
	"testing"
)

func TestEval(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"1+2", "3"},
		{"2 + 3 * 4", "14"},
		{"(2 + 3) * 4", "20"},
		{"10 - 4 - 3", "3"},       // left associative
		{"100 / 10 / 5", "2"},     // left associative
		{"7 / 2", "3.5"},          // exact, not integer division
		{"1 / 3", "0.3333333333"}, // shown rounded to 10 places
		{"-3 + 5", "2"},
		{"-(2 - 7) * -2", "-10"},
		{"+4", "4"},
		{"1,250 * 2", "2500"},
		{".25 * 8", "2"},
		{"0.1 + 0.2", "0.3"}, // exact rationals: no float rounding
		{"  ( ( 42 ) ) ", "42"},
		{"123456789012 * 1000000", "123456789012000000"},
	} {
		v, err := Eval(c.in)
		if err != nil {
			t.Errorf("Eval(%q): %v", c.in, err)
			continue
		}
		if got := FormatRat(v); got != c.want {
			t.Errorf("Eval(%q) = %s; want %s", c.in, got, c.want)
		}
	}
}

// Ensure malformed, unsafe or oversized input is an error, never a panic
// or a hang.
func TestEval_Bad(t *testing.T) {
	for _, c := range []struct{ in, msg string }{
		{"", "end of expression"},
		{"1 +", "end of expression"},
		{"(1 + 2", "missing )"},
		{"1 + 2)", `unexpected ')'`},
		{"2 ** 8", "** is not supported"},
		{"5 % 2", `unexpected '%'`},
		{"1 / 0", "division by zero"},
		{"1 / (3 - 3)", "division by zero"},
		{"x + 1", `unexpected 'x'`},
		{"os.exit(1)", `unexpected 'o'`},
		{"1e9", `unexpected 'e'`},
		{"1.2.3", `unexpected '.'`},
		{"3 4", `unexpected '4'`},
		{strings.Repeat("(", 40) + "1" + strings.Repeat(")", 40), "nested deeper"},
		{strings.Repeat("-", 100) + "1", "nested deeper"},
		{strings.Repeat("9", 41), "longer than 40 digits"},
		{strings.Repeat("1+", 200) + "1", "longer than 256 bytes"},
	} {
		v, err := Eval(c.in)
		if !errors.Is(err, ErrExpr) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Eval(%.30q) = %v, %v; want an ErrExpr containing %q", c.in, v, err, c.msg)
		}
	}
}

func FuzzEval(f *testing.F) {
	for _, s := range []string{"1+2*3", "(4-1)/3", "-.5", "1,000", "((("} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Eval(s)
		if (v == nil) == (err == nil) {
			t.Fatalf("Eval(%q) = %v, %v", s, v, err)
		}
	})
}

// Ensure the problems are reproducible, distinct, and their answers are
// what their solutions evaluate to.
func TestGenerateProblems(t *testing.T) {
	a, b := GenerateProblems(3, 300), GenerateProblems(3, 300)
	seen := map[string]bool{}
	for i, p := range a {
		if p != b[i] {
			t.Fatalf("problem %d differs between two runs: %+v vs %+v", i, p, b[i])
		}
		if seen[p.Question] {
			t.Fatalf("problem %d repeats %q", i, p.Question)
		}
		seen[p.Question] = true
		v, err := Eval(p.Solution)
		if err != nil || !v.IsInt() || v.Num().Int64() != p.Answer {
			t.Fatalf("problem %+v: solution evaluates to %v, %v", p, v, err)
		}
		if p.Answer < 0 {
			t.Errorf("problem %+v has a negative answer", p)
		}
	}
	if c := GenerateProblems(4, 300); c[0] == a[0] && c[1] == a[1] {
		t.Error("seeds 3 and 4 give the same problems")
	}
	train, val := SplitProblems(5, 100, 20)
	if len(train) != 100 || len(val) != 20 {
		t.Fatalf("split sizes %d, %d", len(train), len(val))
	}
	for _, p := range train {
		for _, q := range val {
			if p.Question == q.Question {
				t.Fatalf("%q is in both sets", p.Question)
			}
		}
	}
}

func TestCallTool(t *testing.T) {
	for _, c := range []struct {
		name, args, want string
		ok               bool
	}{
		{"calculator", `{"expression": "(3 + 4) * 6"}`, "42", true},
		{"calculator", `{"expression": "1 / 0"}`, "error: calculator: bad expression at offset 4: division by zero", false},
		{"calculator", `{"expr": "1"}`, `error: arguments must be a JSON object {"expression": "..."}`, false},
		{"calculator", `not json`, `error: arguments must be a JSON object {"expression": "..."}`, false},
		{"python", `{"expression": "1"}`, `error: unknown tool "python"; the only tool is "calculator"`, false},
	} {
		got, ok := CallTool(c.name, c.args)
		if got != c.want || ok != c.ok {
			t.Errorf("CallTool(%q, %q) = %q, %v; want %q, %v", c.name, c.args, got, ok, c.want, c.ok)
		}
	}
}

func TestGrade(t *testing.T) {
	for _, c := range []struct {
		reply              string
		reward             float64
		correct, attempted bool
	}{
		{"42", 1, true, true},
		{"The answer is 1,042.", 0.1, false, true}, // a wrong number
		{"6 * 7 = 42", 1, true, true},              // the last number counts
		{"42.0", 1, true, true},
		{"41", 0.1, false, true},
		{"-42", 0.1, false, true},
		{"forty-two", 0, false, false},
		{"", 0, false, false},
	} {
		reward, correct, attempted := Grade(c.reply, 42)
		want := c.reward
		if reward != want || correct != c.correct || attempted != c.attempted {
			t.Errorf("Grade(%q, 42) = %v, %v, %v; want %v, %v, %v", c.reply, reward, correct, attempted, want, c.correct, c.attempted)
		}
	}
	if v, ok := FinalNumber("pay 1,250 cents"); !ok || v.Cmp(big.NewRat(1250, 1)) != 0 {
		t.Errorf("FinalNumber(\"pay 1,250 cents\") = %v, %v", v, ok)
	}
}
