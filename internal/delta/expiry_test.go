package delta_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
)

// TestCheckpointExpiresTombstones: a checkpoint leaves out the tombstones
// removed before the expiry (unless Keep keeps them) and keeps the fresh
// ones and those without a deletionTimestamp; the table reads the same,
// and its log still validates. Checkpoint keeps them all.
func TestCheckpointExpiresTombstones(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tbl := create(t, s, "t")
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	removed := map[string]int64{
		"old.parquet":     now.Add(-week - time.Minute).UnixMilli(), // expired
		"kept.parquet":    now.Add(-week - time.Hour).UnixMilli(),   // expired, but Keep keeps it
		"fresh.parquet":   now.Add(-week + time.Minute).UnixMilli(), // within the retention
		"no-time.parquet": 0,                                        // no deletionTimestamp
	}
	names := []string{"old.parquet", "kept.parquet", "fresh.parquet", "no-time.parquet", "live.parquet"}
	for i, name := range names {
		a := putFile(t, s, tbl, name, 10+i)
		must(t, tbl.Commit(ctx, int64(i+1), []delta.Action{{Add: &a}}))
	}
	v := int64(len(names))
	for _, name := range names[:4] {
		v++
		must(t, tbl.Commit(ctx, v, []delta.Action{{Remove: &delta.Remove{Path: name, DeletionTimestamp: removed[name], DataChange: true}}}))
	}
	tombstones := func() []string {
		snap, err := delta.OpenTable(s, "t").Snapshot(ctx)
		must(t, err)
		if len(snap.Files) != 1 || snap.Files[0].Path != "live.parquet" {
			t.Fatalf("live files %+v, want live.parquet", snap.Files)
		}
		var out []string
		for _, r := range snap.Tombstones {
			out = append(out, r.Path)
		}
		return out
	}
	all := []string{"fresh.parquet", "kept.parquet", "no-time.parquet", "old.parquet"}
	if got := tombstones(); !slices.Equal(got, all) {
		t.Fatalf("tombstones from the log: %v, want %v", got, all)
	}
	// Checkpoint keeps every tombstone.
	if _, err := tbl.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tombstones(); !slices.Equal(got, all) {
		t.Fatalf("tombstones after Checkpoint: %v, want %v", got, all)
	}
	// The commits the checkpoint covers are gone: what the table holds is
	// what the checkpoint holds.
	cv, err := tbl.CheckpointExpiring(ctx, delta.Expiry{Before: now.Add(-week),
		Keep: func(r delta.Remove) bool { return r.Path == "kept.parquet" }})
	if err != nil || cv != v {
		t.Fatalf("CheckpointExpiring: %d, %v, want %d", cv, err, v)
	}
	for i := int64(0); i <= v; i++ {
		must(t, s.Delete(ctx, tbl.CommitKey(i)))
	}
	want := []string{"fresh.parquet", "kept.parquet", "no-time.parquet"}
	if got := tombstones(); !slices.Equal(got, want) {
		t.Fatalf("tombstones after CheckpointExpiring: %v, want %v (old.parquet expired)", got, want)
	}
	must(t, delta.ValidateLog(ctx, s, "t"))
}
