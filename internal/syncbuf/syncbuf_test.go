package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestConcurrentWritesAndTail(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%03d\n", i, j)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
	if got := b.Tail(7); !strings.HasPrefix(got, "...") || len(got) != 10 {
		t.Fatalf("tail %q", got)
	}
	var short Buffer
	short.Write([]byte("abc"))
	if got := short.Tail(10); got != "abc" {
		t.Fatalf("uncut tail %q", got)
	}
}
