//go:build race

package remote_test

// raceDetector reports a -race build, whose slowdown some long tests skip.
const raceDetector = true
