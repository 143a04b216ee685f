//go:build unix

package cputime

import (
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
