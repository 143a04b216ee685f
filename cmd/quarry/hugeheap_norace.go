//go:build linux && !race

package main

// hugeHeapBytes is the heap hugeHeap prepares: about what a full render of
// the 500,000-line bench lake allocates with the collector off.
const hugeHeapBytes = 256 << 20
