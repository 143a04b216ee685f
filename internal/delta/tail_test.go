package delta_test

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/objstore/miniotest"
)

// countingStore counts the calls and listed keys of a store.
type countingStore struct {
	objstore.Store
	lists, listAfters, listed, reads, stats atomic.Int64
}

func (c *countingStore) Stat(ctx context.Context, key string) (objstore.Info, error) {
	c.stats.Add(1)
	return c.Store.Stat(ctx, key)
}

func (c *countingStore) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	c.lists.Add(1)
	infos, err := c.Store.List(ctx, prefix)
	c.listed.Add(int64(len(infos)))
	return infos, err
}

func (c *countingStore) ListAfter(ctx context.Context, prefix, after string, limit int) ([]objstore.Info, error) {
	c.listAfters.Add(1)
	infos, err := objstore.ListAfter(ctx, c.Store, prefix, after, limit)
	c.listed.Add(int64(len(infos)))
	return infos, err
}

func (c *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	c.reads.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *countingStore) Open(ctx context.Context, key string) (objstore.ReaderAtCloser, int64, error) {
	c.reads.Add(1)
	return c.Store.Open(ctx, key)
}

// fullLister hides the store's ListAfter: the old path, a full listing.
type fullLister struct{ objstore.Store }

// longLog writes versions 1..n of tbl (one add each) straight to the
// folder, checkpointing at each version in cps.
func longLog(t *testing.T, s *objstore.Local, tbl *delta.Table, n int64, cps ...int64) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(s.Root(), filepath.FromSlash(tbl.LogDir()))
	at := map[int64]bool{}
	for _, v := range cps {
		at[v] = true
	}
	for v := int64(1); v <= n; v++ {
		data, err := delta.EncodeCommit([]delta.Action{{Add: &delta.Add{Path: fmt.Sprintf("tenant=a/f-%d.parquet", v), Size: 1,
			PartitionValues: map[string]string{"tenant": "a"}, DataChange: true}}, {Txn: &delta.Txn{AppID: "quarry", Version: v}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.json", v)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if at[v] {
			if got, err := tbl.Checkpoint(ctx); err != nil || got != v {
				t.Fatalf("checkpoint at %d: %d, %v", v, got, err)
			}
		}
	}
}

// TestReplayWithoutLastCheckpointListsTheTail: on a table of 5,000
// versions whose _last_checkpoint is gone (and whose log cleanup deleted
// versions below 1,000), a reader finds the newest checkpoint with a
// bounded number of listings of a bounded number of keys, never lists the
// whole log, and reaches the same state as a full listing; with the
// newest checkpoint torn it falls back to an older one.
func TestReplayWithoutLastCheckpointListsTheTail(t *testing.T) {
	ctx := context.Background()
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := create(t, s, "t")
	const n = 5000
	longLog(t, s, tbl, n, 1000, 2000, 4900)
	for v := int64(0); v < 1000; v++ { // as log cleanup leaves it
		must(t, s.Delete(ctx, tbl.CommitKey(v)))
	}
	must(t, s.Delete(ctx, tbl.LastCheckpointKey()))

	want, err := delta.OpenTable(&fullLister{s}, "t").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want.Version != n || len(want.Files) != n || want.Txns["quarry"] != n {
		t.Fatalf("full listing: version %d, %d files", want.Version, len(want.Files))
	}
	check := func(what string, maxListed, maxReads int64) {
		t.Helper()
		c := &countingStore{Store: s}
		got, err := delta.OpenTable(c, "t").Snapshot(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.Version != want.Version || len(got.Files) != len(want.Files) || got.Txns["quarry"] != n {
			t.Fatalf("%s: version %d, %d files; want %d, %d", what, got.Version, len(got.Files), want.Version, len(want.Files))
		}
		// Finding the ends: one listing for the first version, two Stats
		// per bit of the distance to the newest; then the windows.
		maxStats := int64(2*bits.Len64(n) + 2)
		maxListAfters := int64(1 + 8)
		t.Logf("%s: %d full listings, %d range listings, %d keys listed, %d stats, %d reads", what, c.lists.Load(), c.listAfters.Load(), c.listed.Load(), c.stats.Load(), c.reads.Load())
		if c.lists.Load() != 0 || c.listAfters.Load() > maxListAfters || c.listed.Load() > maxListed || c.reads.Load() > maxReads || c.stats.Load() > maxStats {
			t.Errorf("%s: %d full listings, %d range listings (max %d), %d keys listed (max %d), %d stats (max %d), %d reads (max %d)",
				what, c.lists.Load(), c.listAfters.Load(), maxListAfters, c.listed.Load(), maxListed, c.stats.Load(), maxStats, c.reads.Load(), maxReads)
		}
	}
	// The first window (128 versions) holds the checkpoint at 4,900: about
	// 130 keys and the 100 commits after it.
	check("newest checkpoint", 200, 110)
	// Torn, it is passed over; the window doubles until it holds 2,000.
	must(t, s.Put(ctx, tbl.CheckpointKey(4900), []byte("torn")))
	check("newest checkpoint torn", 2*(n-1000)+200, 3100)
}

// TestReplayWithoutCheckpoints: a log from version 0 with no checkpoint is
// replayed whole, through the tail listing as through a full one.
func TestReplayWithoutCheckpoints(t *testing.T) {
	ctx := context.Background()
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := create(t, s, "t")
	longLog(t, s, tbl, 300)
	for _, st := range []objstore.Store{s, &fullLister{s}} {
		snap, err := delta.OpenTable(st, "t").Snapshot(ctx)
		if err != nil || snap.Version != 300 || len(snap.Files) != 300 {
			t.Fatalf("%T: %v", st, err)
		}
	}
	// A gap is corruption either way.
	must(t, s.Delete(ctx, tbl.CommitKey(150)))
	for _, st := range []objstore.Store{s, &fullLister{s}} {
		if _, err := delta.OpenTable(st, "t").Snapshot(ctx); err == nil {
			t.Fatalf("%T: a log with version 150 missing replayed", st)
		}
	}
	// An empty store has no log.
	empty := newStore(t)
	if snap, err := delta.OpenTable(empty, "t").Snapshot(ctx); err != nil || snap.Version != -1 {
		t.Fatalf("no log: %v, %v", snap, err)
	}
}

// TestReplayTailOnMinIO: the tail listing over a real S3 server
// (ListObjectsV2 with StartAfter and MaxKeys): 600 versions, the newest
// checkpoint at 500, no _last_checkpoint.
func TestReplayTailOnMinIO(t *testing.T) {
	ctx := context.Background()
	endpoint, ak, sk := miniotest.Start(t)
	miniotest.MakeBucket(t, endpoint, ak, sk, "lake")
	s3, err := objstore.Open(ctx, "s3://lake/x", objstore.S3Options{Endpoint: endpoint, AccessKey: ak, SecretKey: sk})
	if err != nil {
		t.Fatal(err)
	}
	tbl := create(t, s3, "t")
	const n = 600
	for v := int64(1); v <= n; v++ {
		must(t, tbl.Commit(ctx, v, []delta.Action{{Add: &delta.Add{Path: fmt.Sprintf("tenant=a/f-%d.parquet", v), Size: 1,
			PartitionValues: map[string]string{"tenant": "a"}, DataChange: true}}}))
		if v == 500 {
			if _, err := tbl.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	must(t, s3.Delete(ctx, tbl.LastCheckpointKey()))
	c := &countingStore{Store: s3}
	snap, err := delta.OpenTable(c, "t").Snapshot(ctx)
	if err != nil || snap.Version != n || len(snap.Files) != n {
		t.Fatalf("snapshot: %v", err)
	}
	t.Logf("%d full listings, %d range listings, %d keys listed, %d stats, %d reads", c.lists.Load(), c.listAfters.Load(), c.listed.Load(), c.stats.Load(), c.reads.Load())
	if c.lists.Load() != 0 || c.listed.Load() > 150 || c.reads.Load() > 110 || c.stats.Load() > 25 {
		t.Errorf("%d full listings, %d keys listed (max 150), %d reads (max 110)", c.lists.Load(), c.listed.Load(), c.reads.Load())
	}
}

// TestSnapshotAtListsAWindow: time travel to a version below
// _last_checkpoint starts from the newest checkpoint at or before it,
// found by listing windows of versions just below it, never the log above
// it nor the whole log.
func TestSnapshotAtListsAWindow(t *testing.T) {
	ctx := context.Background()
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := create(t, s, "t")
	longLog(t, s, tbl, 5000, 1000, 2000, 4900)
	for v := int64(0); v < 1000; v++ {
		must(t, s.Delete(ctx, tbl.CommitKey(v)))
	}
	c := &countingStore{Store: s}
	snap, err := delta.OpenTable(c, "t").SnapshotAt(ctx, 2500)
	if err != nil || snap.Version != 2500 || len(snap.Files) != 2500 {
		t.Fatalf("snapshot at 2500: %v", err)
	}
	t.Logf("%d full listings, %d range listings, %d keys listed, %d reads", c.lists.Load(), c.listAfters.Load(), c.listed.Load(), c.reads.Load())
	// Windows of 128, 256 and 512 versions up to 2500 (the last holds
	// the checkpoint at 2000), then the 500 commits after it.
	if c.lists.Load() != 0 || c.listed.Load() > 1200 || c.reads.Load() > 510 {
		t.Errorf("%d full listings, %d keys listed (max 1200), %d reads (max 510)", c.lists.Load(), c.listed.Load(), c.reads.Load())
	}
	if _, err := delta.OpenTable(c, "t").SnapshotAt(ctx, 500); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("snapshot at 500, below the log's start: %v, want not found", err)
	}
	for _, v := range []int64{1000, 1999, 4950} {
		got, err := delta.OpenTable(c, "t").SnapshotAt(ctx, v)
		if err != nil || got.Version != v || len(got.Files) != int(v) {
			t.Errorf("snapshot at %d: %v", v, err)
		}
	}
}
