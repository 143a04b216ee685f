package eventtime

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRendererEqualsRender: a Renderer writes what Render writes, byte for
// byte, for every layout and residue the parser gives on the test lines
// (and arbitrary residues), over streams of timestamps that stay in a
// second, move to the next, come back, alternate layouts and residues, and
// cross 1970 and powers of ten of the epoch layouts.
func TestRendererEqualsRender(t *testing.T) {
	type form struct {
		layout  LayoutID
		residue []byte
	}
	var forms []form
	p := newParser(t, Defaults())
	for _, ds := range datasets {
		for _, l := range ds.lines {
			if m, res, ok := p.Parse([]byte(l.line)); ok {
				forms = append(forms, form{m.Layout, res})
			}
		}
	}
	for _, s := range []string{"2026-11-29T00:00:00.010Z x", "2026-11-29T01:02:03.123456789+05:30", "2026-11-29 01:02:03+0130",
		"1117838570.5 x", "1117838570123 x", "1117838570123456 x", "1117838570123456789 x", "[10/Oct/2000:13:55:36 -0000]"} {
		if m, res, ok := p.Parse([]byte(s)); ok {
			forms = append(forms, form{m.Layout, res})
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for l := LayoutID(0); l < numLayouts+1; l++ {
		forms = append(forms, form{l, nil})
		junk := make([]byte, r.IntN(6))
		for i := range junk {
			junk[i] = byte(r.IntN(256))
		}
		forms = append(forms, form{l, junk})
	}
	layouts := map[LayoutID]bool{}
	for _, f := range forms {
		layouts[f.layout] = true
	}
	if len(layouts) < 12 {
		t.Fatalf("%d layouts among the forms, want most", len(layouts))
	}
	starts := []int64{time.Date(2026, 11, 29, 23, 59, 58, 0, time.UTC).UnixMicro(), 0, -2_000_000, 9_999_998_000_000, 999_998_000_000}
	var rd Renderer
	for _, start := range starts {
		us := start
		for range 20000 {
			switch r.IntN(10) {
			case 0:
				us += int64(r.IntN(5_000_000)) // to another second, or several
			case 1:
				us -= int64(r.IntN(3_000_000)) // back
			default:
				us += int64(r.IntN(1000)) // within the second, mostly
			}
			tm := time.UnixMicro(us)
			// Several forms in a row, as the timestamps of one line.
			for range 1 + r.IntN(2) {
				f := forms[r.IntN(len(forms))]
				if i := int(us/1_000_000) % len(forms); r.IntN(4) != 0 {
					f = forms[(i+len(forms))%len(forms)] // mostly one form per second
				}
				want := Render([]byte("x"), tm, f.layout, f.residue)
				if got := rd.Render([]byte("x"), tm, f.layout, f.residue); !bytes.Equal(got, want) {
					t.Fatalf("%d µs, layout %v, residue %q: Renderer %q, Render %q", us, f.layout, f.residue, got, want)
				}
			}
		}
	}
}

// BenchmarkRenderStream renders 1,000 ISO 8601 timestamps with
// milliseconds, 10 ms apart (100 a second, as a busy log's lines), with
// Render and with a Renderer.
func BenchmarkRenderStream(b *testing.B) {
	p := newParser(b, Defaults())
	m, res, ok := p.Parse([]byte("2026-11-29T00:00:00.010Z x"))
	if !ok {
		b.Fatal("no timestamp")
	}
	start := m.Time.UnixMicro()
	dst := make([]byte, 0, 64)
	b.Run("Render", func(b *testing.B) {
		for range b.N {
			for i := range int64(1000) {
				dst = Render(dst[:0], time.UnixMicro(start+i*10_000), m.Layout, res)
			}
		}
	})
	b.Run("Renderer", func(b *testing.B) {
		var rd Renderer
		for range b.N {
			for i := range int64(1000) {
				dst = rd.Render(dst[:0], time.UnixMicro(start+i*10_000), m.Layout, res)
			}
		}
	})
}
