package earlyheap

import (
	"syscall"
	"unsafe"
)

// probe is allocated at start: a size class nothing has used yet, so its
// span is taken from the top of the heap.
var probe *[3072]byte

func init() {
	probe = new([3072]byte)
	advise(uintptr(unsafe.Pointer(probe)))
}

// Advise does what the init did for the heap as it is now: it advises the
// mapping that holds the top of the heap and collapses the block the top
// falls in, so that the rest of that mapping (the runtime maps the heap in
// chunks of 4 MB and more as it grows) faults 2 MB at a time. For a
// process that will allocate a few MB more with the collector off and
// cannot pay a collection to grow the heap first (hugeHeap in cmd/quarry):
// about 0.5 ms, most of it the collapse. It keeps 64 KB.
func Advise() { adviseTop() }

// adviseTop is Advise; it returns the address of the top it advised.
func adviseTop() uintptr {
	// A large object is taken from the lowest free pages: with nothing
	// collected yet, the top of the heap. (Kept in a variable of the
	// package: one that does not escape would be on the stack.)
	top = make([]byte, 64<<10)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(top)))
	advise(p)
	return p
}

// top is the object Advise took last.
var top []byte

const (
	huge         = 2 << 20
	madvCollapse = 25 // MADV_COLLAPSE (Linux 6.1), missing from package syscall
)

// advise advises MADV_HUGEPAGE over the mapping of the heap that holds p
// and collapses the 2 MB block p lies in into one huge page (its lower
// pages are in use, so the advice alone would not change it). Only when
// THP is set to madvise: with always the heap has huge pages already,
// with never the advice does nothing. Errors are ignored: the advice is
// only a hint.
func advise(p uintptr) {
	if !thpMadvise() {
		return
	}
	lo, hi, ok := mappingOf(p)
	if !ok {
		return
	}
	syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, syscall.MADV_HUGEPAGE)
	if b := p &^ (huge - 1); b >= lo && b+huge <= hi {
		Collapse(b)
	}
}

// Collapse makes the 2 MB block at lo (aligned) one transparent huge page,
// copying the pages it holds and backing the rest: a synchronous
// khugepaged. The error is the kernel's (EINVAL before Linux 6.1, EAGAIN
// when no huge page is free); callers may ignore it, as the advice is only
// a hint.
func Collapse(lo uintptr) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, lo, huge, madvCollapse); errno != 0 {
		return errno
	}
	return nil
}

// THPMadvise tells whether transparent huge pages are given to the
// mappings advised MADV_HUGEPAGE only ("always [madvise] never"): only
// then does advice change anything.
func THPMadvise() bool { return thpMadvise() }

// thpMadvise tells whether transparent huge pages are given to the
// mappings advised MADV_HUGEPAGE only ("always [madvise] never").
func thpMadvise() bool {
	var buf [128]byte
	n := readFile("/sys/kernel/mm/transparent_hugepage/enabled\x00", buf[:])
	return contains(buf[:n], "[madvise]")
}

// mappingOf reads /proc/self/maps for the mapping that holds p: its
// bounds.
func mappingOf(p uintptr) (lo, hi uintptr, ok bool) {
	fd, err := open("/proc/self/maps\x00")
	if err != nil {
		return 0, 0, false
	}
	defer syscall.Close(fd)
	var buf [4096]byte
	n := 0 // bytes of buf holding an unread line start
	for {
		m, err := read(fd, buf[n:])
		if err != nil || m <= 0 {
			return 0, 0, false
		}
		n += m
		start := 0
		for i := 0; i < n; i++ {
			if buf[i] != '\n' {
				continue
			}
			if lo, hi, ok := bounds(buf[start:i]); ok && lo <= p && p < hi {
				return lo, hi, true
			}
			start = i + 1
		}
		n = copy(buf[:], buf[start:n])
		if n == len(buf) {
			return 0, 0, false // a line longer than buf
		}
	}
}

// bounds parses the "lo-hi" a maps line starts with.
func bounds(line []byte) (lo, hi uintptr, ok bool) {
	i := 0
	lo, i, ok = hex(line, i)
	if !ok || i >= len(line) || line[i] != '-' {
		return 0, 0, false
	}
	if hi, _, ok = hex(line, i+1); !ok {
		return 0, 0, false
	}
	return lo, hi, true
}

func hex(b []byte, i int) (v uintptr, next int, ok bool) {
	start := i
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | uintptr(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uintptr(c-'a'+10)
		default:
			return v, i, i > start
		}
	}
	return v, i, i > start
}

func open(path string) (int, error) {
	p := unsafe.StringData(path) // NUL-terminated by the caller
	fd, _, errno := syscall.Syscall(syscall.SYS_OPENAT, uintptr(0xffffff9c), uintptr(unsafe.Pointer(p)), syscall.O_RDONLY|syscall.O_CLOEXEC)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

func readFile(path string, buf []byte) int {
	fd, err := open(path)
	if err != nil {
		return 0
	}
	defer syscall.Close(fd)
	n, err := read(fd, buf)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func contains(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return true
		}
	}
	return false
}

// read is syscall.Read without its race-detector hooks, through which a
// -race build lets the buffer escape: the stack buffers above would be
// heap allocations of the init (TestInitsLight).
func read(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, errno := syscall.Syscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
