//go:build race

package kernels

// raceEnabled trims the test shapes: the race detector slows the float64
// oracle and the Go kernel about 10×, and CI runs the package with -race.
const raceEnabled = true
