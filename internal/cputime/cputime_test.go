//go:build unix

package cputime

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestUsedGrowsWithWork(t *testing.T) {
	a, ok := Used()
	if !ok {
		t.Fatal("Used not ok on a unix system")
	}
	// Spin until the process's CPU time moved by at least 20ms: a counter
	// that does not move never ends the loop, and the test times out.
	x := 0
	for {
		for i := 0; i < 1_000_000; i++ {
			x += i
		}
		b, _ := Used()
		if b-a >= 20*time.Millisecond {
			break
		}
	}
	_ = x
}

// Two goroutines spinning on more threads than there are CPUs must wait
// for one: Waited grows. On a machine with more idle CPUs than that the
// kernel need not make them wait, so the test asks for one more spinner
// than CPUs.
func TestWaitedGrowsWhenCPUsAreShort(t *testing.T) {
	a, ok := Waited()
	if !ok {
		t.Skip("no run delay on this platform")
	}
	n := runtime.NumCPU() + 1
	prev := runtime.GOMAXPROCS(n)
	defer runtime.GOMAXPROCS(prev)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			x := 0
			for !stop.Load() {
				x++
			}
			_ = x
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	// Poll until the counter moved by 10ms: one that never moves times the
	// test out.
	for {
		b, _ := Waited()
		if b-a >= 10*time.Millisecond {
			return
		}
		runtime.Gosched()
	}
}
