package kernels

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHugePages asks the kernel to back the n bytes at p with transparent
// huge pages (when THP is in "madvise" mode, as on the project's machines,
// it is otherwise off for the Go heap). Decoding streams every weight once
// per token: with 4 KiB pages that is a TLB miss every 4 KiB and the
// hardware prefetchers stop at each page boundary. Called on fresh panel
// memory before it is first written, so the page faults allocate huge
// pages directly. Best effort: errors are ignored.
func adviseHugePages(p unsafe.Pointer, n int) {
	const page = 4096
	start := (uintptr(p) + page - 1) &^ (page - 1)
	end := (uintptr(p) + uintptr(n)) &^ (page - 1)
	if !useHugePages || end <= start || end-start < 2<<20 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), end-start)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
}
