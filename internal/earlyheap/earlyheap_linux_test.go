package earlyheap

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// smapsOf reads /proc/self/smaps for the mapping that holds addr: its
// bounds, whether its VmFlags hold hg (MADV_HUGEPAGE) and its
// AnonHugePages in bytes.
func smapsOf(t *testing.T, addr uintptr) (lo, hi uintptr, hg bool, anonHuge uint64) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if l, h, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			a, err1 := strconv.ParseUint(l, 16, 64)
			b, err2 := strconv.ParseUint(h, 16, 64)
			if err1 == nil && err2 == nil {
				if in {
					break
				}
				in = uint64(addr) >= a && uint64(addr) < b
				lo, hi = uintptr(a), uintptr(b)
				continue
			}
		}
		if !in {
			continue
		}
		switch fields[0] {
		case "AnonHugePages:":
			kb, _ := strconv.ParseUint(fields[1], 10, 64)
			anonHuge = kb << 10
		case "VmFlags:":
			for _, fl := range fields[1:] {
				hg = hg || fl == "hg"
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lo, hi, hg, anonHuge
}

// TestAdvise: advise over a mapping whose 2 MB block holding p has a page
// in use (as the heap's first chunk at start) advises the whole mapping
// MADV_HUGEPAGE and makes that block one huge page.
func TestAdvise(t *testing.T) {
	if !thpMadvise() {
		t.Skip("transparent huge pages are not set to madvise here")
	}
	m, err := syscall.Mmap(-1, 0, 3*huge, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	b := (base + huge - 1) &^ (huge - 1)
	p := b + 4096
	m[p-base] = 1
	lo, hi, ok := mappingOf(p)
	if wlo, whi, _, _ := smapsOf(t, p); !ok || lo != wlo || hi != whi {
		t.Fatalf("mappingOf(%#x) = %#x-%#x %v; /proc/self/smaps says %#x-%#x", p, lo, hi, ok, wlo, whi)
	}
	if _, _, hg, n := smapsOf(t, p); hg || n != 0 {
		t.Fatalf("before advise: hg %v, AnonHugePages %d; want false, 0", hg, n)
	}
	advise(p)
	_, _, hg, n := smapsOf(t, p)
	if !hg {
		t.Errorf("after advise: the mapping is not advised MADV_HUGEPAGE")
	}
	if n < huge {
		// The kernel may have had no huge page to give: ask it again, and
		// skip if it says so.
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, b, huge, madvCollapse); errno != 0 {
			t.Skipf("the kernel does not collapse here (%v)", errno)
		}
		t.Errorf("after advise: AnonHugePages %d; want the block of p collapsed (%d)", n, huge)
	}
	if m[p-base] != 1 || m[b-base] != 0 {
		t.Errorf("advise changed the mapping's bytes")
	}
}

// TestBounds parses the start of /proc/self/maps lines.
func TestBounds(t *testing.T) {
	for _, tc := range []struct {
		line   string
		lo, hi uintptr
		ok     bool
	}{
		{"00400000-015e0000 r-xp 00000000 08:01 1 /bin/quarry", 0x400000, 0x15e0000, true},
		{"7ffd1df78000-7ffd1df99000 rw-p 00000000 00:00 0 [stack]", 0x7ffd1df78000, 0x7ffd1df99000, true},
		{"c000000000-c004000000 rw-p", 0xc000000000, 0xc004000000, true},
		{"-1000 r", 0, 0, false},
		{"1000 r", 0, 0, false},
		{"1000-", 0, 0, false},
		{"", 0, 0, false},
	} {
		lo, hi, ok := bounds([]byte(tc.line))
		if lo != tc.lo || hi != tc.hi || ok != tc.ok {
			t.Errorf("bounds(%q) = %#x, %#x, %v; want %#x, %#x, %v", tc.line, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
}

// grown holds the heap TestAdviseTop grows, so that its top lies above the
// mapping the package's init advised.
var grown []byte

// TestAdviseTop: Advise advises the heap mapping that holds the top of
// the heap as it is then (above the first chunk, which the init advised).
func TestAdviseTop(t *testing.T) {
	if !thpMadvise() {
		t.Skip("transparent huge pages are not set to madvise here")
	}
	grown = make([]byte, 8<<20)
	p := adviseTop()
	if _, _, hg, _ := smapsOf(t, p); !hg {
		t.Errorf("the mapping of the heap's top (%#x) is not advised MADV_HUGEPAGE after Advise", p)
	}
}
