package recfile

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// emptyKindsCorpus is apt's lines (s items only) with lines of two more
// templates: one whose parameters are an integer, an IPv4 address and a
// decimal (kinds "iaf1"), and one without wildcards.
func emptyKindsCorpus() *corpus {
	c := aptCorpus(120)
	c.tpl[Key{5, 1}] = "fetched <*> bytes from <*> in <*> s"
	c.tpl[Key{6, 1}] = "done"
	n := len(c.rows)
	for i := range 200 {
		x := n + i
		row := Row{WALSeq: uint64(1 + x/256), Index: uint32(x % 256), TS: c.rows[0].TS, TemplateID: 6, TemplateVersion: 1, Source: "file:term.log"}
		line := "done"
		if i%2 == 0 {
			row.TemplateID = 5
			row.Params = []string{fmt.Sprint(1000 + i*37), fmt.Sprintf("10.0.%d.%d", i%7, i%250), fmt.Sprintf("%d.%d", i%9, i%10)}
			line = fmt.Sprintf("fetched %s bytes from %s in %s s", row.Params[0], row.Params[1], row.Params[2])
		}
		c.rows = append(c.rows, row)
		c.lines = append(c.lines, line)
	}
	return c
}

// TestEmptyKinds: records v8. At zstd's best level a row whose kinds are
// s items only, or whose parameters are all in more and render as their
// text, has the empty kinds value; each way a reader renders a row gives
// its line back, also a projection that keeps one template (whose slot
// columns the kept rows' kinds narrow) and a needle. The files are
// smaller than with every row's kinds written out, and a file of the
// default level (a busy encoder's) is unchanged.
func TestEmptyKinds(t *testing.T) {
	c := emptyKindsCorpus()
	best := defaultOptions()
	WithHighCompression(true)(&best)
	every := best
	every.slotMin = everyToMore // every parameter in more
	for _, tc := range []struct {
		name string
		o    options
		// the kinds of template 5's rows: "iaf1" in their n columns, or
		// empty when they are in more.
		kinds5 string
	}{
		{"best level", best, "iaf1"},
		{"every parameter in more", every, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One encode, without encode's trials (which may put every
			// parameter in more).
			f, _, err := encodeOnce(c.rows, c.tpl, &tc.o, splitNone, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := fileVersion(t, f.Data); v != "8" {
				t.Errorf("records version %q, want 8", v)
			}
			full := tc.o
			full.fullKinds = true
			ff, _, err := encodeOnce(c.rows, c.tpl, &full, splitNone, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Row by row against the kinds written out (the same rows in
			// the same order): empty where those are s items only, or
			// where every parameter is in more.
			kinds, fullKinds, ids := readColumn(t, f.Data, colKinds), readColumn(t, ff.Data, colKinds), readColumn(t, f.Data, colTemplateID)
			empty := 0
			for i := range kinds {
				k := string(fullKinds[i].ByteArray())
				want := k
				if strings.Trim(k, "s") == "" || tc.kinds5 == "" {
					want = ""
				}
				if ids[i].Int64() == 5 && k != "iaf1" {
					t.Fatalf("template 5: kinds written out %q, want iaf1", k)
				}
				if got := string(kinds[i].ByteArray()); got != want {
					t.Fatalf("template %d: kinds %q, want %q (written out %q)", ids[i].Int64(), got, want, k)
				}
				if want == "" && k != "" {
					empty++
				}
			}
			if empty < len(kinds)/2 {
				t.Errorf("%d of %d rows with wildcards have the empty kinds value", empty, len(kinds))
			}
			if len(f.Data) >= len(ff.Data) {
				t.Errorf("%d bytes, with every kinds value written out %d", len(f.Data), len(ff.Data))
			}
			if v, _ := fileVersion(t, ff.Data); v == "8" {
				t.Error("every kinds value written out: records v8")
			}
			checkEveryReader(t, f.Data, c)
		})
	}
	f, err := Encode(c.rows, c.tpl)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := fileVersion(t, f.Data); v == "8" {
		t.Error("default level: records v8")
	}
	if !slices.Contains(strings.Split(string(readKinds(t, f.Data)), "|"), "s") {
		t.Error("default level: no row with kinds s")
	}
}

// checkEveryReader: data renders c's lines through Decode, DecodeRows
// (compaction's), Lines, a projection of each template and a needle.
func checkEveryReader(t *testing.T, data []byte, c *corpus) {
	t.Helper()
	recs, err := Decode(data, c.tpl)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if string(recs[i].Line) != c.lines[i] {
			t.Fatalf("Decode: line %d %q, want %q", i, recs[i].Line, c.lines[i])
		}
	}
	rows, err := DecodeRows(data, c.tpl)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if !slices.Equal(rows[i].Params, c.rows[i].Params) {
			t.Fatalf("DecodeRows: row %d params %q, want %q", i, rows[i].Params, c.rows[i].Params)
		}
	}
	rendersLines(t, data, c.tpl, c.lines)
	for id := range uint64(7) {
		var want []string
		for i, r := range c.rows {
			if r.TemplateID == id {
				want = append(want, c.lines[i])
			}
		}
		r, err := OpenAt(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		kept, err := r.DecodeProjected(c.tpl, Projection{Keep: func(k Key) bool { return k.ID == id }, Lines: true})
		if err != nil {
			t.Fatalf("template %d kept: %v", id, err)
		}
		if len(kept) != len(want) {
			t.Fatalf("template %d kept: %d lines, want %d", id, len(kept), len(want))
		}
		for i := range kept {
			if string(kept[i].Line) != want[i] {
				t.Fatalf("template %d kept: line %d %q, want %q", id, i, kept[i].Line, want[i])
			}
		}
	}
	// A needle in parameters only: a package's version, an address.
	for _, nd := range []string{"+deb12u", "10.0.3."} {
		var want []string
		for _, l := range c.lines {
			if strings.Contains(l, nd) {
				want = append(want, l)
			}
		}
		n := NewNeedle([]byte(nd))
		kept, err := DecodeProjected(data, c.tpl, Projection{Lines: true, Needle: func(Key) *Needle { return n }})
		if err != nil {
			t.Fatalf("needle %q: %v", nd, err)
		}
		var got []string
		for _, r := range kept {
			if strings.Contains(string(r.Line), nd) {
				got = append(got, string(r.Line))
			}
		}
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("needle %q: %d lines hold it, want %d", nd, len(got), len(want))
		}
	}
}
