package committer

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/streams"
)

// TestNATSStateBoundedOverAWeek drives the NATS writes of many commits
// through the committer's own code (verdict, high-water key, report and WAL
// purge) plus what the other stages write per commit (a report, a WAL
// frame, a progress fact, a miner snapshot now and then), with no clock:
// one cycle is one commit. Every stream and bucket except the verdicts must
// stay under a bound that does not grow with the number of commits; the
// verdicts are bounded by their TTL (reports per VerdictTTL), which a run
// without a clock cannot reach, so their bucket's TTL is checked instead.
//
// The default run is 1,000 commits (checked at half and at the end: the
// bound does not move); QUARRY_BOUNDS_COMMITS=604800 is a week at the
// default commit interval (about an hour). The miner's snapshot object store
// is bounded too: the miner drops the delete marker each deleted snapshot
// leaves under its unique name (streams.DropSnapshotDeleteMarkers).
func TestNATSStateBoundedOverAWeek(t *testing.T) {
	commits := 1000
	if s := os.Getenv("QUARRY_BOUNDS_COMMITS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 {
			t.Fatalf("QUARRY_BOUNDS_COMMITS %q: want a number >= 100", s)
		}
		commits = n
	}
	// Sizes, not durability, are under test: no fsync per write.
	s, err := natsutil.StartServer(natsutil.ServerConfig{StoreDir: t.TempDir(), Port: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	_, js := natstest.Connect(t, s.ClientURL(), streams.Config{})
	store, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The defaults: purge_reports and purge_wal are on unless turned off.
	c, err := New(testConfig("bounds"), Deps{JS: js, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kvs, err := c.buckets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts := &termState{kvs: kvs, arb: newArbiter(0)}
	pkv, err := js.KeyValue(ctx, streams.ProgressBucket)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(ctx, streams.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	const sources = 3
	var snaps []uint64

	// bound is the most messages and bytes each stream and bucket may hold
	// after any number of commits (a report, a frame and a fact are under
	// 1 KiB here; the WAL and reports hold what lies above the purge point).
	type size struct{ msgs, bytes uint64 }
	bound := map[string]size{
		streams.ReportStream:           {2, 4 << 10},
		streams.WALStream:              {2 * snapEvery, 2 * snapEvery << 10},
		streams.ProgressStream:         {16 * sources, 16 * sources << 10},
		"KV_" + streams.StateBucket:    {2, 2 << 10},
		"KV_" + streams.ProgressBucket: {sources, sources << 10},
		// Two kept snapshots of one chunk and one meta message each.
		"OBJ_" + streams.SnapshotBucket: {4, 4 << 10},
	}
	check := func(at int) {
		t.Helper()
		for name, b := range bound {
			st, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			info, err := st.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs > b.msgs || info.State.Bytes > b.bytes {
				t.Errorf("after %d commits %s holds %d messages, %d bytes; bound %d, %d", at, name, info.State.Msgs, info.State.Bytes, b.msgs, b.bytes)
			}
		}
	}

	for i := uint64(1); i <= uint64(commits); i++ {
		// The stages' writes of one commit.
		frame, err := js.Publish(ctx, streams.LineSubject("acme"), []byte("frame"))
		if err != nil {
			t.Fatal(err)
		}
		r := streams.Report{ID: fmt.Sprintf("e1.%d", i), Encoder: "e1", Batches: []streams.BatchRef{{Seq: frame.Sequence, Prev: i - 1, Records: 1}},
			Files: []streams.FileInfo{{Table: streams.TableRecords, Path: fmt.Sprintf("tenant=acme/part-%d.parquet", i), Size: 1,
				PartitionValues: map[string]string{"tenant": "acme"}}}}
		b, _ := json.Marshal(r)
		msg := nats.NewMsg(streams.ReportSubject("e1"))
		msg.Header.Set(streams.HeaderMsgID, r.ID)
		msg.Data = b
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		src := fmt.Sprintf("src%d", i%sources)
		pb, _ := json.Marshal(streams.Progress{Source: src, FinalizedUntil: time.Unix(int64(i), 0)})
		if _, err := pkv.Put(ctx, src, pb); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, streams.ProgressSubject(src), pb); err != nil {
			t.Fatal(err)
		}
		if i%snapEvery == 0 { // the miner's snapshot, keeping the newest two
			if _, err := obs.PutBytes(ctx, streams.SnapshotName(i), []byte("snap")); err != nil {
				t.Fatal(err)
			}
			if snaps = append(snaps, i); len(snaps) > 2 {
				if err := obs.Delete(ctx, streams.SnapshotName(snaps[0])); err != nil {
					t.Fatal(err)
				}
				if _, err := streams.DropSnapshotDeleteMarkers(ctx, js); err != nil { // as the miner does
					t.Fatal(err)
				}
				snaps = snaps[1:]
			}
		}
		// The committer's: judge, persist the verdict, advance, purge.
		v, err := c.putVerdict(ctx, ts, streams.Verdict{ReportID: r.ID, Accepted: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.arb.apply(&r, ack.Sequence, v); err != nil {
			t.Fatal(err)
		}
		ts.arb.track(ack.Sequence, frame.Sequence)
		w := ts.arb.advance()
		ts.arb.committedUpTo(w, ts.arb.commitSet())
		if err := c.putHighWater(ctx, ts, w); err != nil {
			t.Fatal(err)
		}
		c.purge(ctx, ts)
		if i == uint64(commits)/2 {
			check(int(i))
		}
	}
	check(commits)
	if hw := ts.arb.hw; hw != uint64(commits) {
		t.Fatalf("high-water %d after %d commits", hw, commits)
	}
	if n := len(ts.arb.seen); n > 2 {
		t.Errorf("the arbiter keeps %d processed report messages, want at most 2", n)
	}
	// The term's memory of committed reports (and their files) ends at the
	// purge point of the report stream.
	if n, p := len(ts.arb.committed), len(ts.arb.paths); n > 2 || p > 2 {
		t.Errorf("the arbiter keeps %d committed reports and %d file paths after %d commits, want at most 2 each", n, p, commits)
	}
	vs, err := js.KeyValue(ctx, streams.VerdictsBucket)
	if err != nil {
		t.Fatal(err)
	}
	vst, err := vs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (streams.Config{}).Defaults().VerdictTTL; vst.TTL() != want || vst.History() != 1 {
		t.Errorf("verdicts bucket TTL %s history %d, want %s and 1: verdicts would not be bounded", vst.TTL(), vst.History(), want)
	}
	live := 0
	lister, err := streams.ListSnapshots(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range lister {
		if !o.Deleted {
			live++
		}
	}
	if live > 2 {
		t.Errorf("%d live snapshots, want 2", live)
	}
	if st, err := js.Stream(ctx, "OBJ_"+streams.SnapshotBucket); err == nil {
		t.Logf("snapshot object store after %d commits (%d snapshots taken): %d messages, %d bytes", commits, commits/snapEvery, st.CachedInfo().State.Msgs, st.CachedInfo().State.Bytes)
	}
}

// snapEvery is how many commits lie between two miner snapshots in
// TestNATSStateBoundedOverAWeek.
const snapEvery = 100
