package recfile

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// TestDateColumn: WithDate(true) writes each row's UTC day of ts as an INT32
// DATE column, DELTA_BINARY_PACKED, with its bounds in the chunk statistics
// and the Delta stats; a file with it and one without decode alike.
func TestDateColumn(t *testing.T) {
	tpl := Templates{}
	var rows []Row
	want := map[[2]uint64]string{}
	// Rows over three days, one before the epoch (Day floors).
	days := []string{"2026-11-29T23:59:59.999Z", "2026-11-30T00:00:00Z", "1969-12-31T23:00:00.5Z", "2015-10-18T18:01:47.978Z"}
	for i, d := range days {
		id := uint64(10 + i%2)
		tpl[Key{id, 1}] = "x <*> y"
		rows = append(rows, Row{WALSeq: uint64(1 + i), TS: ns(d), TemplateID: id, TemplateVersion: 1, Params: []string{d}, Source: "s"})
		want[[2]uint64{uint64(1 + i), 0}] = "x " + d + " y"
	}
	plain, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	dated, err := Encode(rows, tpl, WithDate(true))
	if err != nil {
		t.Fatal(err)
	}
	if fileColumns(t, plain.Data)["date"] {
		t.Error("a file without WithDate has a date column")
	}
	if strings.Contains(plain.Stats, `"date"`) {
		t.Errorf("stats without WithDate name date: %s", plain.Stats)
	}
	for _, f := range []File{plain, dated} {
		got, err := Decode(f.Data, tpl)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range got {
			if string(g.Line) != want[[2]uint64{g.WALSeq, uint64(g.Index)}] {
				t.Errorf("wal %d: line %q", g.WALSeq, g.Line)
			}
		}
		all, err := DecodeProjected(f.Data, tpl, Projection{Keep: func(k Key) bool { return k.ID == 10 }, Lines: true})
		if err != nil || len(all) != 2 {
			t.Fatalf("projected: %d records, %v", len(all), err)
		}
		r, err := OpenAt(bytes.NewReader(f.Data), int64(len(f.Data)))
		if err != nil {
			t.Fatal(err)
		}
		at, err := r.DecodeProjected(tpl, Projection{Lines: true, Source: true})
		if err != nil || len(at) != len(rows) {
			t.Fatalf("OpenAt: %d records, %v", len(at), err)
		}
		for _, g := range at {
			if string(g.Line) != want[[2]uint64{g.WALSeq, uint64(g.Index)}] {
				t.Errorf("OpenAt wal %d: line %q", g.WALSeq, g.Line)
			}
		}
	}
	pf, err := parquet.OpenFile(bytes.NewReader(dated.Data), int64(len(dated.Data)))
	if err != nil {
		t.Fatal(err)
	}
	leaf, ok := pf.Schema().Lookup("date")
	if !ok {
		t.Fatal("no date column")
	}
	if lt := leaf.Node.Type().LogicalType(); lt == nil || !isDate(lt) || leaf.Node.Type().Kind() != parquet.Int32 || leaf.Node.Optional() {
		t.Errorf("date column type %v %v, want required INT32 DATE", leaf.Node.Type().Kind(), lt)
	}
	cc := pf.Metadata().RowGroups[0].Columns[leaf.ColumnIndex].MetaData
	hasDelta := false
	for _, e := range cc.Encoding {
		hasDelta = hasDelta || e == format.DeltaBinaryPacked
	}
	if !hasDelta {
		t.Errorf("date encodings %v, want DELTA_BINARY_PACKED", cc.Encoding)
	}
	if len(pf.RowGroups()) != 1 || len(cc.Statistics.MinValue) != 0 {
		// A file of several row groups keeps date's chunk statistics
		// (TestNoNullCountClaimed); this one's bounds are in its stats.
		t.Error("date column chunk of a one row group file has statistics")
	}
	// The values, read with parquet-go alone, in file order (by template).
	vals := readColumn(t, dated.Data, "date")
	ids := readColumn(t, dated.Data, colWALSeq)
	for i, v := range vals {
		r := rows[ids[i].Int64()-1]
		if v.Int32() != Day(r.TS) {
			t.Errorf("row wal %d: date %d, want %d", ids[i].Int64(), v.Int32(), Day(r.TS))
		}
	}
	if Day(ns("1969-12-31T23:00:00.5Z")) != -1 || DayString(Day(ns("2026-11-29T23:59:59.999Z"))) != "2026-11-29" {
		t.Error("Day or DayString wrong")
	}
	if !strings.Contains(dated.Stats, `"date":"1969-12-31"`) || !strings.Contains(dated.Stats, `"date":"2026-11-30"`) {
		t.Errorf("stats lack the date bounds: %s", dated.Stats)
	}
}

func isDate(lt *format.LogicalType) bool {
	_, ok := lt.Value.(*format.DateType)
	return ok
}

// TestDateDictionary: a file whose rows fall on at most maxDictDays days has
// its date column dictionary-encoded (smaller than DELTA_BINARY_PACKED for a
// few values interleaved by the template sort), one of more days keeps
// DELTA_BINARY_PACKED, and either reads back each row's day.
func TestDateDictionary(t *testing.T) {
	tpl := Templates{{1, 1}: "a <*>", {2, 1}: "b <*>"}
	base := ns("2026-11-01T12:00:00Z")
	for _, c := range []struct {
		name string
		days int
		dict bool
	}{{"one day", 1, true}, {"three days", 3, true}, {"maxDictDays", maxDictDays, true}, {"one more", maxDictDays + 1, false}} {
		var rows []Row
		for i := range 400 {
			d := int64(i % c.days)
			rows = append(rows, Row{WALSeq: 1, Index: uint32(i), TS: base + d*int64(24*time.Hour) + int64(i)*int64(time.Second),
				TemplateID: uint64(1 + i%2), TemplateVersion: 1, Params: []string{fmt.Sprint(i * 7)}, Source: "s"})
		}
		f, err := Encode(rows, tpl, WithDate(true))
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, col := range pf.Metadata().RowGroups[0].Columns {
			if col.MetaData.PathInSchema[0] != colDate {
				continue
			}
			if dict := slices.Contains(col.MetaData.Encoding, format.RLEDictionary); dict != c.dict {
				t.Errorf("%s: date encodings %v, dictionary want %v", c.name, col.MetaData.Encoding, c.dict)
			}
		}
		back, err := DecodeRows(f.Data, tpl)
		if err != nil {
			t.Fatal(err)
		}
		dates := readColumn(t, f.Data, colDate)
		order := sortRows(rows, true)
		for x, i := range order {
			if got, want := dates[x].Int32(), Day(rows[i].TS); got != want {
				t.Fatalf("%s: row %d date %d, want %d", c.name, i, got, want)
			}
		}
		if len(back) != len(rows) {
			t.Fatalf("%s: %d rows back", c.name, len(back))
		}
	}
}
