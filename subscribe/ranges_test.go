package subscribe

import "testing"

func TestRanges(t *testing.T) {
	r, err := parseRanges("3-5,9,12-20")
	if err != nil {
		t.Fatal(err)
	}
	for seq, want := range map[uint64]bool{2: false, 3: true, 5: true, 6: false, 9: true, 10: false, 12: true, 20: true, 21: false} {
		if r.has(seq) != want {
			t.Errorf("has(%d) = %v", seq, !want)
		}
	}
	for _, tt := range []struct {
		lo, hi uint64
		want   bool
	}{{0, 2, false}, {0, 3, true}, {5, 8, false}, {5, 9, true}, {4, 4, false}, {4, 5, true}, {9, 11, false}, {13, 13, false}, {13, 14, true}, {20, 99, false}, {19, 20, true}} {
		if got := r.within(tt.lo, tt.hi); got != tt.want {
			t.Errorf("within(%d, %d] = %v", tt.lo, tt.hi, got)
		}
	}
	if r.top() != 20 {
		t.Errorf("top = %d", r.top())
	}
	for _, bad := range []string{"x", "5-3", "5,4", "3-5,5", "1-"} {
		if _, err := parseRanges(bad); err == nil {
			t.Errorf("parseRanges(%q) accepted", bad)
		}
	}
}
