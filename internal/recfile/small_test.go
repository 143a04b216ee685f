package recfile

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// renderRow is the line a row stands for: its template's pieces and its
// parameters interleaved.
func renderRow(t *testing.T, tpl Templates, r Row) string {
	t.Helper()
	pieces := strings.Split(tpl[Key{r.TemplateID, r.TemplateVersion}], Wildcard)
	if len(pieces) != len(r.Params)+1 {
		t.Fatalf("template %d: %d pieces for %d params", r.TemplateID, len(pieces), len(r.Params))
	}
	var b strings.Builder
	for j, p := range r.Params {
		b.WriteString(pieces[j])
		b.WriteString(p)
	}
	b.WriteString(pieces[len(pieces)-1])
	return b.String()
}

// smallRows are n records of two templates, as a date partition of a
// sparse log holds a few.
func smallRows(n int) ([]Row, Templates) {
	tpl := Templates{{1, 1}: "<*> INFO took <*> ms on <*>", {2, 1}: "<*> WARN <*> retry"}
	rows := make([]Row, n)
	for i := range rows {
		ts := ns("2026-11-29T00:00:00.010Z") + int64(i)*1e9
		ts0 := fmt.Sprintf("2026-11-29T00:00:%02d.010Z", i%60)
		rows[i] = Row{WALSeq: 1, Index: uint32(i), TS: ts, TemplateID: 1, TemplateVersion: 1,
			Params: []string{ts0, fmt.Sprint(40 + i), fmt.Sprintf("host-%d", i%3)}, Source: "file:app.log"}
		if i%2 == 1 {
			rows[i].TemplateID, rows[i].Params = 2, []string{ts0, "disk full"}
		}
	}
	return rows, tpl
}

// TestSmallFileLayout: a file of a few rows (a date partition of a sparse
// log) is written for its fixed cost: version 1 data pages without CRCs, no dictionary
// for source, kinds and ts_source, columns of fewer than 32 bytes not
// compressed (a zstd frame costs more than it saves there), and no slot
// column used by fewer than 16 rows (its parameters are in more); a larger
// file keeps the dictionaries, compression and slot columns. Both read back
// exactly. The footer's schema has no type_length or INT annotation on
// integer columns.
func TestSmallFileLayout(t *testing.T) {
	for _, n := range []int{3, 200} {
		rows, tpl := smallRows(n)
		f, err := Encode(rows, tpl)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := Decode(f.Data, tpl)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			want := renderRow(t, tpl, rows[i])
			if string(r.Line) != want {
				t.Fatalf("%d rows: line %d = %q, want %q", n, i, r.Line, want)
			}
		}
		pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
		if err != nil {
			t.Fatal(err)
		}
		slots, more := 0, false
		for _, c := range pf.Metadata().RowGroups[0].Columns {
			m := c.MetaData
			name := m.PathInSchema[0]
			dict := m.DictionaryPageOffset != 0
			if name == colMore {
				more = true
			}
			if name[0] == 'p' || name[0] == 'n' {
				slots++
			}
			switch name {
			case colSource, colKinds, colTSSource:
				if dict != (n >= 64) {
					t.Errorf("%d rows: %s dictionary page %v", n, name, dict)
				}
			}
			if small := m.TotalUncompressedSize < 32; n == 3 && name == colTemplateID && m.Codec != format.Uncompressed {
				t.Errorf("%d rows: %s (%d bytes) compressed with %v", n, name, m.TotalUncompressedSize, m.Codec)
			} else if n == 200 && (name == colTS || name == colWALSeq) && m.Codec != format.Zstd {
				t.Errorf("%d rows: %s compressed with %v (small %v)", n, name, m.Codec, small)
			}
		}
		// The schema says no more than a reader needs: integer columns
		// without a type_length or an INT annotation of their own width.
		md := pf.Metadata()
		if md.CreatedBy != "quarry" {
			t.Errorf("created_by %q", md.CreatedBy)
		}
		for _, e := range md.Schema {
			if _, isInt := e.LogicalType.Value.(*format.IntType); e.TypeLength.Valid || isInt {
				t.Errorf("%d rows: schema element %s has type_length %v, logical type %v", n, e.Name, e.TypeLength, e.LogicalType.Value)
			}
		}
		// A slot column fewer than 16 rows use costs more than the list
		// item: a file of 3 rows has its parameters in more.
		if (n == 3) != (slots == 0 && more) {
			t.Errorf("%d rows: %d slot columns, more %v", n, slots, more)
		}
		// Every data page is a version 1 page (its header is smaller).
		for _, c := range pf.Metadata().RowGroups[0].Columns {
			var h format.PageHeader
			dec := thrift.NewDecoder((&thrift.CompactProtocol{}).NewReader(bytes.NewReader(f.Data[c.MetaData.DataPageOffset:])))
			if err := dec.Decode(&h); err != nil {
				t.Fatal(err)
			}
			if h.Type != format.DataPage || h.CRC != 0 {
				t.Errorf("%d rows: %s data page of type %v, crc %x", n, c.MetaData.PathInSchema[0], h.Type, h.CRC)
			}
		}
		if n == 3 {
			raw := 0
			for _, r := range rows {
				raw += len(renderRow(t, tpl, r)) + 1
			}
			t.Logf("%d rows: %d bytes for %d bytes of lines", n, len(f.Data), raw)
		}
	}
}

// TestDecodePreviousLayout: files written before the small-file layout
// (version 2 data pages with CRCs, dictionaries at any size, every column
// compressed) are the same records v3 and still decode exactly.
func TestDecodePreviousLayout(t *testing.T) {
	o := defaultOptions()
	o.pageVersion, o.dictRows, o.rawBytes, o.noCRC = 2, 0, 0, false
	for _, n := range []int{3, 200} {
		rows, tpl := smallRows(n)
		f, err := encode(rows, tpl, &o)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pf.Metadata().RowGroups[0].Columns {
			if name := c.MetaData.PathInSchema[0]; name == colSource && c.MetaData.DictionaryPageOffset == 0 {
				t.Fatalf("%d rows: the previous layout has a source dictionary", n)
			}
		}
		recs, err := Decode(f.Data, tpl)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != n {
			t.Fatalf("%d records, want %d", len(recs), n)
		}
		for i, r := range recs {
			if want := renderRow(t, tpl, rows[i]); string(r.Line) != want || r.TS != rows[i].TS {
				t.Fatalf("%d rows: line %d = %q ts %d, want %q ts %d", n, i, r.Line, r.TS, want, rows[i].TS)
			}
		}
	}
}

// TestChunksNotLargerThanUncompressed: no column of a records file or of a
// file TrimFooter rewrote is zstd-compressed when zstd made it larger in
// every row group (a dictionary page of one source, a constant column: a
// zstd frame's header is more than it saves); such a column is written
// UNCOMPRESSED, with one codec in all row groups, and the files read back
// the same rows.
func TestChunksNotLargerThanUncompressed(t *testing.T) {
	check := func(name string, data []byte) {
		t.Helper()
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		raw := 0
		groups := f.Metadata().RowGroups
		larger := make([]bool, len(groups[0].Columns))
		for j := range larger {
			larger[j] = true
		}
		for _, rg := range groups {
			for j, c := range rg.Columns {
				m := c.MetaData
				if first := groups[0].Columns[j].MetaData.Codec; m.Codec != first {
					// parquet-go reads every chunk of a column with one codec
					t.Errorf("%s: column %v %v in one row group, %v in the first", name, m.PathInSchema, m.Codec, first)
				}
				larger[j] = larger[j] && m.Codec == format.Zstd && m.TotalCompressedSize >= m.TotalUncompressedSize
				if m.Codec == format.Uncompressed {
					raw++
				}
			}
		}
		for j, l := range larger {
			if l {
				m := groups[0].Columns[j].MetaData
				t.Errorf("%s: column %v zstd, in every row group no smaller than uncompressed (%d bytes, %d in the first)", name, m.PathInSchema, m.TotalCompressedSize, m.TotalUncompressedSize)
			}
		}
		if raw == 0 {
			t.Errorf("%s: no uncompressed column chunk", name)
		}
	}
	for _, n := range []int{500, 5000} {
		rows, tpl := pinRows(t, n, uint64(n))
		f, err := Encode(rows, tpl, WithDate(true))
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("records, %d rows", n), f.Data)
		checkDecoded(t, f, tpl, rows)
		// Row groups of 256 rows or more, cut between templates.
		o := defaultOptions()
		o.groupRows = 256
		g, err := encode(rows, tpl, &o)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("records, %d rows in row groups", n), g.Data)
		checkDecoded(t, g, tpl, rows)
	}
	type tplRow struct {
		ID     int64  `parquet:"template_id"`
		Tenant string `parquet:"tenant"`
		Text   string `parquet:"template"`
		Ver    int32  `parquet:"version,delta"`
	}
	var rows []tplRow
	for i := range 300 { // the text compresses, a constant version does not
		rows = append(rows, tplRow{int64(i), "acme", fmt.Sprintf("<*> took <*> ms on host %d", i), 1})
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[tplRow](&buf, parquet.Compression(Zstd), parquet.DataPageVersion(1), parquet.DataPageStatistics(false))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := TrimFooter(buf.Bytes(), "template_id")
	if err != nil {
		t.Fatal(err)
	}
	check("TrimFooter", data)
	got, err := parquet.Read[tplRow](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(rows) {
		t.Error("TrimFooter: rows read back differ")
	}
}

// TestPageHeadersWithoutEmptyStatistics: parquet-go writes every data
// page's statistics, an empty struct with a null count of 0 when it
// computed none; Encode and TrimFooter leave the field out (4 bytes a
// page), and keep statistics that hold something.
func TestPageHeadersWithoutEmptyStatistics(t *testing.T) {
	// probe decodes what matters of a page header: whether the data page
	// header has its statistics field at all.
	type probeData struct {
		NumValues  int32                          `thrift:"1,required"`
		Statistics thrift.Null[format.Statistics] `thrift:"5,optional"`
	}
	type probe struct {
		CompressedPageSize int32                  `thrift:"3,required"`
		DataPageHeader     thrift.Null[probeData] `thrift:"5,optional"`
	}
	check := func(name string, data []byte, wantStats bool) {
		t.Helper()
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		pages, withStats := 0, 0
		for _, rg := range f.Metadata().RowGroups {
			for _, c := range rg.Columns {
				m := c.MetaData
				pos := m.DataPageOffset
				if m.DictionaryPageOffset > 0 {
					pos = min(pos, m.DictionaryPageOffset)
				}
				for end := pos + m.TotalCompressedSize; pos < end; {
					r := bytes.NewReader(data[pos:end])
					var h probe
					if err := thrift.NewDecoder((&thrift.CompactProtocol{}).NewReader(r)).Decode(&h); err != nil {
						t.Fatal(err)
					}
					if d, ok := h.DataPageHeader.Get(); ok {
						pages++
						if d.Statistics.Valid {
							withStats++
						}
					}
					pos = end - int64(r.Len()) + int64(h.CompressedPageSize)
				}
			}
		}
		switch {
		case pages == 0:
			t.Errorf("%s: no data page", name)
		case !wantStats && withStats > 0:
			t.Errorf("%s: %d of %d data pages have statistics", name, withStats, pages)
		case wantStats && withStats != pages:
			t.Errorf("%s: %d of %d data pages have their statistics", name, withStats, pages)
		}
	}
	for _, n := range []int{3, 500} {
		rows, tpl := pinRows(t, n, uint64(n))
		f, err := Encode(rows, tpl, WithDate(true))
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("records, %d rows", n), f.Data, false)
		checkDecoded(t, f, tpl, rows)
	}
	type row struct {
		ID   int64  `parquet:"id,delta"`
		Text string `parquet:"text"`
	}
	var rows []row
	for i := range 300 {
		rows = append(rows, row{int64(i), fmt.Sprint("template ", i%17, " <*>")})
	}
	for _, stats := range []bool{false, true} {
		data := writeTrimmed(t, rows, parquet.DataPageVersion(1), parquet.DataPageStatistics(stats))
		check(fmt.Sprintf("TrimFooter, page statistics %v", stats), data, stats)
		got, err := parquet.Read[row](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, rows) {
			t.Errorf("TrimFooter, page statistics %v: rows read back differ", stats)
		}
	}
}
