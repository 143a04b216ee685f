package recfile

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestLinesRelease: what DecodeProjected and Lines hand out (records, lines
// appended to the caller's buffer) holds no page memory: after each file's
// pages went back to parquet-go's pools (Lines.Release) and the next files
// were decoded into those buffers, every record and line is still its
// row's. Lines renders, in WAL order, the lines the rows render.
func TestLinesRelease(t *testing.T) {
	type decoded struct {
		rows []Row
		recs []Record
		raw  []byte
		tpl  Templates
	}
	var files []decoded
	for seed := range uint64(6) {
		// Below 64 rows source and kinds are PLAIN (page memory), from 64
		// a dictionary.
		rows, tpl := pinRows(t, []int{3000, 40}[seed%2], seed) // in WAL order
		f, err := Encode(rows, tpl)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := DecodeProjected(f.Data, tpl, Projection{Lines: true, Source: true, Attrs: true})
		if err != nil {
			t.Fatal(err)
		}
		l := openLines(t, f.Data, tpl, Projection{Lines: true})
		var raw []byte
		for x := range l.Len() {
			if raw, err = l.AppendLine(raw, x); err != nil {
				t.Fatal(err)
			}
			raw = append(raw, '\n')
		}
		l.Release()
		files = append(files, decoded{rows, recs, raw, tpl})
	}
	for i, f := range files {
		if len(f.recs) != len(f.rows) {
			t.Fatalf("file %d: %d records of %d rows", i, len(f.recs), len(f.rows))
		}
		var want []byte
		for j, row := range f.rows {
			line := renderRow(t, f.tpl, row)
			want = append(append(want, line...), '\n')
			rec := &f.recs[j]
			if string(rec.Line) != line || rec.Source != row.Source || fmt.Sprint(rec.Attrs) != fmt.Sprint(row.Attrs) || rec.WALSeq != row.WALSeq || rec.Index != row.Index {
				t.Fatalf("file %d record %d: %q %q %v, want %q %q %v", i, j, rec.Line, rec.Source, rec.Attrs, line, row.Source, row.Attrs)
			}
		}
		if !bytes.Equal(f.raw, want) {
			t.Fatalf("file %d: Lines rendered\n%.300q\nwant\n%.300q", i, f.raw, want)
		}
	}
}

// TestRepeatedColumnsSparse: a repeated column (attrs here, more alike)
// holds items for the rows that have some and nothing for the others, so a
// file whose rows mostly have none costs no slice per row; every row's
// attributes still come back as encoded.
func TestRepeatedColumnsSparse(t *testing.T) {
	rows, tpl := pinRows(t, 3000, 3) // a seventh of the rows have attrs
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	l := openLines(t, f.Data, tpl, Projection{Lines: true, FileOrder: true, Attrs: true})
	withAttrs, lists := 0, 0
	for _, row := range rows {
		if len(row.Attrs) > 0 {
			withAttrs++
		}
	}
	for _, g := range l.groups {
		lists += len(g.base[cAttrKey].lists)
	}
	if lists != withAttrs {
		t.Fatalf("%d attribute lists held for %d rows with attributes (of %d)", lists, withAttrs, len(rows))
	}
	var rec Record
	for x := range l.Len() {
		if err := l.Record(&rec, x); err != nil {
			t.Fatal(err)
		}
		seq, idx := l.Pos(x)
		want := rows[int(seq-1)*64+int(idx)] // pinRows: 64 rows a wal_seq
		if fmt.Sprint(rec.Attrs) != fmt.Sprint(want.Attrs) {
			t.Fatalf("row %d.%d: attrs %v, want %v", seq, idx, rec.Attrs, want.Attrs)
		}
	}
}

// TestChunkArenaReused: the column chunks of a file's row groups are
// fetched into one reused arena, and nothing decoded points into it: the
// Lines of several files decoded one after another (each fetch
// overwriting the arena the previous files used) all render their own
// rows afterwards.
func TestChunkArenaReused(t *testing.T) {
	type decoded struct {
		l    *Lines
		rows []Row
		tpl  Templates
	}
	var files []decoded
	for seed := range uint64(4) {
		rows, tpl := pinRows(t, 20000, seed) // several row groups
		f, err := Encode(rows, tpl)
		if err != nil {
			t.Fatal(err)
		}
		r, err := OpenAt(bytes.NewReader(f.Data), int64(len(f.Data)))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(r.f.RowGroups()); n < 2 {
			t.Fatalf("%d row groups, want several", n)
		}
		l, err := r.DecodeLines(tpl, Projection{Lines: true, Source: true, Attrs: true})
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, decoded{l, rows, tpl})
	}
	for i, f := range files {
		var got, want []byte
		for x := range f.l.Len() {
			var err error
			if got, err = f.l.AppendLine(got, x); err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
		}
		for _, row := range f.rows {
			want = append(append(want, renderRow(t, f.tpl, row)...), '\n')
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("file %d: rendered after later decodes\n%.300q\nwant\n%.300q", i, got, want)
		}
	}
	// The arena is reused: a row group's chunks fetched again land in the
	// memory of the first fetch.
	rows, tpl := pinRows(t, 20000, 9)
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenAt(bytes.NewReader(f.Data), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	arena := new([]byte)
	var at [2]*byte
	for i := range at {
		src := source{r: r.r, size: r.size, meta: &r.f.Metadata().RowGroups[0], arena: arena}
		pages, _, err := src.pagesOf(r.f.RowGroups()[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		ps := pages(0)
		if _, err := ps.ReadPage(); err != nil {
			t.Fatal(err)
		}
		ps.Close()
		if len(*arena) == 0 {
			t.Fatal("no chunk fetched into the arena")
		}
		at[i] = &(*arena)[0]
	}
	if at[0] != at[1] {
		t.Fatal("the second fetch did not reuse the first's arena")
	}
}

// TestDecodeLinesSkipsTSSource: Reader.DecodeLines does not read ts_source
// (no reader of Lines uses it), DecodeProjected still returns it.
func TestDecodeLinesSkipsTSSource(t *testing.T) {
	rows, tpl := pinRows(t, 3000, 4) // event and read times
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	l := openLines(t, f.Data, tpl, Projection{Lines: true})
	for _, g := range l.groups {
		if c := g.base[cTSSource]; c == nil || c.read {
			t.Fatal("DecodeLines read ts_source")
		}
	}
	recs, err := DecodeProjected(f.Data, tpl, Projection{Lines: true})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for i, rec := range recs {
		if rec.TSSource != rows[i].TSSource {
			t.Fatalf("record %d: ts_source %v, want %v", i, rec.TSSource, rows[i].TSSource)
		}
		kinds[fmt.Sprint(rec.TSSource)] = true
	}
	if len(kinds) < 2 {
		t.Fatalf("ts_source values %v, want event and read", kinds)
	}
}

// TestLinesKeys: each row's template version, by Key and by Keys and
// KeyIndex, is its row's, the rows decoded in WAL order (which the
// encoder's order by template is not) and in file order; Keys holds each
// version once.
func TestLinesKeys(t *testing.T) {
	rows, tpl := pinRows(t, 20000, 5) // in WAL order, several row groups
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenAt(bytes.NewReader(f.Data), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, fileOrder := range []bool{false, true} {
		l, err := r.DecodeLines(tpl, Projection{Lines: true, FileOrder: fileOrder})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[Key]bool{}
		for _, k := range l.Keys() {
			if seen[k] {
				t.Fatalf("file order %v: %v twice in Keys", fileOrder, k)
			}
			seen[k] = true
		}
		for x := range l.Len() {
			seq, idx := l.Pos(x)
			row := rows[int(seq-1)*64+int(idx)] // pinRows: 64 rows a wal_seq
			k := Key{row.TemplateID, row.TemplateVersion}
			if got := l.Keys()[l.KeyIndex(x)]; got != k || l.Key(x) != k {
				t.Fatalf("file order %v, row %d: Keys()[KeyIndex] %v, Key %v, want %v", fileOrder, x, got, l.Key(x), k)
			}
		}
		l.Release()
	}
}

// TestLineRenderersShareLines: LineRenderers in several goroutines render
// rows of the same Lines at once (SearchRaw's renderers), each line as
// the rows render it; under -race nothing they read is written (a
// dictionary kinds column's entries are parsed when the row group is read,
// not on first use), and a plain kinds column (under 64 rows) is parsed
// into each renderer's own cache.
func TestLineRenderersShareLines(t *testing.T) {
	for _, n := range []int{3000, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rows, tpl := pinRows(t, n, 5) // in WAL order
			f, err := Encode(rows, tpl)
			if err != nil {
				t.Fatal(err)
			}
			l := openLines(t, f.Data, tpl, Projection{Lines: true})
			var want []byte
			for _, row := range rows {
				want = append(append(want, renderRow(t, tpl, row)...), '\n')
			}
			const renderers = 4
			got := make([][]byte, renderers)
			errs := make([]error, renderers)
			var wg sync.WaitGroup
			for w := range renderers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var lr LineRenderer
					for x := range l.Len() {
						if got[w], errs[w] = lr.AppendLine(got[w], l, x); errs[w] != nil {
							return
						}
						got[w] = append(got[w], '\n')
					}
				}()
			}
			wg.Wait()
			for w := range renderers {
				if errs[w] != nil {
					t.Fatal(errs[w])
				}
				if !bytes.Equal(got[w], want) {
					t.Fatalf("renderer %d rendered\n%.300q\nwant\n%.300q", w, got[w], want)
				}
			}
		})
	}
}

// TestLinesDropKeys: decoding Lines gives each row group's wal_seq,
// record_index, template_id and template_version pages back to parquet-go's
// pools once the rows' refs carry what they hold (dropKeys), and the kinds
// column's once its dictionary indexes are a byte a row (kind8), so the
// next row groups decode into those buffers; every row's record (place in the
// WAL, template) and line is still its own, and no column left to read is
// a dropped one.
func TestLinesDropKeys(t *testing.T) {
	kind8 := 0 // row groups read with kind8
	for _, tc := range []struct {
		n int
		p Projection
	}{{3000, Projection{Lines: true}}, {3000, Projection{Lines: true, Source: true, Attrs: true}}, {400, Projection{Lines: true}}} {
		rows, tpl := pinRows(t, tc.n, 7) // in WAL order
		o := defaultOptions()
		o.groupRows = 64
		f, err := encode(rows, tpl, &o)
		if err != nil {
			t.Fatal(err)
		}
		p := tc.p
		r, err := OpenAt(bytes.NewReader(f.Data), int64(len(f.Data)))
		if err != nil {
			t.Fatal(err)
		}
		l, err := r.DecodeLines(tpl, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.groups) < 2 || l.Len() != len(rows) {
			t.Fatalf("%d row groups, %d rows of %d: want several groups, every row", len(l.groups), l.Len(), len(rows))
		}
		for gi, g := range l.groups {
			for _, k := range []int{cWALSeq, cIndex, cTemplateID, cVersion} {
				if cv := g.base[k]; cv.nints() != 0 || cv.pages != nil {
					t.Fatalf("row group %d: column kind %d kept %d values, %d pages", gi, k, cv.nints(), len(cv.pages))
				}
			}
			// A kinds dictionary of at most 256 entries is a byte a row
			// (kind8), its pages given back too.
			kc := g.base[cKinds]
			if small := len(kc.dict) <= 256; small != (g.kind8 != nil) || small && (kc.idx != nil || kc.pages != nil) {
				t.Fatalf("row group %d: a dictionary of %d kinds as %d bytes, %d indexes, %d pages", gi, len(kc.dict), len(g.kind8), len(kc.idx), len(kc.pages))
			}
			if g.kind8 != nil {
				kind8++
			}
		}
		var rec Record
		var line []byte
		for x, row := range rows {
			want := renderRow(t, tpl, row)
			if err := l.Record(&rec, x); err != nil {
				t.Fatal(err)
			}
			if line, err = l.AppendLine(line[:0], x); err != nil {
				t.Fatal(err)
			}
			k := Key{row.TemplateID, row.TemplateVersion}
			if rec.WALSeq != row.WALSeq || rec.Index != row.Index || (Key{rec.TemplateID, rec.TemplateVersion}) != k || l.Key(x) != k ||
				string(rec.Line) != want || string(line) != want {
				t.Fatalf("row %d: wal %d.%d template %d.%d (Key %v) %q / %q, want wal %d.%d %v %q",
					x, rec.WALSeq, rec.Index, rec.TemplateID, rec.TemplateVersion, l.Key(x), rec.Line, line, row.WALSeq, row.Index, k, want)
			}
		}
		l.Release()
	}
	if kind8 == 0 {
		t.Fatal("no row group read with kind8")
	}
}

// openLines opens a records file and decodes its lines as p says.
func openLines(t *testing.T, data []byte, tpl Templates, p Projection) *Lines {
	t.Helper()
	r, err := OpenAt(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.DecodeLines(tpl, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAppendLinesStoredOrder: a file stored template by template, whose
// WAL order interleaves its templates and spans row groups, renders run
// by run (AppendLines: each run's rows in the file's order, each line
// copied to its place) exactly the lines of its selected rows in the
// selection's order: every row, every third row, a prefix (a limit) and a
// WAL range, in runs of one row, of a few, across row groups and of the
// whole file, from Lines in WAL order and in file order (a selection put
// in WAL order after: WALOrdered), two renderers taking runs in turn.
func TestAppendLinesStoredOrder(t *testing.T) {
	rows, tpl := pinRows(t, 20000, 11) // in WAL order, templates at random
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	wal := openLines(t, f.Data, tpl, Projection{Lines: true})
	if len(wal.groups) < 2 || wal.rank == nil {
		t.Fatalf("%d row groups, stored in WAL order %v: want several, stored by template", len(wal.groups), wal.rank == nil)
	}
	want := make([]string, len(rows))
	for x, row := range rows {
		want[x] = renderRow(t, tpl, row) + "\n"
	}
	sels := map[string][]int32{}
	for x := range int32(len(rows)) {
		sels["all"] = append(sels["all"], x)
		if x%3 == 1 {
			sels["third"] = append(sels["third"], x)
		}
		if x < 1000 {
			sels["limit"] = append(sels["limit"], x)
		}
		if x >= 5000 && x < 12345 {
			sels["range"] = append(sels["range"], x)
		}
	}
	fileOrder := openLines(t, f.Data, tpl, Projection{Lines: true, FileOrder: true})
	fileRow := make([]int32, len(rows)) // each WAL row's row in fileOrder
	walRow := map[[2]uint64]int32{}
	for x, row := range rows {
		walRow[[2]uint64{row.WALSeq, uint64(row.Index)}] = int32(x)
	}
	for x := range fileOrder.Len() {
		seq, idx := fileOrder.Pos(x)
		fileRow[walRow[[2]uint64{seq, uint64(idx)}]] = int32(x)
	}
	for name, walSel := range sels {
		for _, size := range []int{1, 7, 4096, 20000} {
			for _, l := range []*Lines{wal, fileOrder} {
				sel := walSel
				if l == fileOrder {
					sel = make([]int32, len(walSel))
					for k, x := range walSel {
						sel[k] = fileRow[x]
					}
				}
				s := l.Select(sel, size)
				var rs [2]LineRenderer
				var got []byte
				var ends []int
				for run := range s.Runs() {
					at := len(got)
					if got, ends, err = rs[run%2].AppendLines(got, ends, s, run); err != nil {
						t.Fatal(err)
					}
					a, b := s.Run(run)
					if len(ends) != b-a || len(ends) > 0 && ends[len(ends)-1] != len(got) {
						t.Fatalf("%s, runs of %d: run %d: %d ends for rows [%d, %d) in %d bytes", name, size, run, len(ends), a, b, len(got))
					}
					for k := range ends {
						start := at
						if k > 0 {
							start = ends[k-1]
						}
						if line := string(got[start:ends[k]]); line != want[walSel[a+k]] {
							t.Fatalf("%s, runs of %d, file order %v: run %d line %d (WAL row %d): %q, want %q", name, size, l == fileOrder, run, k, walSel[a+k], line, want[walSel[a+k]])
						}
					}
				}
				var all strings.Builder
				for _, x := range walSel {
					all.WriteString(want[x])
				}
				if string(got) != all.String() {
					t.Fatalf("%s, runs of %d: %d bytes, want %d", name, size, len(got), all.Len())
				}
			}
		}
	}
}
