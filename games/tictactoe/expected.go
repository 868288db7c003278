package tictactoe

// Policy gives, for a board with X to move, the probability of replying
// with each cell 0..8. Mass on taken cells, and whatever is missing from 1
// (replies that are not a single digit), are invalid moves. An error (the
// model could not be run) ends Expected with that error.
type Policy func(b *Board) ([9]float64, error)

// Expected computes exactly, by walking the game tree, the mean reward of a
// policy playing X against the uniformly random opponent, and the
// probability that its game ends with an invalid move. The policy is asked
// once per reachable board (at most a few thousand); its first error is
// returned.
func Expected(p Policy) (reward, invalid float64, err error) {
	type value struct{ reward, invalid float64 }
	memo := map[Board]value{}
	var walk func(b Board) (value, error)
	walk = func(b Board) (value, error) {
		if v, ok := memo[b]; ok {
			return v, nil
		}
		probs, err := p(&b)
		if err != nil {
			return value{}, err
		}
		var v value
		valid := 0.0
		for c, pc := range probs {
			if b[c] != 0 || pc == 0 {
				continue
			}
			valid += pc
			nb := b
			nb[c] = 'X'
			if out, done := result(&nb, 0); done {
				v.reward += pc * out.Reward
				continue
			}
			free := nb.Empty()
			for _, o := range free {
				ob := nb
				ob[o] = 'O'
				w := pc / float64(len(free))
				if out, done := result(&ob, 0); done {
					v.reward += w * out.Reward
					continue
				}
				next, err := walk(ob)
				if err != nil {
					return value{}, err
				}
				v.reward += w * next.reward
				v.invalid += w * next.invalid
			}
		}
		v.invalid += 1 - valid
		memo[b] = v
		return v, nil
	}
	v, err := walk(Board{})
	if err != nil {
		return 0, 0, err
	}
	return v.reward, v.invalid, nil
}
