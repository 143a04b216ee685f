package recfile

import (
	"testing"
)

// FuzzKinds checks the kinds-string decoder never panics and accepts only
// what the encoder could write.
func FuzzKinds(f *testing.F) {
	for _, s := range []string{"", "s", "tBcci", "f2axb", "tZ", "c", "f0", "t", "f", "q", "uB0", "uB~s", "uB", "uZ0", "uB\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kinds string) {
		slots, err := parseKinds(nil, kinds)
		if err != nil {
			return
		}
		var b []byte
		for _, s := range slots {
			b = append(b, s.kind)
			switch s.kind {
			case kindDecimal:
				b = append(b, '0'+s.digits)
			case kindTime:
				b = append(b, 'A'+byte(s.layout))
			case kindInner:
				b = append(b, 'A'+byte(s.layout), '0'+byte(s.offset))
			}
		}
		if string(b) != kinds {
			t.Fatalf("parseKinds(%q) re-encodes as %q", kinds, b)
		}
	})
}

// FuzzClassify checks every typed value renders back to its exact text.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"0", "-1", "007", "1.50", "-0.05", "10.0.0.1", "7f3a", "9223372036854775807", "1e5", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		kind, digits, v := classify(p)
		switch kind {
		case kindString, kindBytes:
			return
		}
		if got := string(appendValue(nil, slot{kind: kind, digits: digits}, v)); got != p {
			t.Fatalf("classify(%q) = %c/%d %d renders %q", p, kind, digits, v, got)
		}
	})
}
