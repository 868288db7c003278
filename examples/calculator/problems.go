package main

import (
	"fmt"
	"math/rand/v2"
)

// Problem is an arithmetic word problem with its exact answer, an integer.
type Problem struct {
	ID       string
	Question string
	Answer   int64
	// Solution is an expression whose value is Answer (for logs and tests).
	Solution string
}

// template makes a problem from a random source; every template draws its
// numbers so that the answer is an integer (divisions come out even).
type template func(r *rand.Rand) (question, solution string, answer int64)

var names = []string{"Maya", "Tom", "Aisha", "Lucas", "Priya", "Kenji", "Sofia", "Omar", "Lena", "Diego"}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// between returns a uniform integer in [lo, hi].
func between(r *rand.Rand, lo, hi int64) int64 { return lo + r.Int64N(hi-lo+1) }

var templates = []template{
	func(r *rand.Rand) (string, string, int64) { // change from a purchase
		price, n := between(r, 12, 95), between(r, 3, 24)
		paid := (price*n/100 + between(r, 1, 5)) * 100
		name := pick(r, names)
		return fmt.Sprintf("%s buys %d notebooks at %d cents each and pays with %d cents. How many cents of change does %s get back?",
				name, n, price, paid, name),
			fmt.Sprintf("%d - %d * %d", paid, n, price), paid - n*price
	},
	func(r *rand.Rand) (string, string, int64) { // a product of three
		rows, trees, apples := between(r, 4, 30), between(r, 6, 40), between(r, 15, 120)
		return fmt.Sprintf("An orchard has %d rows of %d trees, and each tree gives %d apples. How many apples does the orchard give?",
				rows, trees, apples),
			fmt.Sprintf("%d * %d * %d", rows, trees, apples), rows * trees * apples
	},
	func(r *rand.Rand) (string, string, int64) { // even sharing after a gift
		buses, per, extra := between(r, 3, 12), between(r, 18, 55), between(r, 2, 40)
		total := buses*per + extra
		return fmt.Sprintf("A school has %d students. %d of them stay behind, and the rest are split equally among %d buses. How many students ride in each bus?",
				total, extra, buses),
			fmt.Sprintf("(%d - %d) / %d", total, extra, buses), per
	},
	func(r *rand.Rand) (string, string, int64) { // running total
		start, won := between(r, 20, 400), between(r, 5, 300)
		lost := between(r, 5, min(200, start+won))
		name := pick(r, names)
		return fmt.Sprintf("%s has %d marbles, wins %d more in a game, and then gives %d to a friend. How many marbles does %s have now?",
				name, start, won, lost, name),
			fmt.Sprintf("%d + %d - %d", start, won, lost), start + won - lost
	},
	func(r *rand.Rand) (string, string, int64) { // rate times time, minus a loss
		rate, minutes := between(r, 6, 45), between(r, 5, 60)
		leak := between(r, 1, rate*minutes/2)
		return fmt.Sprintf("An empty tank is filled at %d liters per minute for %d minutes, and then %d liters leak out. How many liters are left in the tank?",
				rate, minutes, leak),
			fmt.Sprintf("%d * %d - %d", rate, minutes, leak), rate*minutes - leak
	},
	func(r *rand.Rand) (string, string, int64) { // percentage of a multiple of 100
		pct, base := 5*between(r, 1, 19), 100*between(r, 2, 90)
		return fmt.Sprintf("A jacket costs %d dollars and is on sale for %d percent off. How many dollars does it cost on sale?",
				base, pct),
			fmt.Sprintf("%d - %d * %d / 100", base, base, pct), base - base*pct/100
	},
	func(r *rand.Rand) (string, string, int64) { // two groups, then an average
		a, b, n := between(r, 10, 90), between(r, 10, 90), 2*between(r, 1, 5) // n even: the total halves evenly
		total := (a + b) * n
		return fmt.Sprintf("Two classes collect cans: the first collects %d cans and the second %d cans every day for %d days. All cans are then shared equally by the 2 classes. How many cans does each class get?",
				a, b, n),
			fmt.Sprintf("(%d + %d) * %d / 2", a, b, n), total / 2
	},
}

// GenerateProblems returns n distinct problems drawn from seed. The same
// seed always gives the same problems, in the same order.
func GenerateProblems(seed uint64, n int) []Problem {
	r := rand.New(rand.NewPCG(seed, 0xca1c))
	seen := map[string]bool{}
	out := make([]Problem, 0, n)
	for len(out) < n {
		q, sol, ans := templates[r.IntN(len(templates))](r)
		if seen[q] {
			continue
		}
		seen[q] = true
		out = append(out, Problem{ID: fmt.Sprintf("%d-%d", seed, len(out)), Question: q, Answer: ans, Solution: sol})
	}
	return out
}

// SplitProblems returns nTrain training and nVal held-out problems, drawn
// together from seed so that no question is in both.
func SplitProblems(seed uint64, nTrain, nVal int) (train, val []Problem) {
	all := GenerateProblems(seed, nTrain+nVal)
	return all[:nTrain], all[nTrain:]
}
