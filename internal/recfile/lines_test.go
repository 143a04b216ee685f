package recfile

import (
	"bytes"
	"fmt"
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
		r, err := OpenAt(bytes.NewReader(f.Data), int64(len(f.Data)))
		if err != nil {
			t.Fatal(err)
		}
		l, err := r.DecodeLines(tpl, Projection{Lines: true})
		if err != nil {
			t.Fatal(err)
		}
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
