package kernels

import (
	"bytes"
	"os"
	"runtime"
	"testing"

	"github.com/artgo/art/internal/procstat"
)

// anonHugeKB is the process's memory in transparent huge pages, or -1
// when it cannot be read.
func anonHugeKB() int {
	n, ok := procstat.FileBytes("/proc/self/smaps_rollup", "AnonHugePages")
	if !ok {
		return -1
	}
	return int(n >> 10)
}

// Ensure packed weights get huge pages where the kernel gives them to
// processes that ask (THP "madvise" or "always"), even in memory the Go
// heap had touched before: 4 KiB pages cost decoding 5-30 % of its
// streaming rate (packedmem.go).
func TestPacked_HugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !bytes.Contains(mode, []byte("[madvise]")) && !bytes.Contains(mode, []byte("[always]")) {
		t.Skipf("transparent huge pages are not offered here (%q, %v): nothing to check", mode, err)
	}
	if anonHugeKB() < 0 {
		t.Skip("no AnonHugePages in /proc/self/smaps_rollup: nothing to check")
	}
	// Leave touched, freed memory in the heap for the slabs to reuse.
	for range 4 {
		junk := make([]byte, 96<<20)
		for i := 0; i < len(junk); i += 4096 {
			junk[i] = 1
		}
		runtime.KeepAlive(junk)
	}
	runtime.GC()
	before := anonHugeKB()
	// Most of a slab in small matrices, and one with memory of its own.
	var mats [][]int8
	for range 6 {
		mats = append(mats, packed[int8](6<<20, 0))
	}
	mats = append(mats, packed[int8](packedSlab/4+1<<20, 0))
	written := 0
	for _, m := range mats {
		for i := range m {
			m[i] = 1
		}
		written += len(m)
	}
	gained := anonHugeKB() - before
	runtime.KeepAlive(mats)
	// Whole huge pages of the memory written: at least half of them (the
	// kernel may be short of free 2 MiB blocks, and a slab's ends are
	// partial pages).
	if want := written >> 10 / 2; gained < want {
		t.Fatalf("writing %d MiB of packed weights added %d KiB of huge pages, want at least %d", written>>20, gained, want)
	}
}
