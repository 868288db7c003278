package kernels

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHugePages asks the kernel to back the whole 2 MiB pages within
// the n bytes at p with transparent huge pages, for pooled buffers: memory
// the heap touched before keeps its small pages (unlike adviseFresh, which
// drops them, at the cost of faulting them in again). Best effort: errors
// are ignored.
func adviseHugePages(p unsafe.Pointer, n int) {
	start := (uintptr(p) + hugePage - 1) &^ (hugePage - 1)
	end := (uintptr(p) + uintptr(n)) &^ (hugePage - 1)
	if !useHugePages || end <= start {
		return
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), end-start), unix.MADV_HUGEPAGE)
}

// adviseFresh asks for huge pages behind b, memory that has not been
// written since it was allocated (its zeros are all it holds). It drops
// b's pages first: the Go heap may hand out memory it touched before, whose
// small pages would stay, and a dropped page reads as zero again, as a
// fresh allocation must. With THP in "madvise" mode (it is otherwise off
// for the Go heap) the first write to a whole 2 MiB page of b then faults
// in a huge page.
func adviseFresh(b []byte) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start, end := (p+4095)&^4095, (p+uintptr(len(b)))&^4095
	if !useHugePages || end <= start {
		return
	}
	b = b[start-p : end-p]
	_ = unix.Madvise(b, unix.MADV_DONTNEED)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
}
