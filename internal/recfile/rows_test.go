package recfile

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/quarrylake/quarry/streams"
)

// TestDecodeRows: every round-trip case read back as Rows gives the exact
// parameters of its kinds (typed and string ones exactly; a timestamp's
// covered ones as they were in these cases), and Encode of them writes a
// file with the same records and kinds.
func TestDecodeRows(t *testing.T) {
	tpl := Templates{}
	var rows []Row
	for i, c := range roundTrips {
		id := uint64(100 - i)
		tpl[Key{id, 1}] = c.tpl
		r := Row{WALSeq: uint64(1 + i/5), Index: uint32(i % 5), TS: floorDiv(c.ts, 1000) * 1000, TemplateID: id, TemplateVersion: 1,
			Params: c.params, Source: "file:/var/log/" + fmt.Sprint(i%2)}
		if i%3 == 0 {
			r.Attrs = []streams.Attr{{Key: "op", Value: "insert"}, {Key: "k", Value: fmt.Sprint(i)}}
		}
		rows = append(rows, r)
	}
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRows(f.Data, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("%d rows, want %d", len(got), len(rows))
	}
	for i, g := range got {
		r := rows[i]
		if len(r.Params) == 0 {
			r.Params = []string{}
		}
		if g.WALSeq != r.WALSeq || g.Index != r.Index || g.TS != r.TS || g.TemplateID != r.TemplateID ||
			g.Source != r.Source || !slices.Equal(g.Attrs, r.Attrs) || !slices.Equal(g.Params, r.Params) {
			t.Errorf("%s: row\n got %+v\nwant %+v", roundTrips[i].name, g, r)
		}
	}
	again, err := Encode(got, tpl)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Decode(f.Data, tpl)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(again.Data, tpl)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if !bytes.Equal(a[i].Line, b[i].Line) || a[i].TS != b[i].TS || !slices.Equal(a[i].Attrs, b[i].Attrs) {
			t.Errorf("record %d changed by the rewrite:\n got %+v\nwant %+v", i, b[i], a[i])
		}
	}
	if !bytes.Equal(readKinds(t, f.Data), readKinds(t, again.Data)) {
		t.Errorf("kinds changed by the rewrite")
	}
}

func readKinds(t *testing.T, data []byte) []byte {
	var out []byte
	for _, v := range readColumn(t, data, colKinds) {
		out = append(append(out, v.ByteArray()...), '|')
	}
	return out
}
