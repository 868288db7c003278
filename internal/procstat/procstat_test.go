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
	if v, ok := FileBytes("/proc/self/status", "NoSuchField"); ok || v != 0 {
		t.Errorf("FileBytes of NoSuchField = %d, %v; want 0, false", v, ok)
	}
	if v, ok := FileBytes("/proc/self/status", "VmHWM"); !ok || v < rss {
		t.Errorf("FileBytes of VmHWM = %d, %v; want at least VmRSS %d, true", v, ok, rss)
	}
}
