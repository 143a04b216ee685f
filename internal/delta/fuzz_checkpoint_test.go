package delta_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
)

// FuzzReadCheckpoint replays a table whose only source of state is a
// checkpoint with fuzzed bytes: the reader returns a snapshot, ErrCorrupt
// or ErrUnsupported (a flipped protocol version),
// never panics and never allocates what a damaged footer or page header
// claims.
func FuzzReadCheckpoint(f *testing.F) {
	ctx := context.Background()
	seed, err := objstore.NewLocalNoSync(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	tbl := delta.OpenTable(seed, "t")
	if err := tbl.Create(ctx, delta.Metadata{Name: "t", SchemaString: schema, PartitionColumns: []string{"tenant"}}); err != nil {
		f.Fatal(err)
	}
	for i, name := range []string{"tenant=a/f0.parquet", "f1.parquet"} {
		a := delta.Add{Path: name, PartitionValues: map[string]string{"tenant": "a"}, Size: int64(10 + i), DataChange: true,
			Stats: delta.StatsJSON(int64(10+i), nil, nil, nil)}
		if err := tbl.Commit(ctx, int64(i+1), []delta.Action{{Add: &a}, {Txn: &delta.Txn{AppID: "quarry", Version: int64(i)}}}); err != nil {
			f.Fatal(err)
		}
	}
	if err := tbl.Commit(ctx, 3, []delta.Action{{Remove: &delta.Remove{Path: "f1.parquet", DeletionTimestamp: 7, DataChange: true}}}); err != nil {
		f.Fatal(err)
	}
	v, err := tbl.Checkpoint(ctx)
	if err != nil || v != 3 {
		f.Fatalf("checkpoint: %d, %v", v, err)
	}
	cp, err := seed.Get(ctx, tbl.CheckpointKey(3))
	if err != nil {
		f.Fatal(err)
	}
	last, err := seed.Get(ctx, tbl.LastCheckpointKey())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(cp)
	f.Add(cp[:len(cp)/2])
	f.Add([]byte("PAR1\xff\xff\xff\x7fPAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := objstore.NewLocalNoSync(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		tbl := delta.OpenTable(s, "t")
		must(t, s.Put(ctx, tbl.LastCheckpointKey(), last))
		must(t, s.Put(ctx, tbl.CheckpointKey(3), data))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		snap, err := tbl.Snapshot(ctx)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 256<<20 {
			t.Fatalf("reading a checkpoint of %d bytes allocated %d bytes", len(data), n)
		}
		if err != nil {
			// A flipped protocol version reads as a table this reader
			// does not support, which is as clear.
			if !errors.Is(err, delta.ErrCorrupt) && !errors.Is(err, delta.ErrUnsupported) {
				t.Fatalf("damaged checkpoint: %v, neither ErrCorrupt nor ErrUnsupported", err)
			}
			return
		}
		if snap.Version != 3 {
			t.Fatalf("snapshot at %d from a checkpoint of version 3", snap.Version)
		}
	})
}

// TestCheckpointFooterLengthNotAllocated: a checkpoint whose trailer states
// a 2 GiB footer is refused as corrupt before parquet-go allocates it.
func TestCheckpointFooterLengthNotAllocated(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tbl := delta.OpenTable(s, "t")
	must(t, s.Put(ctx, tbl.LastCheckpointKey(), []byte(`{"version":3,"size":4}`)))
	must(t, s.Put(ctx, tbl.CheckpointKey(3), []byte("PAR1\xff\xff\xff\x7fPAR1")))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := tbl.Snapshot(ctx)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, delta.ErrCorrupt) {
		t.Fatalf("snapshot: %v, want ErrCorrupt", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Fatalf("reading a 12-byte checkpoint allocated %d bytes", n)
	}
}
