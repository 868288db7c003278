//go:build race

package local_test

// raceDetector reports a -race build, whose slowdown some long tests skip.
const raceDetector = true
