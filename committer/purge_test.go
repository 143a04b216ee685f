package committer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quarrylake/quarry/streams"
)

// TestPurgeWALKeepsOldestSnapshotRestorable: the miner falls back to an
// older snapshot when the newest is corrupt, so the WAL is purged below the
// oldest stored snapshot, never above it (it used to be the newest: a miner
// falling back to snapshot 2 found WAL 3..5 purged and skipped them, giving
// template ids a fault-free run does not).
func TestPurgeWALKeepsOldestSnapshotRestorable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 8 {
		if _, err := e.js.Publish(ctx, streams.LineSubject("acme"), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	obs, err := e.js.ObjectStore(ctx, streams.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{2, 5} { // 5 may be the corrupt one
		if _, err := obs.PutBytes(ctx, streams.SnapshotName(seq), []byte("snap")); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig("a")
	// PurgeWAL is on by default.
	e.publish(e.encode("w.1", chain(1, 2, 3, 4, 5, 6)...))
	a := e.start(cfg, nil)
	e.waitHW(a.c, 6)
	first := func() uint64 { return walFirstSeq(t, e) }
	eventually(t, 30*time.Second, "WAL purged below the oldest snapshot", func() bool { return first() >= 3 })
	e.advancePast(a.c, 6) // a later advance must not purge further
	if f := first(); f != 3 {
		t.Fatalf("WAL starts at %d: purged above the oldest snapshot 2 (want first seq 3)", f)
	}
	a.stop(t)
}

// TestPurgeWALKeepsProducerFloor: frames a producer published after its
// saved position (its floor) stay in the WAL, so its restart can read them
// back instead of publishing them twice; a floor older than FloorMaxAge no
// longer holds the purge back.
func TestPurgeWALKeepsProducerFloor(t *testing.T) {
	for _, tt := range []struct {
		name      string
		maxAge    time.Duration
		wantFirst uint64
	}{
		{"fresh floor holds", time.Hour, 4},
		{"stale floor ignored", time.Nanosecond, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			for i := range 8 {
				if _, err := e.js.Publish(ctx, streams.LineSubject("acme"), []byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
			}
			obs, err := e.js.ObjectStore(ctx, streams.SnapshotBucket)
			if err != nil {
				t.Fatal(err)
			}
			// snapshot 6: the high-water (6, then 8 after advancePast) never
			// limits the purge, so the stale case's 7 holds after the later
			// advances too
			if _, err := obs.PutBytes(ctx, streams.SnapshotName(6), []byte("snap")); err != nil {
				t.Fatal(err)
			}
			kv, err := e.js.KeyValue(ctx, streams.PositionsBucket)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(ctx, streams.FloorKey("gen-acme"), []byte("4")); err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(ctx, streams.FloorKey("gen-globex"), []byte("9")); err != nil {
				t.Fatal(err)
			}
			cfg := testConfig("a")
			// PurgeWAL is on by default.
			cfg.FloorMaxAge = tt.maxAge
			e.publish(e.encode("w.1", chain(1, 2, 3, 4, 5, 6)...))
			a := e.start(cfg, nil)
			e.waitHW(a.c, 6)
			first := func() uint64 { return walFirstSeq(t, e) }
			eventually(t, 30*time.Second, "WAL purged", func() bool { return first() >= tt.wantFirst })
			e.advancePast(a.c, 6) // a later advance must not purge further
			if f := first(); f != tt.wantFirst {
				t.Fatalf("WAL starts at %d, want %d", f, tt.wantFirst)
			}
			a.stop(t)
		})
	}
}

// advancePast drives two more advances (hw+1, then hw+2) through c and
// waits for them: a barrier instead of a sleep. The purge after an advance
// runs after the high-water is published, but before the next advance in
// the same loop, so once hw+2 is visible every purge after hw and hw+1 is
// done, and a purge going too far would show in the WAL now.
func (e *env) advancePast(c *Committer, hw uint64) {
	e.t.Helper()
	for _, s := range []uint64{hw + 1, hw + 2} {
		e.publish(e.encode(fmt.Sprintf("barrier.%d", s), batch{s, s - 1}))
		e.waitHW(c, s)
	}
}

// walFirstSeq is the WAL's first stored sequence.
func walFirstSeq(t *testing.T, e *env) uint64 {
	t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, streams.WALStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.FirstSeq
}

// TestPurgeDefaults: both purges are on unless the config turns them off.
func TestPurgeDefaults(t *testing.T) {
	d := Config{}.Defaults()
	if !d.purgeWAL() || !d.purgeReports() || d.PurgeWAL == nil || !*d.PurgeWAL || d.PurgeReports == nil || !*d.PurgeReports {
		t.Fatalf("defaults: purge_wal %v, purge_reports %v; want both on", d.PurgeWAL, d.PurgeReports)
	}
	off := false
	d = Config{PurgeWAL: &off, PurgeReports: &off}.Defaults()
	if d.purgeWAL() || d.purgeReports() {
		t.Fatal("purge_wal: false and purge_reports: false were overridden by the defaults")
	}
}
