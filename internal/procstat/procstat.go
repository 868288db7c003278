// Package procstat reads this process's memory figures from Linux's /proc:
// VmRSS, VmHWM, … from /proc/self/status (the benchmarks' resident-memory
// columns), AnonHugePages from /proc/self/smaps_rollup (the kernels' huge
// page test).
package procstat

import (
	"os"
	"strconv"
	"strings"
)

// Bytes returns the "Field:   N kB" line of /proc/self/status in bytes, or
// 0 where there is no such file or field (not Linux).
func Bytes(field string) int64 {
	n, _ := FileBytes("/proc/self/status", field)
	return n
}

// FileBytes returns the "Field:   N kB" line of the file at path in bytes,
// and whether the file has that field.
func FileBytes(path, field string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err == nil
			}
		}
	}
	return 0, false
}
