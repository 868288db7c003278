//go:build !race

package remote_test

const raceDetector = false
