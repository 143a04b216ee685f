//go:build linux && !race

package main

// hugeHeapBytes is the heap hugeHeap prepares: about what a full render of
// the 500,000-line bench lake allocates with the collector off.
const hugeHeapBytes = 256 << 20

// runHugeHeapBytes is the heap quarry run prepares (hugeHeapOf): above
// the 600-880 MB peak of a 600,000-line run. Only reserved: a page is
// backed when first touched.
const runHugeHeapBytes = 1 << 30
