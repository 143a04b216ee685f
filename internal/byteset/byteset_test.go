package byteset

import "testing"

func TestSet(t *testing.T) {
	var s Set
	for b := 0; b < 256; b++ {
		if s.Has(byte(b)) {
			t.Fatalf("empty set has %d", b)
		}
	}
	s.AddString("az\x00\xff?@")
	for b := 0; b < 256; b++ {
		want := b == 'a' || b == 'z' || b == 0 || b == 0xff || b == '?' || b == '@'
		if s.Has(byte(b)) != want {
			t.Errorf("Has(%d) = %v, want %v", b, !want, want)
		}
	}
	var o Set
	o.Add('a')
	o.Add(0xff)
	if !s.Covers(&o) {
		t.Errorf("%v does not cover %v", s, o)
	}
	o.Add('b')
	if s.Covers(&o) {
		t.Errorf("%v covers %v, which holds b", s, o)
	}
	s.Union(&o)
	if !s.Has('b') || !s.Covers(&o) {
		t.Errorf("union lacks b: %v", s)
	}
}
