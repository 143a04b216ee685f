package recfile

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/mining"
)

// dpkgRows are dpkg.log-like records: per package a "configure" line and
// three "status" lines, the package name and version the last parameters
// of both templates but not at the same position from the left.
func dpkgRows(pkgs int) ([]Row, Templates, []string) {
	tpl := Templates{{1, 1}: "<*> status <*> <*>:<*> <*>", {2, 1}: "<*> configure <*>:<*> <*> <none>", {3, 1}: "startup <*>"}
	var rows []Row
	var lines []string
	add := func(id uint64, params ...string) {
		i := len(rows)
		rows = append(rows, Row{WALSeq: uint64(1 + i/256), Index: uint32(i % 256), TS: ns("2025-06-24T14:37:40Z"),
			TemplateID: id, TemplateVersion: 1, Params: params, Source: "file:dpkg.log"})
		line, err := mining.Render(tpl[Key{id, 1}], params)
		if err != nil {
			panic(err)
		}
		lines = append(lines, line)
	}
	const ts = "2025-06-24 14:37:40"
	for i := range pkgs {
		pkg, ver := fmt.Sprintf("lib%c%cfoo%d", 'a'+i%26, 'a'+i/26%26, i), fmt.Sprintf("%d.%d-%d+deb12u%d", i%7, i%13, i%3, i%5)
		add(2, ts, pkg, "amd64", ver)
		for _, st := range []string{"unpacked", "half-configured", "installed"} {
			add(1, ts, st, pkg, "amd64", ver)
		}
		if i%50 == 0 {
			add(3, "archives") // one string parameter: never numbered from the right
		}
	}
	return rows, tpl, lines
}

// TestAlignRight: in a file whose templates share their trailing string
// parameters, the encoder numbers rows' p<k> from the right (records v4,
// kinds marked 'r'), which is smaller, and every line reads back exactly;
// a file where that does not pay stays v3.
func TestAlignRight(t *testing.T) {
	rows, tpl, lines := dpkgRows(400)
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	left := defaultOptions()
	left.rightShare = 0
	fl, err := encode(rows, tpl, &left)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Data) >= len(fl.Data) {
		t.Errorf("aligned right %d bytes, from the left %d: not smaller", len(f.Data), len(fl.Data))
	}
	t.Logf("aligned right %d bytes, from the left %d", len(f.Data), len(fl.Data))
	for _, c := range []struct {
		name    string
		data    []byte
		version string
	}{{"right", f.Data, "4"}, {"left", fl.Data, "3"}} {
		pf, err := parquet.OpenFile(bytes.NewReader(c.data), int64(len(c.data)))
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := pf.Lookup("quarry.records.version"); v != c.version {
			t.Errorf("%s: records version %q, want %s", c.name, v, c.version)
		}
		recs, err := Decode(c.data, tpl)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(recs))
		for i, r := range recs {
			got[i] = string(r.Line)
		}
		if !slices.Equal(got, lines) {
			t.Errorf("%s: lines do not read back", c.name)
		}
		back, err := DecodeRows(c.data, tpl)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range back {
			if !slices.Equal(r.Params, rows[i].Params) {
				t.Fatalf("%s: row %d params %q, want %q", c.name, i, r.Params, rows[i].Params)
			}
		}
	}
	// Read with parquet-go alone: the package name is in one column, p2,
	// for both templates (the status word in p3), and the kinds say so.
	kinds, p2, p3 := readColumn(t, f.Data, colKinds), readColumn(t, f.Data, "p2"), readColumn(t, f.Data, "p3")
	ids := readColumn(t, f.Data, colTemplateID)
	seen := map[int64]bool{}
	for i := range kinds {
		id := ids[i].Int64()
		want := map[int64]string{1: "rtCssss", 2: "rtCsss", 3: "s"}[id]
		if k := string(kinds[i].ByteArray()); k != want && !seen[id] {
			t.Errorf("template %d: kinds %q, want %q", id, k, want)
			seen[id] = true
		}
		if id != 3 && !bytes.HasPrefix(p2[i].ByteArray(), []byte("lib")) {
			t.Fatalf("row %d (template %d): p2 %q, want the package", i, id, p2[i].ByteArray())
		}
		if id == 1 && !slices.Contains([]string{"unpacked", "half-configured", "installed"}, string(p3[i].ByteArray())) {
			t.Fatalf("row %d: p3 %q, want the status", i, p3[i].ByteArray())
		}
	}
	// Apache Arrow reads the v4 file as any other: the same kinds.
	ar, err := file.NewParquetReader(bytes.NewReader(f.Data))
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	fr, err := pqarrow.NewFileReader(ar, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("arrow read: %v", err)
	}
	defer tbl.Release()
	if tbl.NumRows() != int64(len(rows)) {
		t.Errorf("arrow reads %d rows, want %d", tbl.NumRows(), len(rows))
	}
	ki := tbl.Schema().FieldIndices(colKinds)
	if len(ki) != 1 {
		t.Fatal("arrow: no kinds column")
	}
	if k := tbl.Column(ki[0]).Data().Chunk(0).(*array.String).Value(0); k != string(kinds[0].ByteArray()) {
		t.Errorf("arrow reads kinds %q, parquet-go %q", k, kinds[0].ByteArray())
	}
	// The Loghub-like file of TestRoundTrip's cases gains no right alignment.
	var other []Row
	otpl := Templates{}
	for i, c := range roundTrips {
		otpl[Key{uint64(i + 1), 1}] = c.tpl
		other = append(other, Row{WALSeq: 1, Index: uint32(i), TS: c.ts, TemplateID: uint64(i + 1), TemplateVersion: 1, Params: c.params})
	}
	fo, err := Encode(other, otpl)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(fo.Data), int64(len(fo.Data)))
	if err != nil {
		t.Fatal(err)
	}
	// (v6: some of them have other times of their line, kinds w and y).
	if v, _ := pf.Lookup("quarry.records.version"); v != "6" {
		t.Errorf("round-trip cases: records version %q, want 6", v)
	}
}

func TestParseKindsRight(t *testing.T) {
	for _, c := range []struct {
		kinds string
		cols  []int // the p column of each s or u item
		err   bool
	}{
		{kinds: "ss", cols: []int{0, 1}},
		{kinds: "rss", cols: []int{1, 0}},
		{kinds: "rtDsisuB0", cols: []int{2, 1, 0}},
		{kinds: "rs", err: true},
		{kinds: "r", err: true},
		{kinds: "srs", err: true},
		{kinds: "rr", err: true},
	} {
		slots, err := parseKinds(nil, c.kinds)
		if (err != nil) != c.err {
			t.Errorf("parseKinds(%q): error %v, want error %v", c.kinds, err, c.err)
			continue
		}
		var cols []int
		for _, s := range slots {
			if s.kind == kindString || s.kind == kindInner {
				cols = append(cols, s.col)
			}
		}
		if !c.err && !slices.Equal(cols, c.cols) {
			t.Errorf("parseKinds(%q): columns %v, want %v", c.kinds, cols, c.cols)
		}
	}
}
