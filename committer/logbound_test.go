package committer

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

// TestDeltaLogBoundedOverAWeek commits to the records table once per
// simulated second on an injected clock (no waiting: each commit file's
// modification time is set to the clock, which is what log cleanup reads),
// through the committer's own commit, checkpoint and log cleanup code, with
// a compaction every 5 minutes (one commit removing every live file and
// adding one). The table sets its own lifecycle, which the committer's
// defaults leave to it: delta.checkpointInterval 100 and, so that the
// bound is reached early in the run, delta.logRetentionDuration and
// delta.deletedFileRetentionDuration of 10 minutes (the defaults, 30 and 7
// days, make the same bound 4,320 and 1,008 times larger). Every simulated
// 10 minutes it counts the _delta_log entries and the newest checkpoint's
// actions: after the first retention both stay under a bound that does not
// grow with the number of commits, and never fall below what the retention
// keeps.
//
// The default run is one hour (3,600 commits); QUARRY_BOUNDS_COMMITS=604800
// is a week at the default commit interval (make bounds).
func TestDeltaLogBoundedOverAWeek(t *testing.T) {
	commits := 3600
	if s := os.Getenv("QUARRY_BOUNDS_COMMITS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1800 {
			t.Fatalf("QUARRY_BOUNDS_COMMITS %q: want a number >= 1800", s)
		}
		commits = n
	}
	e := newEnv(t)
	// Sizes, not durability, are under test: no fsync per write.
	nosync, err := objstore.NewLocalNoSync(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.local = nosync
	ctx := context.Background()
	const (
		step      = time.Second      // the default commit interval
		retention = 10 * time.Minute // the table's log and tombstone retention
		interval  = 100              // the table's checkpoint interval
		compactAt = 300              // commits between two compactions
		sampleAt  = int(retention / step)
	)
	tbl := e.createRecords(map[string]string{delta.PropCheckpointInterval: strconv.Itoa(interval),
		delta.PropLogRetention: "interval 10 minutes", delta.PropDeletedFileRetention: "interval 10 minutes"})
	c, err := New(testConfig("bounds"), Deps{JS: e.js, Store: e.local, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ensureTables(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The committer reads the table through its own handle.
	if _, err := c.records.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	// The simulated clock starts now (version 0 was written now) and runs
	// ahead of the real one.
	clock := time.Now()
	c.now = func() time.Time { return clock }
	st := &tableState{name: lake.RecordsTable, t: c.records, version: snap.Version, txn: -1, paths: map[string]bool{}}
	ls := &lease{validUntil: time.Now().Add(24 * time.Hour)}
	root := e.local.(*objstore.Local).Root()
	logDir := filepath.Join(root, filepath.FromSlash(c.records.LogDir()))
	parts := map[string]string{"tenant": "acme", "date": "2026-01-01"}
	add := func(name string) delta.Action {
		return delta.Action{Add: &delta.Add{Path: "tenant=acme/date=2026-01-01/" + name, PartitionValues: parts, Size: 1,
			ModificationTime: clock.UnixMilli(), DataChange: true}}
	}
	commit := func(op string, actions []delta.Action) {
		t.Helper()
		before := st.version
		if err := commitJob(ctx, st, ls, "bounds", time.Minute, &job{op: op, actions: actions}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(c.records.CommitKey(st.version))), clock, clock); err != nil {
			t.Fatal(err)
		}
		c.cp.committed(st, before)
		c.cp.writeDue(ctx) // what the checkpointer's goroutine does, in line
	}
	// Bounds: the JSON commits of one retention plus the versions up to the
	// cut-off checkpoint (cleanup runs at each checkpoint, so up to two
	// intervals), their checkpoints, and _last_checkpoint; the checkpoint
	// holds the live files (at most a compaction's worth), the tombstones
	// of one retention and protocol, metaData, txn.
	perRetention := int(retention / step)
	maxEntries := perRetention + 2*interval + (perRetention+2*interval)/interval + 2
	maxActions := compactAt + perRetention + perRetention/compactAt + 4
	type sample struct{ entries, actions int }
	var samples []sample
	measure := func() sample {
		t.Helper()
		names, err := os.ReadDir(logDir)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(logDir, "_last_checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		var lc delta.LastCheckpoint
		if err := json.Unmarshal(data, &lc); err != nil {
			t.Fatal(err)
		}
		return sample{len(names), int(lc.Size)}
	}
	live := []string{}
	for i := 1; i <= commits; i++ {
		clock = clock.Add(step)
		if i%compactAt == 0 {
			var actions []delta.Action
			for _, p := range live {
				actions = append(actions, delta.Action{Remove: &delta.Remove{Path: p, DeletionTimestamp: clock.UnixMilli(),
					ExtendedFileMetadata: true, PartitionValues: parts, Size: 1}})
			}
			name := fmt.Sprintf("compact-%d.parquet", i)
			live = []string{"tenant=acme/date=2026-01-01/" + name}
			commit("OPTIMIZE", append(actions, add(name)))
		} else {
			name := fmt.Sprintf("part-%d.parquet", i)
			live = append(live, "tenant=acme/date=2026-01-01/"+name)
			commit("WRITE", []delta.Action{add(name)})
		}
		if i%sampleAt == 0 {
			samples = append(samples, measure())
		}
	}
	lo, hi := samples[1], samples[1]
	for h, s := range samples {
		if h == 0 {
			continue // the first retention is still filling up
		}
		lo.entries, hi.entries = min(lo.entries, s.entries), max(hi.entries, s.entries)
		lo.actions, hi.actions = min(lo.actions, s.actions), max(hi.actions, s.actions)
		if s.entries > maxEntries || s.actions > maxActions {
			t.Errorf("after %s: %d _delta_log entries, checkpoint of %d actions; bound %d, %d",
				time.Duration((h+1)*sampleAt)*step, s.entries, s.actions, maxEntries, maxActions)
		}
		if s.entries < perRetention {
			t.Errorf("after %s: %d _delta_log entries, fewer than the retention keeps (%d)",
				time.Duration((h+1)*sampleAt)*step, s.entries, perRetention)
		}
	}
	t.Logf("%d commits (%s simulated), sampled every %s: after the first, _delta_log entries %d..%d (bound %d), newest checkpoint actions %d..%d (bound %d)",
		commits, time.Duration(commits)*step, retention, lo.entries, hi.entries, maxEntries, lo.actions, hi.actions, maxActions)
	if n := testutil.ToFloat64(c.m.logVersions.WithLabelValues(lake.RecordsTable)); n < float64(commits-perRetention-2*interval) {
		t.Errorf("log cleanup deleted %v versions of %d", n, commits)
	}
	// A new reader (from _last_checkpoint) sees the table as written.
	got, err := delta.OpenTable(e.local, lake.RecordsTable).Snapshot(ctx)
	if err != nil || got.Version != st.version || len(got.Files) != len(live) {
		t.Fatalf("the table after the run: %v, %v; want version %d with %d files", got, err, st.version, len(live))
	}
}
