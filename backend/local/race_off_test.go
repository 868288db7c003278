//go:build !race

package local_test

const raceDetector = false
