package eventtime

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/byteset"
)

// checkBytes fails t when Render's text holds a byte Bytes lacks or a run
// of letters longer than MaxLetters, or is shorter than MinLen.
func checkBytes(t *testing.T, got []byte, l LayoutID, res []byte) {
	t.Helper()
	set := Bytes(l, res)
	if len(got) < MinLen(l) {
		t.Fatalf("%s %q renders %q: %d bytes, MinLen %d", l, res, got, len(got), MinLen(l))
	}
	run := 0
	for _, c := range got {
		var one byteset.Set
		one.Add(c)
		if !set.Covers(&one) {
			t.Fatalf("%s %q renders %q: byte %q not in Bytes", l, res, got, c)
		}
		if c|0x20 >= 'a' && c|0x20 <= 'z' {
			if run++; run > MaxLetters {
				t.Fatalf("%s %q renders %q: a run of %d letters", l, res, got, run)
			}
		} else {
			run = 0
		}
	}
}

// TestBytesHoldRender: every byte Render writes, for instants of years 0
// to 9999 in every layout, with the residues the parser gives for the
// datasets' lines and with every variant a residue can say (separators,
// padding, zones, offsets, fraction digits, gaps, nanoseconds), is in
// Bytes, and no run of letters is longer than MaxLetters: a search rules
// timestamps out by these (recfile.Needle).
func TestBytesHoldRender(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	// Years 0 to 9999 on the wall clock, whatever the residue's offset.
	lo, hi := time.Date(0, 1, 2, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 30, 23, 59, 59, 999999999, time.UTC)
	instants := []time.Time{lo, hi}
	for range 200 {
		instants = append(instants, time.Unix(lo.Unix()+r.Int64N(hi.Unix()-lo.Unix()), r.Int64N(1e9)).UTC())
	}
	var residues [][]byte
	p, err := New(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	for _, ds := range datasets {
		for _, l := range ds.lines {
			if _, res, ok := p.Parse([]byte(l.line)); ok {
				residues = append(residues, res)
			}
		}
	}
	for _, v := range []variant{
		{fsep: ',', digits: 3}, {fsep: ':', digits: 9}, {dsep: ' ', gap: 2}, {dsep: 't'}, {pad: '0'}, {pad: '-'}, {pad: ' '},
		{zone: ':', off: -19800}, {zone: '4', off: 3600, negZero: true}, {zone: '2', off: -7200}, {zone: 'z'}, {nanos: 999, digits: 9},
		{pad: '-', zone: '-', digits: 0}, {pad: '-', digits: 0, gap: 0},
	} {
		for l := LayoutID(1); l < numLayouts; l++ {
			residues = append(residues, appendResidue(nil, l, &v))
		}
	}
	residues = append(residues, nil)
	for l := LayoutID(0); l < numLayouts+2; l++ {
		for _, res := range residues {
			for _, at := range instants {
				checkBytes(t, Render(nil, at, l, res), l, res)
			}
		}
	}
}
