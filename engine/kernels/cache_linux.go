package kernels

import (
	"os"
	"path/filepath"
	"strings"
)

// l2Bytes returns the size of one core's unified level-2 cache as Linux
// reports it (/sys/devices/system/cpu/cpu0/cache), or 0 when it cannot be
// read.
func l2Bytes() int {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	for _, d := range dirs {
		level, _ := os.ReadFile(filepath.Join(d, "level"))
		kind, _ := os.ReadFile(filepath.Join(d, "type"))
		if strings.TrimSpace(string(level)) != "2" || strings.TrimSpace(string(kind)) == "Instruction" {
			continue
		}
		size, _ := os.ReadFile(filepath.Join(d, "size"))
		if n := parseCacheSize(strings.TrimSpace(string(size))); n > 0 {
			return n
		}
	}
	return 0
}
