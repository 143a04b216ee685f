package subscribe

import (
	"testing"
	"time"
)

// FuzzParseFrom: ParseFrom (and ParseCursor within it) never panics, and
// what it accepts writes back (From.String) as a text that reads as the
// same start: the form a subscriber stores and hands back.
func FuzzParseFrom(f *testing.F) {
	for _, s := range []string{"", "beginning", "now", "0", "42", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.5+01:00",
		"2026-01-02T03:04:05", "2026-01-02", "15m", "1h30m", "cursor:v1.f2.r3", "cursor:v1.f2", "cursor:v-1.f0.r0",
		"cursor:v9223372036854775807.f2147483648.r0", "-5", "9223372036854775808", "cursor:v01.f+2.r3"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		from, err := ParseFrom(s, now)
		if err != nil {
			return
		}
		text := from.String()
		again, err := ParseFrom(text, now)
		if err != nil {
			t.Fatalf("ParseFrom(%q) = %v, whose text %q does not read: %v", s, from, text, err)
		}
		if again.kind != from.kind || again.version != from.version || !again.t.Equal(from.t) || again.cursor != from.cursor {
			t.Fatalf("ParseFrom(%q) = %q, which reads back as %q", s, text, again.String())
		}
		if from.kind == fromCursor {
			if c, err := ParseCursor(from.cursor.String()); err != nil || c != from.cursor {
				t.Fatalf("cursor %v: %q reads back as %v, %v", from.cursor, from.cursor.String(), c, err)
			}
		}
	})
}
