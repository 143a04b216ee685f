package web

import "testing"

// FuzzParseCursor: a search cursor from a client never panics the API,
// and one it accepts writes back (Cursor.String) as a text that reads as
// the same position.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0.0", "1.2", "18446744073709551615.4294967295", "18446744073709551616.0", "1.4294967296",
		"1", ".", "1.", ".1", "-1.2", "+1.2", "01.02", "1.2.3", " 1.2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			return
		}
		again, err := ParseCursor(c.String())
		if err != nil || again != c {
			t.Fatalf("ParseCursor(%q) = %v, whose text %q reads back as %v, %v", s, c, c.String(), again, err)
		}
	})
}
