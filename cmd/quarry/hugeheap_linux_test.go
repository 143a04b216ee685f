package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
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
	if !thpMadvise() {
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
	if !thpMadvise() {
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
