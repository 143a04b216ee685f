package recfile

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestSparseSlotsByTrial: at zstd's best level a file whose slot columns
// are each used by a few of its rows is also written with those columns
// left out (their values in more), and the smaller file is kept; the busy
// path writes the columns.
func TestSparseSlotsByTrial(t *testing.T) {
	// 20 templates of 20 rows each, template k with k+1 parameters: slot
	// column j is used by the rows of templates j..19, so p14..p18 are
	// each used by fewer than 128 of the 400 rows, but by 25 or more (1/16).
	tpl := Templates{}
	var rows []Row
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"}
	for k := range 20 {
		text := "event"
		for range k + 1 {
			text += " <*>"
		}
		tpl[Key{uint64(k + 1), 1}] = text
	}
	for i := range 400 {
		k := i / 20 // in template order already: the order trial keeps it
		params := make([]string, k+1)
		for j := range params {
			params[j] = fmt.Sprintf("%s-%d", words[(i+j)%len(words)], i%3)
		}
		rows = append(rows, Row{WALSeq: 1, Index: uint32(i), TS: ns("2026-11-29T00:00:00.010Z") + int64(i)*1e9,
			TemplateID: uint64(k + 1), TemplateVersion: 1, Source: "s", Params: params})
	}
	hi, err := Encode(rows, tpl, WithHighCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	// The trial widens step by step while each is smaller.
	o := defaultOptions()
	WithHighCompression(true)(&o)
	want, _, err := encodeOnce(rows, tpl, &o, splitNone, nil)
	if err != nil {
		t.Fatal(err)
	}
	dense := len(want.Data)
	for k, step := range sparseSteps {
		o.slotMin, o.slotRows = step, slotRowsSparse
		f, _, err := encodeOnce(rows, tpl, &o, splitNone, nil)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 && len(f.Data) >= dense {
			t.Fatalf("the data no longer favours more: sparse %d bytes, dense %d", len(f.Data), dense)
		}
		if len(f.Data) >= len(want.Data) {
			break
		}
		want = f
	}
	// Then every slot column left out (TestEveryParameterInMore).
	o.slotMin = everyToMore
	if f, _, err := encodeOnce(rows, tpl, &o, splitNone, nil); err != nil {
		t.Fatal(err)
	} else if len(f.Data) < len(want.Data) {
		want = f
	}
	if len(hi.Data) != len(want.Data) {
		t.Errorf("best level wrote %d bytes; the trial's smallest file is %d (with every used slot column: %d)", len(hi.Data), len(want.Data), dense)
	}
	cols := columnSizes(t, hi.Data)
	if _, ok := cols["p15"]; ok {
		t.Errorf("best level kept p15 (used by 100 of 400 rows): %v", cols)
	}
	busy, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := columnSizes(t, busy.Data)["p15"]; !ok {
		t.Errorf("default level left out p15: the trial is for the best level only")
	}
	readsBack(t, tpl, rows, hi.Data, busy.Data)
}

// TestWALOrderWhereSmaller: at zstd's best level a file of one row group is
// also written in WAL order, and kept so where smaller: a package's name
// in three lines of three templates, one after the other, as dpkg.log
// writes them, repeats next to itself in WAL order and a template apart
// sorted by template. The busy path sorts by template.
func TestWALOrderWhereSmaller(t *testing.T) {
	tpl := Templates{{1, 1}: "unpacking <*> version <*>", {2, 1}: "setting up <*>", {3, 1}: "status installed <*> <*>"}
	var rows []Row
	ts := ns("2026-11-29T00:00:00.010Z")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 600 {
		// random names and versions without digits (nothing to split at
		// digit runs), each in the three lines of its package
		name, ver := []byte("lib"), []byte{}
		for range 6 {
			name = append(name, 'a'+byte(rng.IntN(26)))
			ver = append(ver, 'a'+byte(rng.IntN(26)))
		}
		ts += int64(1+rng.IntN(5)) * 1e9
		for k, params := range [][]string{{string(name), string(ver)}, {string(name)}, {string(name), string(ver)}} {
			rows = append(rows, Row{WALSeq: 1, Index: uint32(len(rows)), TS: ts, TemplateID: uint64(k + 1), TemplateVersion: 1,
				Source: "s", Params: params})
		}
	}
	hi, err := Encode(rows, tpl, WithHighCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	WithHighCompression(true)(&o)
	sorted, _, err := encodeOnce(rows, tpl, &o, splitNone, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(hi.Data) >= len(sorted.Data) {
		t.Errorf("best level wrote %d bytes, sorted by template %d: want the smaller WAL order", len(hi.Data), len(sorted.Data))
	}
	if ids := fileTemplateIDs(t, hi.Data); ids[1] != 2 {
		t.Errorf("best level: the file's second row is of template %d, want 2 (WAL order)", ids[1])
	}
	busy, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if ids := fileTemplateIDs(t, busy.Data); ids[1] != 1 {
		t.Errorf("default level: the file's second row is of template %d, want 1 (sorted by template)", ids[1])
	}
	readsBack(t, tpl, rows, hi.Data, busy.Data)
}

// fileTemplateIDs returns the template_id column of a records file in the
// order the file holds its rows.
func fileTemplateIDs(t *testing.T, data []byte) []int64 {
	t.Helper()
	type row struct {
		TemplateID int64 `parquet:"template_id"`
	}
	rows, err := parquet.Read[row](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.TemplateID
	}
	return ids
}

// TestEveryParameterInMore: at zstd's best level a file of one row group
// is also written with every slot column left out, and kept so where
// smaller: a package's name and version in the first and second slot of
// one template and the second and first of another repeat next to each
// other in one stream, in two columns they do not. A file of integers that
// count up keeps its column.
func TestEveryParameterInMore(t *testing.T) {
	tpl := Templates{{1, 1}: "unpacking <*> version <*>", {2, 1}: "version <*> of <*> is set up"}
	packages := func(n int) []Row {
		var rows []Row
		ts := ns("2026-11-29T00:00:00.010Z")
		rng := rand.New(rand.NewPCG(3, 4))
		for len(rows) < n {
			name, ver := []byte("lib"), []byte{}
			for range 6 {
				name = append(name, 'a'+byte(rng.IntN(26)))
				ver = append(ver, 'a'+byte(rng.IntN(26)))
			}
			ts += int64(1+rng.IntN(5)) * 1e9
			for k, params := range [][]string{{string(name), string(ver)}, {string(ver), string(name)}} {
				rows = append(rows, Row{WALSeq: 1, Index: uint32(len(rows)), TS: ts, TemplateID: uint64(k + 1), TemplateVersion: 1,
					Source: "s", Params: params})
			}
		}
		return rows
	}
	counter := func(n int) []Row {
		rows := make([]Row, n)
		for i := range rows {
			rows[i] = Row{WALSeq: 1, Index: uint32(i), TS: ns("2026-11-29T00:00:00.010Z") + int64(i)*1e9, TemplateID: 3, TemplateVersion: 1,
				Source: "s", Params: []string{fmt.Sprint(1000000 + 3*i)}}
		}
		return rows
	}
	tpl[Key{3, 1}] = "request <*> done"
	for _, c := range []struct {
		name  string
		rows  []Row
		slots bool // the best level's file keeps a slot column
	}{
		{"names in two slots", packages(1200), false},
		{"a counter", counter(2000), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			hi, err := Encode(c.rows, tpl, WithHighCompression(true))
			if err != nil {
				t.Fatal(err)
			}
			cols := columnSizes(t, hi.Data)
			var slots []string
			for name := range cols {
				if name != colMore && (name[0] == 'p' || name[0] == 'n' || name[0] == 'b') && len(name) <= 3 {
					slots = append(slots, name)
				}
			}
			if got := len(slots) > 0; got != c.slots {
				t.Errorf("best level: slot columns %v, want some: %v (columns %v)", slots, c.slots, cols)
			}
			if !c.slots {
				o := defaultOptions()
				WithHighCompression(true)(&o)
				dense, _, err := encodeOnce(c.rows, tpl, &o, splitNone, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(hi.Data) >= len(dense.Data) {
					t.Errorf("best level wrote %d bytes, with its slot columns %d", len(hi.Data), len(dense.Data))
				}
			}
			busy, err := Encode(c.rows, tpl)
			if err != nil {
				t.Fatal(err)
			}
			readsBack(t, tpl, c.rows, hi.Data, busy.Data)
		})
	}
}
