//go:build !linux

package main

// hugeHeap is Linux's transparent huge pages for a query's heap
// (hugeheap_linux.go); elsewhere it does nothing.
func hugeHeap() {}

// runHugeHeap is quarry run's (hugeheap_linux.go); elsewhere it does
// nothing.
func runHugeHeap() {}
