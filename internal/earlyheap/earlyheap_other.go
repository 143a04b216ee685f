//go:build !linux

package earlyheap

// Advise is Linux's transparent huge pages for the heap: nothing here.
func Advise() {}
