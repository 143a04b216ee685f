package recfile

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// TestSchemaAnnotationsOnce: the footer schema carries each annotation
// once, as the converted type (UTF8, DATE, LIST, MAP; none for plain
// signed integers), but the timestamp, which keeps both; and Apache
// Arrow's Parquet reader, which DuckDB-, Spark- and delta-rs-like readers
// stand for here, still reads the types the Delta schema says.
func TestSchemaAnnotationsOnce(t *testing.T) {
	rows, tpl := pinRows(t, 5000, 5000)
	f, err := Encode(rows, tpl, WithDate(true))
	if err != nil {
		t.Fatal(err)
	}
	checkDecoded(t, f, tpl, rows)
	type tplRow struct {
		ID    int64    `parquet:"template_id,delta"`
		Text  string   `parquet:"template"`
		Ver   int32    `parquet:"version,delta"`
		Kinds []string `parquet:"kinds,optional,list"`
	}
	var trows []tplRow
	for i := range 100 {
		trows = append(trows, tplRow{int64(i), "user <*> in", 1, []string{"", "ipv4"}})
	}
	tf := writeTrimmed(t, trows, parquet.DataPageVersion(1), parquet.DataPageStatistics(false))
	got, err := parquet.Read[tplRow](bytes.NewReader(tf), int64(len(tf)))
	if err != nil || len(got) != len(trows) || got[7].Text != trows[7].Text || got[7].Kinds[1] != "ipv4" || got[7].ID != 7 {
		t.Fatalf("TrimFooter: rows read back %d, %v", len(got), err)
	}
	for _, c := range []struct {
		name string
		data []byte
		want map[string]arrow.Type // by column name; slot columns by kind letter
	}{
		{"records", f.Data, map[string]arrow.Type{"p": arrow.STRING, "n": arrow.INT64, "b": arrow.BINARY,
			"source": arrow.STRING, "kinds": arrow.STRING, "date": arrow.DATE32, "ts": arrow.TIMESTAMP,
			"template_id": arrow.INT64, "record_index": arrow.INT32, "wal_seq": arrow.INT64, "more": arrow.LIST, "attrs": arrow.MAP}},
		{"TrimFooter", tf, map[string]arrow.Type{"template_id": arrow.INT64, "template": arrow.STRING, "version": arrow.INT32, "kinds": arrow.LIST}},
	} {
		pf, err := parquet.OpenFile(bytes.NewReader(c.data), int64(len(c.data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range pf.Metadata().Schema[1:] {
			if e.LogicalType.Value == nil || !e.ConvertedType.Valid {
				continue
			}
			if _, ts := e.LogicalType.Value.(*format.TimestampType); !ts {
				t.Errorf("%s: %s has logical type %v and converted type %v", c.name, e.Name, e.LogicalType.Value, e.ConvertedType.V)
			}
		}
		ar, err := file.NewParquetReader(bytes.NewReader(c.data))
		if err != nil {
			t.Fatal(err)
		}
		fr, err := pqarrow.NewFileReader(ar, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatalf("%s: arrow read: %v", c.name, err)
		}
		seen := map[string]bool{}
		for _, fld := range tbl.Schema().Fields() {
			key := fld.Name
			if len(key) > 1 && strings.IndexByte("pnb", key[0]) >= 0 && key[1] >= '0' && key[1] <= '9' {
				key = key[:1]
			}
			want, ok := c.want[key]
			if !ok {
				continue
			}
			seen[key] = true
			if fld.Type.ID() != want {
				t.Errorf("%s: arrow reads %s as %v, want %v", c.name, fld.Name, fld.Type, want)
			}
		}
		for k := range c.want {
			if !seen[k] {
				t.Errorf("%s: no column %s", c.name, k)
			}
		}
		tbl.Release()
		ar.Close()
	}
}
