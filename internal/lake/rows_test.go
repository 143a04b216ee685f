package lake_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/recfile"
)

// TestReadRowsRewrite reads every committed records v2 file of the fixture
// as rows, writes them as records v3 with the tenant's template texts and
// checks the new file decodes to the lines the query reads from the old.
func TestReadRowsRewrite(t *testing.T) {
	f := build(t)
	ctx := context.Background()
	l := lake.Open(f.store)
	snap, err := l.Records().Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Files {
		tenant := a.PartitionValues["tenant"]
		texts, err := l.TemplateTexts(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := l.ReadRows(ctx, a, texts)
		if err != nil {
			t.Fatal(err)
		}
		file, err := recfile.Encode(rows, texts)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := recfile.Decode(file.Data, texts)
		if err != nil {
			t.Fatal(err)
		}
		var want, got []string
		if err := l.Query(ctx, lake.Filter{Tenant: tenant}, func(r lake.Record) error {
			if lake.Date(r.TS.UnixNano()) == a.PartitionValues["date"] {
				want = append(want, r.Line)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, string(r.Line))
		}
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s rewritten: lines %q, want %q", a.Path, got, want)
		}
		// The v3 file reads back as the same rows.
		again, err := recfile.DecodeRows(file.Data, texts)
		if err != nil || len(again) != len(rows) {
			t.Fatalf("DecodeRows of the rewrite: %d rows, %v", len(again), err)
		}
		for i := range rows {
			if !slices.Equal(again[i].Params, rows[i].Params) || again[i].WALSeq != rows[i].WALSeq || again[i].TS != rows[i].TS {
				t.Errorf("row %d: %+v, want %+v", i, again[i], rows[i])
			}
		}
		// The v3 file, committed, reads back through ReadRows; without its
		// templates it is ErrTemplateMissing, not a wrong row.
		v3 := a
		v3.Path = a.Path + ".v3.parquet"
		if err := f.store.Put(ctx, l.Records().FileKey(v3.Path), file.Data); err != nil {
			t.Fatal(err)
		}
		if back, err := l.ReadRows(ctx, v3, texts); err != nil || len(back) != len(rows) {
			t.Fatalf("ReadRows of the v3 file: %d rows, %v", len(back), err)
		}
		if _, err := l.ReadRows(ctx, v3, recfile.Templates{}); !errors.Is(err, lake.ErrTemplateMissing) {
			t.Fatalf("ReadRows without templates: %v", err)
		}
	}
}
