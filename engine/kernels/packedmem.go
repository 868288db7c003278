package kernels

import (
	"sync"
	"unsafe"
)

// Packed 16-bit and quantized weights (panels, dp panels: a model's frozen
// base, packed once after loading) live in memory backed by 2 MiB
// transparent huge pages where the kernel allows it. Decoding streams every
// weight once per token, and on 4 KiB pages it pays a TLB miss every
// 4 KiB while the hardware prefetchers stop at each page boundary: on huge
// pages a decoding step's products of a model's layers ran up to 1.25× as
// fast at Q8 and 1.1× at bf16 (BenchmarkDecodeStepPages; not in every run
// on a VM host), and whole q8/q4 decode steps 1.04–1.56× (BENCHMARKS.md,
// "Packed weights on huge pages").
//
// Asking per matrix is not enough. A layer's q, k, v and o weights are
// 0.1–2 MiB, smaller than one huge page, and a larger matrix gets huge
// pages only for the 2 MiB-aligned part of its allocation; and the Go heap
// hands out memory it already touched (a model's unpacked weights, freed
// as they are packed), which keeps its small pages whatever madvise says.
// So matrices are carved, 64-byte aligned, from slabs of fresh memory:
// 2 MiB-aligned, their pages dropped and advised before the first write,
// so that the first touch faults in huge pages.

// hugePage is the size of a transparent huge page with 4 KiB base pages
// (amd64; arm64's usual configuration).
const hugePage = 2 << 20

// packedSlab is the size of the slabs matrices are carved from, one after
// the other, so that neighbours share huge pages. A matrix of more than a
// quarter of it gets memory of its own (2 MiB-aligned), so a slab wastes at
// most a quarter when the next matrix does not fit its rest. The current
// slab stays referenced for the next matrix, so at most this much
// outlives the matrices carved from it.
const packedSlab = 64 << 20

// slabs is the process's allocator of packed-weight memory: like the
// heap, a resource of the process, not state a caller sees. Its memory is
// ordinary Go memory: a slab is freed by the collector when no matrix
// carved from it is left and it is no longer the current one.
var slabs slabAlloc

type slabAlloc struct {
	mu   sync.Mutex
	rest []byte // what is left of the current slab
}

// alloc returns n zero bytes, 64-byte aligned (the kernels' loads),
// carved from a slab.
func (s *slabAlloc) alloc(n int) []byte {
	n = (n + 63) &^ 63
	if n == 0 {
		return nil
	}
	if n > packedSlab/4 || !useHugePages {
		return freshBytes(n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rest) < n {
		s.rest = freshBytes(packedSlab)
	}
	b := s.rest[:n:n]
	s.rest = s.rest[n:]
	return b
}

// freshBytes returns n zero bytes from a new heap allocation, starting on
// a huge page, advised for huge pages (adviseFresh) with the part before
// that start: that part is never written, so once its pages are dropped
// it costs no memory.
func freshBytes(n int) []byte {
	b := make([]byte, n+hugePage)
	off := (hugePage - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))&(hugePage-1))) & (hugePage - 1)
	adviseFresh(b)
	return b[off : off+n : off+n]
}

// packed returns a slice of n values of a packed matrix's element type,
// with room for pad more (zero) values, carved from a slab.
func packed[T float32 | uint16 | int8 | byte](n, pad int) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	b := slabs.alloc((n + pad) * size)
	if b == nil {
		return []T{} // not nil: the panels tell their type by which slice is set
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n+pad)[:n]
}

// heapFloats returns n zero floats from the heap, their whole huge pages
// advised (adviseHugePages): for F32 weights, which full fine-tuning packs
// again after every step (model.RefreshBase), so slabs would churn, and
// for pooled buffers.
func heapFloats(n int) []float32 {
	s := make([]float32, n)
	adviseHugePages(unsafe.Pointer(unsafe.SliceData(s)), 4*n)
	return s
}
