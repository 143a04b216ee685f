package lake_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	quarryql "github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
)

// TestTimeRangePrunesCurrentLayout: in a records table partitioned by
// tenant only, a file's days are not in its path; a time-ranged query,
// search and count still skip the files whose ts stats lie outside the
// range. The proof: the skipped file is corrupt, and the ranged reads
// succeed while an unranged one fails on it.
func TestTimeRangePrunesCurrentLayout(t *testing.T) {
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: t.Context(), store: s, rec: delta.OpenTable(s, lake.RecordsTable), tpl: delta.OpenTable(s, lake.TemplatesTable)}
	if err := f.rec.Create(f.ctx, delta.Metadata{Name: "records", SchemaString: lake.RecordsSchemaString(), PartitionColumns: lake.CurrentLayout.PartitionColumns()}); err != nil {
		t.Fatal(err)
	}
	if err := f.tpl.Create(f.ctx, delta.Metadata{Name: "templates", SchemaString: lake.TemplatesSchemaString}); err != nil {
		t.Fatal(err)
	}
	texts := recfile.Templates{{ID: 1, Version: 1}: "job <*> done"}
	f.commit(f.tpl, 1, f.templatesFile("w1", []lake.TemplateRow{{TemplateID: 1, Tenant: "acme", Version: 1, Template: "job <*> done", Kind: "created", WALSeq: 1}}))
	file := func(seq uint64, at time.Time, n int) delta.Add {
		var rows []recfile.Row
		for i := range n {
			rows = append(rows, recfile.Row{WALSeq: seq, Index: uint32(i), TS: at.Add(time.Duration(i) * time.Hour).UnixNano(),
				TemplateID: 1, TemplateVersion: 1, Params: []string{fmt.Sprint(seq, "-", i)}, Source: "s"})
		}
		enc, err := recfile.Encode(rows, texts, lake.CurrentLayout.EncodeOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		part := lake.CurrentLayout.PartOf("acme", rows[0].TS)
		rel := part.FilePath(lake.FileName(seq, seq, "w1"))
		if err := s.Put(f.ctx, f.rec.FileKey(rel), enc.Data); err != nil {
			t.Fatal(err)
		}
		return delta.Add{Path: rel, PartitionValues: part.PartitionValues(), Size: int64(len(enc.Data)),
			ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: enc.Stats}
	}
	jan1 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	jan5 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	f.commit(f.rec, 2, file(1, jan1, 3)) // Jan 1, 10:00 to 12:00
	bad := file(2, jan5, 3)              // Jan 5: to be corrupted
	f.commit(f.rec, 3, bad)
	// Same size, other bytes: only a reader that opens it notices.
	if err := s.Put(f.ctx, f.rec.FileKey(bad.Path), bytes.Repeat([]byte{'x'}, int(bad.Size))); err != nil {
		t.Fatal(err)
	}
	l := lake.Open(s)
	want := []string{"1.0 acme job 1-0 done", "1.1 acme job 1-1 done", "1.2 acme job 1-2 done"}
	// The days of both files are one table partition; the range is within
	// Jan 1 to Jan 4, so the Jan 5 file is skipped by its ts stats.
	for _, flt := range []lake.Filter{
		{Since: jan1.Add(-time.Hour), Until: jan1.Add(24 * time.Hour)},
		{Until: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)},
		{Since: jan1, Until: time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)}, // until is exclusive
	} {
		if got := query(t, l, flt); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("query %v..%v: %v", flt.Since, flt.Until, got)
		}
		opts := lake.SearchOptions{Since: flt.Since, Until: flt.Until}
		if got := searchLines(t, l, quarryql.MustCompile("job"), opts); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("search %v..%v: %v", flt.Since, flt.Until, got)
		}
		rows, err := l.Aggregate(context.Background(), quarryql.MustCompile("| count"), opts)
		if err != nil || len(rows) != 1 || rows[0].Count != 3 {
			t.Errorf("count %v..%v: %v, %v", flt.Since, flt.Until, rows, err)
		}
	}
	// Without the range the corrupt file is read, and fails.
	if err := l.Query(context.Background(), lake.Filter{}, func(lake.Record) error { return nil }); err == nil {
		t.Fatal("an unranged query read past the corrupt file")
	}
	if err := l.Search(context.Background(), quarryql.MustCompile("job"), lake.SearchOptions{Since: jan5}, func(lake.Record) error { return nil }); err == nil {
		t.Fatal("a search over Jan 5 read past the corrupt file")
	}
}
