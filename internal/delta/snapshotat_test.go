package delta_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
)

// TestSnapshotAt: the state as of every version is the one Snapshot
// returned right after that commit, whether SnapshotAt starts from no
// cache, from a cache newer than the version or from an older one, and
// from a checkpoint once the commits before it are cleaned up.
func TestSnapshotAt(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tbl := create(t, s, "t")
	type view struct {
		paths []string
		txns  map[string]int64
	}
	viewOf := func(snap *delta.Snapshot) view {
		v := view{txns: snap.Txns}
		for _, f := range snap.Files {
			v.paths = append(v.paths, f.Path)
		}
		return v
	}
	same := func(a, b view) bool { return slices.Equal(a.paths, b.paths) && maps.Equal(a.txns, b.txns) }
	want := map[int64]view{}
	record := func(v int64) {
		snap, err := delta.OpenTable(s, "t").Snapshot(ctx)
		must(t, err)
		if snap.Version != v {
			t.Fatalf("setup: snapshot at %d, want %d", snap.Version, v)
		}
		want[v] = viewOf(snap)
	}
	record(0)
	var adds []delta.Add
	for v := int64(1); v <= 6; v++ {
		a := putFile(t, s, tbl, fmt.Sprintf("f%d.parquet", v), 10)
		adds = append(adds, a)
		actions := []delta.Action{{Add: &a}, {Txn: &delta.Txn{AppID: "quarry", Version: 10 * v}}}
		if v%3 == 0 { // remove the file added two commits before
			r := adds[v-3]
			actions = append(actions, delta.Action{Remove: &delta.Remove{Path: r.Path, DeletionTimestamp: 1, DataChange: true}})
		}
		must(t, tbl.Commit(ctx, v, actions))
		record(v)
		if v == 4 {
			cv, err := tbl.Checkpoint(ctx)
			if err != nil || cv != 4 {
				t.Fatalf("checkpoint: %d, %v", cv, err)
			}
		}
	}
	check := func(name string, tb *delta.Table, v int64) {
		t.Helper()
		snap, err := tb.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatalf("%s: SnapshotAt(%d): %v", name, v, err)
		}
		if snap.Version != v || !same(viewOf(snap), want[v]) {
			t.Fatalf("%s: SnapshotAt(%d) = version %d %+v, want %+v", name, v, snap.Version, viewOf(snap), want[v])
		}
	}
	for v := int64(0); v <= 6; v++ {
		check("no cache", delta.OpenTable(s, "t"), v)
		newer := delta.OpenTable(s, "t")
		_, err := newer.Snapshot(ctx)
		must(t, err)
		check("newer cache", newer, v)
		older := delta.OpenTable(s, "t")
		if _, err := older.SnapshotAt(ctx, 0); err != nil {
			t.Fatal(err)
		}
		check("older cache", older, v)
	}
	// A version after the newest is not found.
	if _, err := tbl.SnapshotAt(ctx, 7); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("SnapshotAt(7) of a table at 6: %v, want ErrNotFound", err)
	}
	// The commits before the checkpoint cleaned up: versions from the
	// checkpoint on still read, earlier ones are not found.
	for v := int64(0); v < 4; v++ {
		must(t, s.Delete(ctx, tbl.CommitKey(v)))
	}
	for v := int64(4); v <= 6; v++ {
		check("after cleanup", delta.OpenTable(s, "t"), v)
	}
	if _, err := delta.OpenTable(s, "t").SnapshotAt(ctx, 2); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("SnapshotAt(2) after cleanup: %v, want ErrNotFound", err)
	}
}
