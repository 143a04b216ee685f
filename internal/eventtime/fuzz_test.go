package eventtime

import (
	"bytes"
	"testing"
	"time"
)

// FuzzRoundTrip checks on arbitrary input that Parse never panics, that a
// match lies inside the line, and that Render writes the matched bytes back.
func FuzzRoundTrip(f *testing.F) {
	for _, ds := range datasets {
		for _, l := range ds.lines {
			f.Add([]byte(l.line))
		}
	}
	for _, s := range []string{
		"2026-11-29T00:00:00.010Z x", "2026-11-29T01:02:03-00:00", "2026-11-29 01:02:03+0130",
		"Sun Dec  4 04:47:44 2005", "Nov 9 12:01:01 x", "[10/Oct/2000:13:55:36 -0000]",
		"1117838570.5 x", "999999999999 x", "<13>Feb 29 00:00:00 x", "2021-03-28 02:30:00,000", "Start-Date: 2025-06-24  14:36:25",
		"\xff\xfe 2026-11-29T00:00:00Z", "2005-06-03-15.42.50.675872 R02", "2005.06.03 R02", "2005-06-03-15.42.50 x",
		"I1207 23:10:53.845933    1488 server.go:123] x", "W0229 00:00:00 1 a.cc:1] y",
	} {
		f.Add([]byte(s))
	}
	zones := []Config{Defaults(), {Zone: "+05:30"}}
	if _, err := time.LoadLocation("America/New_York"); err == nil {
		zones = append(zones, Config{Zone: "America/New_York"})
	}
	parsers := make([]*Parser, len(zones))
	for i, c := range zones {
		parsers[i] = newParser(f, c)
	}
	items := newParser(f, Config{Mode: ModeNone})
	f.Fuzz(func(t *testing.T, line []byte) {
		if len(line) > 0 { // any residue renders without panicking
			l := LayoutID(line[0] % (numLayouts + 2))
			checkBytes(t, Render(nil, time.Unix(int64(len(line))*1e7, 0), l, line[1:]), l, line[1:])
		}
		// A timestamp of any layout at the start, a date alone too
		// (records' other times), renders back as well.
		if at, l, res, end, ok := items.ParseItem(line, 1117838570, LayoutNone); ok {
			if end > len(line) || !l.Valid() {
				t.Fatalf("%q: ParseItem %s to %d", line, l, end)
			}
			if got := Render(nil, at.UTC(), l, res); !bytes.Equal(got, line[:end]) {
				t.Fatalf("%q: ParseItem's %s %q renders %q", line, l, res, got)
			}
		}
		for _, p := range parsers {
			m, res, ok := p.Parse(line)
			if !ok {
				continue
			}
			if m.Start < 0 || m.Start >= Window || m.End > len(line) || m.Start >= m.End || !m.Layout.Valid() {
				t.Fatalf("%q: bad match %+v", line, m)
			}
			want := line[m.Start:m.End]
			if got := Render(nil, m.Time.UTC(), m.Layout, res); !bytes.Equal(got, want) {
				t.Fatalf("%q: Render(%s, %s, %q) = %q, want %q", line, m.Time, m.Layout, res, got, want)
			}
			// The timestamp alone parses to the same instant.
			q := newParser(t, Config{Mode: ModeAuto, Zone: "UTC"})
			q.prevSec, q.hasPrev = p.prevSec, true
			q.loc, q.utc = p.loc, p.utc
			alone, at := want, 0
			if m.Layout == LayoutKlog { // with its severity letter, which the text follows
				alone, at = line[m.Start-1:m.End], 1
			}
			m2, res2, ok := q.Parse(alone)
			if !ok || !m2.Time.Equal(m.Time) || m2.Layout != m.Layout || !bytes.Equal(res2, res) || m2.Start != at || m2.End != len(alone) {
				t.Fatalf("%q: alone %q gives %+v %q %v, want %+v %q", line, alone, m2, res2, ok, m, res)
			}
		}
	})
}
