package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/quarrylake/quarry/internal/earlyheap"
)

// hugeWatch is a stdout that notes, while the command writes to it, the
// largest read-write mapping of the process advised MADV_HUGEPAGE.
type hugeWatch struct {
	writes int
	most   uint64
	err    error
}

func (w *hugeWatch) Write(p []byte) (int, error) {
	w.writes++
	w.most, w.err = largestHugeMapping()
	return len(p), nil
}

// largestHugeMapping reads /proc/self/smaps: the size of the largest
// read-write mapping whose VmFlags hold hg (MADV_HUGEPAGE).
func largestHugeMapping() (uint64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var most, size uint64
	rw := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 2 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			lo, hi, _ := strings.Cut(fields[0], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				size, rw = b-a, strings.HasPrefix(fields[1], "rw")
				continue
			}
		}
		if fields, ok := strings.CutPrefix(line, "VmFlags:"); ok && rw && size > most {
			for _, fl := range strings.Fields(fields) {
				if fl == "hg" {
					most = size
				}
			}
		}
	}
	return most, sc.Err()
}

// TestQueryHugeHeap: a search (a query that returns lines) runs on a heap
// advised for transparent huge pages (hugeHeap): while it writes, the
// process has a read-write mapping of about hugeHeapBytes advised
// MADV_HUGEPAGE. Without hugeHeap the largest such mapping is the
// runtime's own metadata (none at all in a trial).
func TestQueryHugeHeap(t *testing.T) {
	if !earlyheap.THPMadvise() {
		t.Skip("transparent huge pages are not set to madvise here: hugeHeap does nothing")
	}
	dir := emptyLake(t)
	w := &hugeWatch{}
	e := &env{stdin: strings.NewReader(""), stdout: w, stderr: io.Discard, getenv: func(string) string { return "" }}
	if code := runMain(context.Background(), e, []string{"query", "--lake", dir, "--format", "table", "error"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if w.err != nil {
		t.Fatal(w.err)
	}
	if w.writes == 0 || w.most < hugeHeapBytes-2<<20 {
		t.Errorf("while the search wrote (%d writes) the largest read-write mapping advised MADV_HUGEPAGE was %d bytes; want at least %d", w.writes, w.most, hugeHeapBytes-2<<20)
	}
}

// TestRunHugeHeap: quarry run grows its heap into a range advised for
// transparent huge pages (runHugeHeap): while it prints its summary the
// process has a read-write mapping of about runHugeHeapBytes advised
// MADV_HUGEPAGE.
func TestRunHugeHeap(t *testing.T) {
	if !earlyheap.THPMadvise() {
		t.Skip("transparent huge pages are not set to madvise here: runHugeHeap does nothing")
	}
	w := &hugeWatch{}
	e := &env{stdin: strings.NewReader(""), stdout: w, stderr: io.Discard, getenv: func(string) string { return "" }}
	args := []string{"run", "--data", t.TempDir(), "--lines", "50", "--tenants", "acme", "--timeout", "2m"}
	if code := runMain(context.Background(), e, args); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if w.err != nil {
		t.Fatal(w.err)
	}
	if w.writes == 0 || w.most < runHugeHeapBytes-2<<20 {
		t.Errorf("while the run wrote (%d writes) the largest read-write mapping advised MADV_HUGEPAGE was %d bytes; want at least %d", w.writes, w.most, runHugeHeapBytes-2<<20)
	}
}

// anonHugeAt reads /proc/self/smaps: the AnonHugePages, in bytes, of the
// mapping that holds addr.
func anonHugeAt(addr uintptr) (uint64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if in && fields[0] == "AnonHugePages:" && len(fields) >= 2 {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, sc.Err()
}

// TestCollapse: a 2 MB block of which one 4 KB page is touched (as the
// block the heap's top falls in when hugeHeap advises the heap) is one
// huge page after collapse, so its other pages take no fault of their own.
func TestCollapse(t *testing.T) {
	if !earlyheap.THPMadvise() {
		t.Skip("transparent huge pages are not set to madvise here")
	}
	const huge = 2 << 20
	m, err := syscall.Mmap(-1, 0, 2*huge, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	lo := (base + huge - 1) &^ (huge - 1)
	block := m[lo-base : lo-base+huge]
	block[0] = 1 // the block now has a page table of 4 KB pages
	if n, err := anonHugeAt(lo); err != nil || n != 0 {
		t.Fatalf("before collapse: AnonHugePages %d, %v; want 0", n, err)
	}
	if err := earlyheap.Collapse(lo); err != nil {
		t.Skipf("the kernel did not collapse (%v): no huge page to be had here", err)
	}
	if n, err := anonHugeAt(lo); err != nil || n < huge {
		t.Errorf("after collapse: AnonHugePages %d, %v; want %d", n, err, huge)
	}
	if block[0] != 1 || block[huge-1] != 0 {
		t.Errorf("collapse changed the block's bytes: %d %d", block[0], block[huge-1])
	}
}
