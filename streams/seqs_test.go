package streams

import (
	"errors"
	"slices"
	"testing"
)

func TestSeqsText(t *testing.T) {
	for _, tt := range []struct {
		in   []uint64
		want string
	}{
		{nil, ""},
		{[]uint64{7}, "7"},
		{[]uint64{12, 5, 6, 7, 8, 9, 9}, "5-9,12"},
		{[]uint64{1, 3, 4, 18446744073709551615}, "1,3-4,18446744073709551615"},
	} {
		s := SeqsOf(tt.in).String()
		if s != tt.want {
			t.Errorf("SeqsOf(%v) = %q, want %q", tt.in, s, tt.want)
		}
		back, err := ParseSeqs(s)
		if err != nil {
			t.Fatalf("ParseSeqs(%q): %v", s, err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(tt.in)))
		if got := back.Values(); !slices.Equal(got, want) {
			t.Errorf("ParseSeqs(%q).Values() = %v, want %v", s, got, want)
		}
		if back.String() != s {
			t.Errorf("round trip %q -> %q", s, back.String())
		}
	}
}

func TestSeqsRejects(t *testing.T) {
	for _, bad := range []string{"x", "5-3", "5,4", "3-5,5", "1-", ",", "1,,2", "-3", "0-16777216", "0-16777215,16777217"} {
		if _, err := ParseSeqs(bad); !errors.Is(err, ErrSeqs) {
			t.Errorf("ParseSeqs(%q) = %v, want ErrSeqs", bad, err)
		}
	}
	if _, err := ParseSeqs("0-16777215"); err != nil {
		t.Errorf("2^24 sequences refused: %v", err)
	}
}

func TestSeqsQueries(t *testing.T) {
	r, err := ParseSeqs("3-5,9,12-20")
	if err != nil {
		t.Fatal(err)
	}
	for seq, want := range map[uint64]bool{2: false, 3: true, 5: true, 6: false, 9: true, 10: false, 12: true, 20: true, 21: false} {
		if r.Has(seq) != want {
			t.Errorf("Has(%d) = %v", seq, !want)
		}
	}
	for _, tt := range []struct {
		lo, hi uint64
		want   bool
	}{{0, 2, false}, {0, 3, true}, {5, 8, false}, {5, 9, true}, {4, 4, false}, {4, 5, true}, {9, 11, false}, {13, 13, false}, {13, 14, true}, {20, 99, false}, {19, 20, true}} {
		if got := r.Within(tt.lo, tt.hi); got != tt.want {
			t.Errorf("Within(%d, %d] = %v", tt.lo, tt.hi, got)
		}
	}
	if r.Top() != 20 || Seqs(nil).Top() != 0 {
		t.Errorf("Top = %d", r.Top())
	}
}

func FuzzParseSeqs(f *testing.F) {
	for _, s := range []string{"", "5-9,12", "1,3-4", "5-3", "3-5,5", "0-16777215"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseSeqs(s)
		if err != nil {
			return
		}
		again, err := ParseSeqs(r.String())
		if err != nil || !slices.Equal(again, r) {
			t.Fatalf("%q -> %q -> %v, %v", s, r.String(), again, err)
		}
	})
}
