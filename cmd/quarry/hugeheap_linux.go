package main

import (
	"runtime"
	"syscall"
	"unsafe"

	"github.com/quarrylake/quarry/internal/earlyheap"
)

// hugeHeap makes the heap a query is about to allocate from eligible for
// transparent huge pages. Every fresh 4 KB page a process touches costs a
// page fault, and a query touches tens of MB (on the bench VM a fault costs
// 15-30 us: a third of a selective term's CPU and of a full render's);
// with THP set to madvise (as on Debian and most distributions) the Go
// heap is never advised, so each page of it faults alone.
//
// The Go runtime maps heap as it grows, and a mapping made later does not
// inherit an earlier madvise, so hugeHeap first makes the heap grow: it
// allocates hugeHeapBytes (fresh from the OS, so nothing is touched),
// advises MADV_HUGEPAGE over it and the heap below it in its 64 MB arena,
// and frees it with a collection (about 10 ms of CPU on the bench VM, most
// of it the collector's own first faults). Later allocations take the
// lowest free pages: this range, where a first touch maps 2 MB at once.
// The pages are only reserved until touched, and a query's allocations
// are freed at exit. Errors are ignored, as the advice is only a hint.
// Only when THP is madvise: with always the heap has huge pages already,
// with never the advice does nothing, and either way the collection would
// be spent for nothing.
//
// The collector should be off (batchGC) so that the allocation does not
// start a collection of its own.
func hugeHeap() { hugeHeapOf(hugeHeapBytes) }

// runHugeHeap is hugeHeap for quarry run, over runHugeHeapBytes.
func runHugeHeap() { hugeHeapOf(runHugeHeapBytes) }

// hugeHeapOf is hugeHeap over n bytes. quarry run prepares
// runHugeHeapBytes: its heap peaks at 600-800 MB for 600,000 lines, and its
// page faults (12 us each on the bench VM) were a fifth of its CPU.
func hugeHeapOf(n uintptr) {
	if !earlyheap.THPMadvise() {
		return
	}
	const arena, huge = 64 << 20, 2 << 20
	b := make([]byte, n)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	beg := p &^ (arena - 1)
	end := (p + n) &^ (huge - 1)
	// Addresses as integers: no Go pointer to memory that is freed below.
	syscall.Syscall(syscall.SYS_MADVISE, beg, end-beg, syscall.MADV_HUGEPAGE)
	// The 2 MB block b starts in holds the top of the heap below it, so it
	// has 4 KB pages already and the advice does not change it; the query's
	// first allocations take its free pages, each a fault of its own (about
	// 400 in a selective term). Collapsed into one huge page now, they take
	// none.
	if lo := p &^ (huge - 1); lo != p {
		earlyheap.Collapse(lo)
	}
	runtime.KeepAlive(b) // b is dead below: the collection frees it
	runtime.GC()
}
