package kernels

import (
	"sync"
	"testing"
	"unsafe"
)

// Ensure packed-weight memory is zero, 64-byte aligned, as long as asked
// (with its padding), and never shared between two matrices, whether
// carved from a slab or given memory of its own.
func TestPacked_ZeroAlignedDistinct(t *testing.T) {
	for _, huge := range []bool{true, false} {
		saved := useHugePages
		useHugePages = huge
		var got [][]byte
		for _, n := range []int{1, 63, 64, 4096 + 3, 1 << 20, packedSlab/4 + 1, 3 << 20, packedSlab / 3} {
			b := packed[byte](n, 5)
			if len(b) != n || cap(b) < n+5 {
				t.Fatalf("huge=%v: packed(%d, 5) has len %d cap %d", huge, n, len(b), cap(b))
			}
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); p%64 != 0 {
				t.Fatalf("huge=%v: packed(%d) starts at %#x, not 64-byte aligned", huge, n, p)
			}
			for i, v := range b[:n+5] {
				if v != 0 {
					t.Fatalf("huge=%v: packed(%d)[%d] = %d, want 0", huge, n, i, v)
				}
			}
			for i := range b[:n+5] {
				b[:n+5][i] = byte(len(got) + 1)
			}
			got = append(got, b[:n+5])
		}
		for i, b := range got { // a later matrix overlapping an earlier one overwrote it
			for j, v := range b {
				if v != byte(i+1) {
					t.Fatalf("huge=%v: matrix %d byte %d is %d, want %d: memory shared", huge, i, j, v, i+1)
				}
			}
		}
		if f := packed[float32](0, 0); f == nil || len(f) != 0 {
			t.Fatalf("huge=%v: packed(0) = %v, want an empty, non-nil slice", huge, f)
		}
		useHugePages = saved
	}
}

// Ensure matrices packed at once on several goroutines (Linear packs a
// weight on first use, from whichever goroutine calls it) never share
// memory.
func TestPacked_Concurrent(t *testing.T) {
	const workers, each = 8, 40
	got := make([][][]uint16, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				b := packed[uint16](1+(w*each+i)*997%(1<<19), 0)
				for j := range b {
					b[j] = uint16(w*each + i)
				}
				got[w] = append(got[w], b)
			}
		}()
	}
	wg.Wait()
	for w := range got {
		for i, b := range got[w] {
			for j, v := range b {
				if v != uint16(w*each+i) {
					t.Fatalf("worker %d matrix %d value %d is %d, want %d: memory shared", w, i, j, v, w*each+i)
				}
			}
		}
	}
}
