// Package procstat reads this process's memory figures (VmRSS, VmHWM, …)
// from /proc/self/status, for the benchmarks' resident-memory columns.
package procstat

import (
	"os"
	"strconv"
	"strings"
)

// Bytes returns the "Field:   N kB" line of /proc/self/status in bytes, or
// 0 where there is no such file or field (not Linux).
func Bytes(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
