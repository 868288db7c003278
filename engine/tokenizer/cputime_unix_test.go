//go:build unix

package tokenizer

import "syscall"

// cpuSeconds returns the CPU time (user + system) this process has used,
// for benchmark rates that do not depend on how busy a shared machine is.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
