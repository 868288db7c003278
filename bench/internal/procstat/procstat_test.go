package procstat

import (
	"runtime"
	"testing"
)

// Ensure the peak resident set is read, is at least the current one, and
// a field that does not exist reads 0.
func TestBytes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/status is Linux's")
	}
	rss, peak := Bytes("VmRSS"), Bytes("VmHWM")
	if rss <= 0 || peak < rss {
		t.Errorf("VmRSS %d, VmHWM %d bytes: want 0 < VmRSS ≤ VmHWM", rss, peak)
	}
	if v := Bytes("NoSuchField"); v != 0 {
		t.Errorf("NoSuchField = %d, want 0", v)
	}
}
