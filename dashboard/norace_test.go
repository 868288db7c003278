//go:build !race

package dashboard

const raceEnabled = false
