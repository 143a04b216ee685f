package eventtime

import (
	"testing"
	"time"
)

// TestStamper: a line's time is its own timestamp, else the last line's
// that had one, else its read time; a year-less timestamp takes the year
// near the read time; a timestamp past what nanoseconds hold is none; mode
// none stamps every line with its read time.
func TestStamper(t *testing.T) {
	read := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	at := func(s string) int64 { v, _ := time.Parse(time.RFC3339Nano, s); return v.UnixNano() }
	type step struct {
		line string
		ts   int64
		src  Source
	}
	for _, c := range []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"auto", Defaults(), []step{
			{"no time here", read, FromRead},
			{"2026-01-01T10:00:00.5Z first", at("2026-01-01T10:00:00.5Z"), FromLine},
			{"\tat Foo.bar(Foo.java:1)", at("2026-01-01T10:00:00.5Z"), FromPrevious},
			{"Jan  1 23:59:59 host x", at("2026-01-01T23:59:59Z"), FromLine},
			{"3000-01-01T00:00:00Z past 2262", at("2026-01-01T23:59:59Z"), FromPrevious},
		}},
		{"none", Config{Mode: ModeNone}, []step{
			{"2026-01-01T10:00:00Z first", read, FromRead},
			{"more", read, FromRead},
		}},
	} {
		s, err := NewStamper(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range c.steps {
			if ts, src := s.Stamp(st.line, read); ts != st.ts || src != st.src {
				t.Errorf("%s line %d %q: %v (%d), want %v (%d)", c.name, i, st.line, time.Unix(0, ts).UTC(), src, time.Unix(0, st.ts).UTC(), st.src)
			}
		}
	}
}
