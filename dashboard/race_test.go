//go:build race

package dashboard

// raceEnabled is set when the race detector is on: the browser and
// large-run tests then skip (times mean nothing, and CI runs them once
// without it).
const raceEnabled = true
