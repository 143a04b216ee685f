package laketest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/recfile"
)

// TestCheckWithArrowLayouts: the Arrow check verifies each records file's
// partition values against the table's partition columns and each row's
// date (its date column, or its date partition) against its ts.
func TestCheckWithArrowLayouts(t *testing.T) {
	ctx := context.Background()
	tpl := recfile.Templates{{ID: 1, Version: 1}: "x <*>"}
	day := time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC)
	rows := []recfile.Row{
		{WALSeq: 1, TS: day.UnixNano(), TemplateID: 1, TemplateVersion: 1, Params: []string{"a"}, Source: "s"},
		{WALSeq: 2, TS: day.Add(2 * time.Hour).UnixNano(), TemplateID: 1, TemplateVersion: 1, Params: []string{"b"}, Source: "s"},
	}
	for _, tc := range []struct {
		name   string
		layout lake.Layout
		date   bool // the file has the date column
		part   lake.Part
		path   string // "" for part's
		rows   []recfile.Row
		want   string // "" for no problem
	}{
		{"current", lake.CurrentLayout, true, lake.Part{Tenant: "acme"}, "", rows, ""},
		{"current without the date column", lake.CurrentLayout, false, lake.Part{Tenant: "acme"}, "", rows, "neither a date column nor a date partition"},
		{"current with a date partition", lake.CurrentLayout, true, lake.Part{Tenant: "acme", Date: "2026-01-01"}, "", rows, "partition columns are [tenant]"},
		{"current outside its directory", lake.CurrentLayout, true, lake.Part{Tenant: "acme"}, "tenant=beta/f.parquet", rows, "not in its partition's directory"},
		{"dated", lake.DatedLayout, false, lake.Part{Tenant: "acme", Date: "2026-01-01"}, "", rows[:1], ""},
		{"dated, a row of another day", lake.DatedLayout, false, lake.Part{Tenant: "acme", Date: "2026-01-01"}, "", rows, "ts on 2026-01-02 in date partition 2026-01-01"},
		{"dated with a date column", lake.DatedLayout, true, lake.Part{Tenant: "acme", Date: "2026-01-01"}, "", rows[:1], "a date column and the date partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := objstore.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, tb := range []struct {
				name, schema string
				parts        []string
			}{{lake.RecordsTable, lake.RecordsSchemaString(), tc.layout.PartitionColumns()}, {lake.TemplatesTable, lake.TemplatesSchemaString, []string{}}} {
				if err := delta.OpenTable(store, tb.name).Create(ctx, delta.Metadata{Name: tb.name, SchemaString: tb.schema, PartitionColumns: tb.parts}); err != nil {
					t.Fatal(err)
				}
			}
			f, err := recfile.Encode(tc.rows, tpl, recfile.WithDate(tc.date))
			if err != nil {
				t.Fatal(err)
			}
			rel := tc.path
			if rel == "" {
				rel = tc.part.FilePath("f.parquet")
			}
			rec := delta.OpenTable(store, lake.RecordsTable)
			if err := store.Put(ctx, rec.FileKey(rel), f.Data); err != nil {
				t.Fatal(err)
			}
			add := delta.Add{Path: rel, PartitionValues: tc.part.PartitionValues(), Size: int64(len(f.Data)), DataChange: true, Stats: f.Stats}
			if err := rec.Commit(ctx, 1, []delta.Action{{Add: &add}}); err != nil {
				t.Fatal(err)
			}
			err = CheckWithArrow(ctx, store)
			if tc.want == "" && err != nil {
				t.Fatalf("check: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("check: %v, want %q", err, tc.want)
			}
		})
	}
}
