//go:build linux && race

package main

// hugeHeapBytes under the race detector, where an allocation costs shadow
// memory by its size (256 MB doubled the query tests' time): the same
// mechanism over less.
const hugeHeapBytes = 8 << 20

// runHugeHeapBytes under the race detector: the same mechanism over less.
const runHugeHeapBytes = 8 << 20
