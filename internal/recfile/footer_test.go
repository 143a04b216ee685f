package recfile

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/parquet-go/parquet-go"
)

// TestNoNullCountClaimed: a column chunk whose statistics the trimmed
// footer drops has none at all, as Apache Arrow's Parquet reader (which
// DuckDB-, Spark- and delta-rs-like readers stand for here) sees it.
// parquet-go wrote an empty statistics struct with a null count of 0 in
// every chunk, which told such a reader that optional columns with nulls
// (p<k>, more, ts_residue here) had none: a reader that prunes row groups
// by null count would have skipped them for "p0 IS NULL". The kept
// columns' statistics are still read (statsColumns, in a file of several
// row groups; a file of one keeps none, nor column_orders), and no column
// chunk keeps the deprecated file_offset (0, as the Parquet spec asks).
func TestNoNullCountClaimed(t *testing.T) {
	rows, tpl := pinRows(t, 5000, 5000)
	f, err := Encode(rows, tpl, WithDate(true))
	if err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	o.date, o.groupRows = true, 1000
	cut, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	type tplRow struct {
		ID    int64    `parquet:"template_id,delta"`
		Text  string   `parquet:"template"`
		Kinds []string `parquet:"kinds,optional,list"`
	}
	var trows []tplRow
	for i := range 100 {
		trows = append(trows, tplRow{ID: int64(i), Text: "user <*> in"})
		if i%3 == 0 {
			trows[i].Kinds = []string{"", "ipv4"}
		}
	}
	tf := writeTrimmed(t, trows, parquet.DataPageVersion(1), parquet.DataPageStatistics(false))
	for _, c := range []struct {
		name string
		data []byte
		keep map[string]bool
	}{{"records", f.Data, nil}, {"records in row groups", cut.Data, statsColumns}, {"TrimFooter", tf, nil}} {
		r, err := file.NewParquetReader(bytes.NewReader(c.data))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(c.data), int64(len(c.data)))
		if err != nil {
			t.Fatal(err)
		}
		if groups, orders := len(pf.RowGroups()), len(pf.Metadata().ColumnOrders); (groups > 1) != (c.keep != nil) || (orders > 0) != (c.keep != nil) {
			t.Errorf("%s: %d row groups, %d column orders", c.name, groups, orders)
		}
		var kept, nullable int
		for g := range r.NumRowGroups() {
			rg := r.MetaData().RowGroup(g)
			for i := range rg.NumColumns() {
				cc, err := rg.ColumnChunk(i)
				if err != nil {
					t.Fatal(err)
				}
				path := cc.PathInSchema()
				if cc.FileOffset() != 0 {
					t.Errorf("%s: %v: file_offset %d", c.name, path, cc.FileOffset())
				}
				if rg.Schema.Column(i).MaxDefinitionLevel() > 0 {
					nullable++
				}
				set, err := cc.StatsSet()
				if err != nil {
					t.Fatal(err)
				}
				if want := len(path) == 1 && c.keep[path[0]]; set != want {
					t.Errorf("%s: %v: statistics set %v, want %v", c.name, path, set, want)
				} else if set {
					kept++
				}
			}
		}
		if nullable == 0 || (c.keep != nil && kept == 0) {
			t.Fatalf("%s: %d nullable columns, %d with statistics: the test tests nothing", c.name, nullable, kept)
		}
	}
}
