package recfile

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestReadTypedPages: the typed column reader joins a column's pages
// (byte arrays, dictionary strings, int64, int32 and optional values with
// their rows) into what the values are, whatever the number of pages.
func TestReadTypedPages(t *testing.T) {
	type row struct {
		S string  `parquet:"s,dict"`
		P *string `parquet:"p,optional"`
		B []byte  `parquet:"b"`
		N int64   `parquet:"n"`
		I int32   `parquet:"i,delta"`
		D int32   `parquet:"d,dict"`
	}
	var rows []row
	for i := range 5000 {
		r := row{S: fmt.Sprint("src", i%7), B: []byte(fmt.Sprint("bytes-", i, "\xff")), N: int64(i) * 1e9, I: int32(-i), D: int32(i % 3)}
		if i%3 != 1 {
			p := fmt.Sprint("p", i)
			r.P = &p
		}
		rows = append(rows, r)
	}
	for _, pageBuf := range []int{1 << 20, 512} {
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[row](&buf, parquet.PageBufferSize(pageBuf))
		for i := 0; i < len(rows); i += 100 {
			if _, err := w.Write(rows[i : i+100]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		rg := f.RowGroups()[0]
		chunks := rg.ColumnChunks()
		pages := 0
		kinds := []column{{kind: cSource}, {kind: cP, maxDef: 1}, {kind: cB}, {kind: cWALSeq}, {kind: cIndex}, {kind: cTSSource}}
		vals := make([]colVals, len(kinds))
		for ci, c := range kinds {
			if err := readTyped(chunks[ci].Pages(), c, &vals[ci], len(rows)); err != nil {
				t.Fatalf("page buffer %d, column %d: %v", pageBuf, ci, err)
			}
			ps := chunks[ci].Pages()
			for {
				p, err := ps.ReadPage()
				if err != nil {
					break
				}
				parquet.Release(p)
				pages++
			}
			ps.Close()
		}
		if pageBuf == 512 && pages < 4*len(kinds) {
			t.Fatalf("page buffer 512: %d pages for %d columns, want several each", pages, len(kinds))
		}
		for i, r := range rows {
			if got := string(vals[0].str(i)); got != r.S {
				t.Fatalf("page buffer %d: s[%d] = %q, want %q", pageBuf, i, got, r.S)
			}
			if j := vals[1].valueAt(i); (j >= 0) != (r.P != nil) || j >= 0 && string(vals[1].str(j)) != *r.P {
				t.Fatalf("page buffer %d: p[%d] wrong (value index %d)", pageBuf, i, j)
			}
			if !bytes.Equal(vals[2].str(i), r.B) || vals[3].int(i) != r.N || vals[4].int(i) != int64(r.I) || vals[5].int(i) != int64(r.D) {
				t.Fatalf("page buffer %d: row %d: %q %d %d %d", pageBuf, i, vals[2].str(i), vals[3].int(i), vals[4].int(i), vals[5].int(i))
			}
		}
		// An int32 column keeps its values as int32: in one page, the
		// page's own (no array widened to int64, no copy).
		if vals[4].i32 == nil || vals[4].ints != nil || pageBuf == 1<<20 && vals[4].owned {
			t.Fatalf("page buffer %d: int32 column read as %d int64 values, %d int32, copied %v", pageBuf, len(vals[4].ints), len(vals[4].i32), vals[4].owned)
		}
		if slices.Contains([]int{vals[1].count()}, 0) {
			t.Fatal("no optional values read")
		}
	}
}
