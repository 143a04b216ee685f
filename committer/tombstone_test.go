package committer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
)

// TestCheckpointTombstonesBounded runs three weeks of maintenance commits
// through the committer's own code with an accelerated clock (one hour
// per commit, no waiting): each commit removes the file the previous one
// added, as compaction and the progress table do, and a checkpoint is
// written every CheckpointInterval versions. The checkpoint's remove count
// stays at the week of tombstones the retention keeps (plus one naming a
// batch above the high-water, which never expires), the same after two and
// after three weeks; without expiry it grows with every commit.
func TestCheckpointTombstonesBounded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := testConfig("bounds")
	cfg.CheckpointInterval = 10
	c, err := New(cfg, Deps{JS: e.js, Store: e.local, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ensureTables(ctx); err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return clock }
	st := &tableState{name: lake.RecordsTable, t: c.records, version: 0, txn: -1, paths: map[string]bool{}}
	ls := &lease{validUntil: time.Now().Add(time.Hour)}
	const step = time.Hour
	const above = 1 << 40 // a batch the high-water never reaches
	file := func(i int) (string, uint64) {
		if i == 0 {
			return "tenant=acme/date=2026-01-01/above.parquet", above
		}
		return fmt.Sprintf("tenant=acme/date=2026-01-01/f%04d.parquet", i), uint64(i)
	}
	add := func(i int) delta.Action {
		p, seq := file(i)
		if err := e.local.Put(ctx, c.records.FileKey(p), []byte{1}); err != nil {
			t.Fatal(err)
		}
		return delta.Action{Add: &delta.Add{Path: p, PartitionValues: map[string]string{"tenant": "acme", "date": "2026-01-01"},
			Size: 1, ModificationTime: clock.UnixMilli(), DataChange: true,
			Tags: map[string]string{TagReport: fmt.Sprintf("r%d", i), TagSeqs: formatSeqs([]uint64{seq})}}}
	}
	remove := func(i int) delta.Action {
		p, seq := file(i)
		a := delta.Add{Path: p, PartitionValues: map[string]string{"tenant": "acme", "date": "2026-01-01"}, Size: 1,
			Tags: map[string]string{TagReport: fmt.Sprintf("r%d", i), TagSeqs: formatSeqs([]uint64{seq})}}
		return delta.Action{Remove: &delta.Remove{Path: a.Path, DeletionTimestamp: clock.UnixMilli(), DataChange: false,
			ExtendedFileMetadata: true, PartitionValues: a.PartitionValues, Size: a.Size, Tags: a.Tags}}
	}
	commit := func(actions ...delta.Action) {
		t.Helper()
		if err := commitJob(ctx, st, ls, cfg.Name, time.Minute, &job{op: "OPTIMIZE", actions: actions}); err != nil {
			t.Fatal(err)
		}
		if st.version%int64(cfg.CheckpointInterval) == 0 {
			c.cp.write(ctx, c.records)
		}
	}
	commit(add(0))
	commit(remove(0), add(1))
	// removes counts the tombstones of the newest checkpoint, written at
	// the newest version.
	removes := func() int {
		t.Helper()
		if got := e.lastCheckpointVersion(lake.RecordsTable); got != st.version {
			t.Fatalf("newest checkpoint %d, want the newest version %d", got, st.version)
		}
		snap, err := delta.OpenTable(e.local, lake.RecordsTable).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		aboveKept := false
		for _, r := range snap.Tombstones {
			aboveKept = aboveKept || strings.HasSuffix(r.Path, "above.parquet")
		}
		if !aboveKept {
			t.Fatal("the tombstone naming a batch above the high-water expired")
		}
		return len(snap.Tombstones)
	}
	// The retention keeps the tombstones of the last week: one per step,
	// and the one above the high-water.
	bound := int(cfg.Defaults().TombstoneRetention/step) + 2
	var mid int
	for i := 2; i <= 3*7*24; i++ {
		clock = clock.Add(step)
		c.hw.Store(uint64(i)) // the high-water covers every file but "above"
		commit(remove(i-1), add(i))
		if i == 2*7*24 {
			for st.version%int64(cfg.CheckpointInterval) != 0 {
				i++
				clock = clock.Add(step)
				c.hw.Store(uint64(i))
				commit(remove(i-1), add(i))
			}
			mid = removes()
		}
	}
	for st.version%int64(cfg.CheckpointInterval) != 0 {
		commit()
	}
	end := removes()
	if mid > bound || end > bound {
		t.Fatalf("checkpoint removes: %d after two weeks, %d after three, want at most %d (a week of commits)", mid, end, bound)
	}
	if end < bound-cfg.CheckpointInterval-2 {
		t.Fatalf("checkpoint removes %d: fewer than the week the retention keeps (%d)", end, bound)
	}
	if err := delta.ValidateLog(ctx, e.local, lake.RecordsTable); err != nil {
		t.Fatal(err)
	}
}

func TestTombstoneRetentionConfig(t *testing.T) {
	if got := (Config{}).Defaults().TombstoneRetention; got != lake.DefaultGrace {
		t.Errorf("default tombstone_retention %s, want lake.DefaultGrace %s", got, lake.DefaultGrace)
	}
	cfg := testConfig("c").Defaults()
	cfg.TombstoneRetention = lake.DefaultGrace - time.Hour
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "committer.tombstone_retention") {
		t.Errorf("tombstone_retention below the vacuum grace: %v", err)
	}
}
