// Package earlyheap makes the Go heap of a quarry process eligible for
// transparent huge pages while its packages initialise, so that the heap
// the initialisation of every linked package allocates (1.5-2.5 MB, for any
// subcommand) is backed by a few 2 MB pages instead of 500-odd 4 KB pages,
// each a page fault (15-30 us each on the bench VM).
//
// It does its work in an init function, imported by cmd/quarry for it; it
// imports only package syscall and unsafe, so it initialises among the
// first packages (packages are initialised in import path order, each as
// soon as its imports are) and before most of the heap is allocated. It
// allocates one 3 KB object and no more, as cmd/quarry's TestInitsLight
// asks of every quarry package. Advise does the same later for the heap
// as it is then (quarry query before an aggregate).
package earlyheap
