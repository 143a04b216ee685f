package committer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

func TestCheckpointIntervalValidate(t *testing.T) {
	for _, tc := range []struct {
		n   int
		bad bool
	}{{0, false}, {1, false}, {100, false}, {-1, true}, {2_000_000, true}} {
		err := Config{CheckpointInterval: tc.n}.Defaults().Validate()
		if (err != nil) != tc.bad || tc.bad && !strings.Contains(err.Error(), "committer.checkpoint_interval") {
			t.Errorf("checkpoint_interval %d: %v", tc.n, err)
		}
	}
	if got := (Config{}).Defaults().CheckpointInterval; got != 100 {
		t.Errorf("default checkpoint_interval %d, want 100", got)
	}
}

// lastCheckpointVersion is the version _last_checkpoint of table names, -1
// without one.
func (e *env) lastCheckpointVersion(table string) int64 {
	data, err := e.local.Get(context.Background(), delta.OpenTable(e.local, table).LastCheckpointKey())
	if err != nil {
		return -1
	}
	var lc delta.LastCheckpoint
	if err := json.Unmarshal(data, &lc); err != nil {
		e.t.Fatal(err)
	}
	return lc.Version
}

// TestCommitterCheckpoints commits one advance per report with a
// checkpoint every 3 versions, then deletes every JSON commit the newest
// checkpoints cover: the lake still reads exactly once, and a new
// committer rebuilds its state from the checkpoints and goes on.
func TestCommitterCheckpoints(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig("c1")
	cfg.CheckpointInterval = 3
	r := e.start(cfg, nil)
	var want []uint64
	for s := uint64(1); s <= 7; s++ {
		e.publish(e.encode(fmt.Sprintf("a.%d", s), batch{s, s - 1}))
		e.waitHW(r.c, s)
		want = append(want, s)
	}
	// Versions 1..7 of both tables: checkpoints after 3 and 6.
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable} {
		eventually(t, 15*time.Second, table+" checkpoint at 6", func() bool { return e.lastCheckpointVersion(table) >= 6 })
	}
	// One or two: a table due again while the worker is busy (writing the
	// checkpoint at 3, cleaning up the log) is checkpointed once, at 6.
	if n := testutil.ToFloat64(r.c.m.checkpoints.WithLabelValues(lake.RecordsTable, "ok")); n < 1 {
		t.Errorf("records checkpoints ok: %v, want at least 1", n)
	}
	r.stop(t)
	ctx := context.Background()
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable} {
		cp := e.lastCheckpointVersion(table)
		tbl := delta.OpenTable(e.local, table)
		for v := int64(0); v <= cp; v++ {
			if err := e.local.Delete(ctx, tbl.CommitKey(v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.exactlyOnce(want...)
	r2 := e.start(cfg, nil)
	e.publish(e.encode("b.8", batch{8, 7}))
	e.waitHW(r2.c, 8)
	e.exactlyOnce(append(want, 8)...)
}

// TestCheckpointFailureNeverBlocksCommits fails every checkpoint write:
// advances go on, the failures are counted, and once the store heals the
// next interval's checkpoint lands.
func TestCheckpointFailureNeverBlocksCommits(t *testing.T) {
	e := newEnv(t)
	faults := objstore.NewFaults(1)
	// Commits are PutIfAbsent; only checkpoints and _last_checkpoint Put.
	id := faults.Add(objstore.Rule{Op: objstore.OpPut, KeyPrefix: lake.RecordsTable + "/_delta_log/"})
	cfg := testConfig("c1")
	cfg.CheckpointInterval = 2
	r := e.start(cfg, objstore.NewFaulty(e.local, faults))
	for s := uint64(1); s <= 4; s++ {
		e.publish(e.encode(fmt.Sprintf("a.%d", s), batch{s, s - 1}))
		e.waitHW(r.c, s)
	}
	eventually(t, 15*time.Second, "a counted checkpoint failure", func() bool {
		return testutil.ToFloat64(r.c.m.checkpoints.WithLabelValues(lake.RecordsTable, "error")) >= 1
	})
	if v := e.lastCheckpointVersion(lake.RecordsTable); v != -1 {
		t.Fatalf("records _last_checkpoint %d written through a failing store", v)
	}
	faults.Remove(id)
	for s := uint64(5); s <= 6; s++ {
		e.publish(e.encode(fmt.Sprintf("a.%d", s), batch{s, s - 1}))
		e.waitHW(r.c, s)
	}
	eventually(t, 15*time.Second, "records checkpoint at 6 after the store healed", func() bool {
		return e.lastCheckpointVersion(lake.RecordsTable) >= 6
	})
	e.exactlyOnce(1, 2, 3, 4, 5, 6)
}

// TestCommitterLogCleanup ages the first versions (0..4) of both tables
// past the log retention: the checkpoint after the restart deletes the
// commits below the newest checkpoint among the aged versions (never the
// ones after it), and the lake reads exactly once before and after.
func TestCommitterLogCleanup(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig("c1")
	cfg.CheckpointInterval = 3
	cfg.LogRetention = time.Hour
	r := e.start(cfg, nil)
	for s := uint64(1); s <= 4; s++ {
		e.publish(e.encode(fmt.Sprintf("a.%d", s), batch{s, s - 1}))
		e.waitHW(r.c, s)
	}
	// The checkpoint due at 3 is of the newest version when the worker
	// gets to it: 3 or 4.
	first := map[string]int64{}
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable} {
		eventually(t, 15*time.Second, table+" checkpoint at 3", func() bool { return e.lastCheckpointVersion(table) >= 3 })
	}
	r.stop(t)
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable} {
		first[table] = e.lastCheckpointVersion(table)
	}
	ctx := context.Background()
	// Versions 0..4 (the create and four advances) were written 2h ago.
	old := time.Now().Add(-2 * time.Hour)
	root := e.local.(*objstore.Local).Root()
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable} {
		tbl := delta.OpenTable(e.local, table)
		for v := int64(0); v <= 4; v++ {
			if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(tbl.CommitKey(v))), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.exactlyOnce(1, 2, 3, 4)
	r2 := e.start(cfg, nil)
	for s := uint64(5); s <= 6; s++ {
		e.publish(e.encode(fmt.Sprintf("b.%d", s), batch{s, s - 1}))
		e.waitHW(r2.c, s)
	}
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable} {
		cut := first[table] // the newest checkpoint among the aged versions 0..4
		eventually(t, 60*time.Second, fmt.Sprintf("%s log cleaned up to %d", table, cut), func() bool {
			n := testutil.ToFloat64(r2.c.m.logVersions.WithLabelValues(table))
			if n > float64(cut) {
				t.Fatalf("%s: %v versions deleted, want %d", table, n, cut)
			}
			return n == float64(cut)
		})
		tbl := delta.OpenTable(e.local, table)
		for v := int64(0); v <= 6; v++ {
			_, err := e.local.Stat(ctx, tbl.CommitKey(v))
			if gone := errors.Is(err, objstore.ErrNotFound); gone != (v < cut) {
				t.Errorf("%s version %d: stat %v; want deleted exactly below the checkpoint at %d", table, v, err, cut)
			}
		}
	}
	e.exactlyOnce(1, 2, 3, 4, 5, 6)
}

func TestLogRetentionConfig(t *testing.T) {
	if got := (Config{}).Defaults().LogRetention; got != 30*24*time.Hour {
		t.Errorf("default log_retention %s, want 720h", got)
	}
	cfg := testConfig("c").Defaults()
	cfg.LogRetention = 30 * time.Minute
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "committer.log_retention") {
		t.Errorf("log_retention 30m: %v", err)
	}
}
