package recfile

import (
	"fmt"
	"sync"
	"testing"
)

// TestKindsCache: a kinds value is parsed once for the process and every
// decoder gets the same slots; a value that does not parse is an error
// each time and is not kept; the cache starts over past its bound; many
// goroutines may ask at once (-race).
func TestKindsCache(t *testing.T) {
	c := kindsCache{m: map[string][]slot{}}
	a, err := c.parsed("sis")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.parsed("sis")
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 3 || &a[0] != &b[0] {
		t.Fatalf("parsed twice: %d slots at %p and %p, want 3 at one place", len(a), &a[0], &b[0])
	}
	want, err := parseKinds(nil, "sis")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a) != fmt.Sprint(want) {
		t.Fatalf("cached %v, parseKinds %v", a, want)
	}
	if s, err := c.parsed(""); err != nil || s == nil || len(s) != 0 {
		t.Fatalf("no wildcards: %v, %v; want an empty, non-nil slice", s, err)
	}
	for range 2 {
		if _, err := c.parsed("t"); err == nil {
			t.Fatal("a time without its layout parsed")
		}
	}
	if _, ok := c.m["t"]; ok {
		t.Fatal("an error was kept")
	}
	// Distinct values that parse: i's 17 low bits as s and i items.
	kindsOf := func(i int) string {
		b := make([]byte, 17)
		for j := range b {
			b[j] = "si"[i>>j&1]
		}
		return string(b)
	}
	for i := range maxSharedKinds + 1 {
		if _, err := c.parsed(kindsOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.m) > maxSharedKinds {
		t.Fatalf("%d values kept, bound %d", len(c.m), maxSharedKinds)
	}
	if _, ok := c.m[kindsOf(maxSharedKinds)]; !ok {
		t.Fatal("the value parsed last is not kept")
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := []string{"sis", "ii", "s", "sss"}[(g+i)%4]
				s, err := shared.parsed(k)
				if err != nil || len(s) != len(k) {
					t.Errorf("%q: %d slots, %v", k, len(s), err)
					return
				}
			}
		})
	}
	wg.Wait()
}
