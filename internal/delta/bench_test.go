package delta_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
)

// BenchmarkSnapshot replays a 1000-commit log (each commit 4 adds and a
// txn) from scratch, without and with a checkpoint at the last version.
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	s, err := objstore.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tbl := delta.OpenTable(s, "t")
	if err := tbl.Create(ctx, delta.Metadata{SchemaString: schema, PartitionColumns: []string{"tenant"}}); err != nil {
		b.Fatal(err)
	}
	const commits = 1000
	for v := int64(1); v <= commits; v++ {
		actions := []delta.Action{{Txn: &delta.Txn{AppID: "quarry", Version: v}}}
		for i := range 4 {
			actions = append(actions, delta.Action{Add: &delta.Add{Path: fmt.Sprintf("tenant=a/part-%d-%d.parquet", v, i), Size: 1000,
				PartitionValues: map[string]string{"tenant": "a"}, DataChange: true, Stats: delta.StatsJSON(10, map[string]any{"wal_seq": v}, map[string]any{"wal_seq": v}, nil)}})
		}
		if err := tbl.Commit(ctx, v, actions); err != nil {
			b.Fatal(err)
		}
	}
	run := func(b *testing.B) {
		for b.Loop() {
			snap, err := delta.OpenTable(s, "t").Snapshot(ctx)
			if err != nil || snap.Version != commits || len(snap.Files) != 4*commits {
				b.Fatalf("%v %v", snap.Version, err)
			}
		}
	}
	b.Run("json", run)
	if _, err := tbl.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("checkpoint", run)
	b.Run("incremental", func(b *testing.B) {
		for b.Loop() {
			if _, err := tbl.Snapshot(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
