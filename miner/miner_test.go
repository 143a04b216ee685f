package miner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/streams"
)

// mineAll runs a miner over frames on a fresh server until every batch is
// stored and returns the WAL sequences and the raw batches.
func mineAll(t *testing.T, frames []streams.Frame, cfg Config) (*env, []uint64, map[uint64][]byte) {
	t.Helper()
	e := newEnv(t)
	seqs := publishFrames(t, e.js, frames)
	r := startMiner(t, e.js, cfg)
	waitFor(t, 60*time.Second, "every batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == uint64(len(frames)) })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return e, seqs, storedBatches(t, e.js)
}

func TestReconstructEveryLine(t *testing.T) {
	frames := corpus(1, 80)
	_, seqs, raw := mineAll(t, frames, testConfig())
	checkBatches(t, frames, seqs, decodeAll(t, raw))
}

func TestDeterministicAcrossServers(t *testing.T) {
	frames := corpus(2, 50)
	_, seqsA, a := mineAll(t, frames, testConfig())
	_, seqsB, b := mineAll(t, frames, testConfig())
	if !slices.Equal(seqsA, seqsB) {
		t.Fatalf("WAL sequences differ: %v vs %v", seqsA, seqsB)
	}
	for seq, da := range a {
		if !bytes.Equal(da, b[seq]) {
			t.Fatalf("batch %d differs between the two servers", seq)
		}
	}
}

// compare checks that got holds exactly the batches of want, byte for byte.
func compare(t *testing.T, want, got map[uint64][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for seq, w := range want {
		g, ok := got[seq]
		if !ok {
			t.Fatalf("batch %d missing", seq)
		}
		if !bytes.Equal(g, w) {
			gb, _ := streams.DecodeMinedBatch(g)
			wb, _ := streams.DecodeMinedBatch(w)
			t.Fatalf("batch %d differs from the uninterrupted run:\n got  %+v\n want %+v", seq, gb, wb)
		}
	}
}

func snapshotList(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	names, err := snapshotNames(ctxT(t), js)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestRestartGivesSameIDs(t *testing.T) {
	frames := corpus(3, 60)
	_, _, want := mineAll(t, frames, testConfig())

	e := newEnv(t)
	tp := newTap(t, e.srv.URL())
	half := len(frames) / 2
	seqs := publishFrames(t, e.js, frames[:half])
	// One batch in flight at a time, so the stop lands mid-stream.
	slow := testConfig()
	slow.MaxInFlight = 1
	r := startMiner(t, e.js, slow)
	waitFor(t, 30*time.Second, "first batches", func() bool { return tp.seen(seqs[2]) > 0 })
	seqs = append(seqs, publishFrames(t, e.js, frames[half:])...)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	names := snapshotList(t, e.js)
	if len(names) == 0 {
		t.Fatal("no snapshot written on shutdown")
	}
	snapSeq, _ := streams.ParseSnapshotName(names[0])
	waitFor(t, 30*time.Second, "tap", func() bool { return tp.seen(snapSeq) > 0 })
	if tp.seen(snapSeq+1) != 0 {
		t.Fatalf("shutdown snapshot at %d does not match the last published batch", snapSeq)
	}
	t.Logf("stopped after WAL seq %d of %d", snapSeq, len(frames))
	if snapSeq >= uint64(len(frames)) {
		t.Fatalf("the stop did not land mid-stream (WAL seq %d)", snapSeq)
	}

	r = startMiner(t, e.js, testConfig())
	waitFor(t, 60*time.Second, "every batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == uint64(len(frames)) })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := storedBatches(t, e.js)
	compare(t, want, got)
	checkBatches(t, frames, seqs, decodeAll(t, got))
	// A graceful stop replays nothing.
	for seq := range got {
		if n := tp.seen(seq); n != 1 {
			t.Errorf("batch %d published %d times", seq, n)
		}
	}
}

// TestHardStopReplaysIdentically: the newest snapshot is older than the last
// published batch (what a crash leaves: batches after the last snapshot are
// out). The replay republishes those batches byte for byte.
func TestHardStopReplaysIdentically(t *testing.T) {
	frames := corpus(4, 40)
	_, _, want := mineAll(t, frames, testConfig())

	e := newEnv(t)
	tp := newTap(t, e.srv.URL())
	half := len(frames) / 2
	publishFrames(t, e.js, frames[:half])
	cfg := testConfig()
	cfg.SnapshotEvery = 7
	cfg.SnapshotKeep = 10
	r := startMiner(t, e.js, cfg)
	waitFor(t, 60*time.Second, "first half", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == uint64(half) })
	waitFor(t, 30*time.Second, "a periodic snapshot", func() bool { return len(snapshotList(t, e.js)) >= 1 })
	publishFrames(t, e.js, frames[half:])
	waitFor(t, 60*time.Second, "every batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == uint64(len(frames)) })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// Crash simulation: drop the snapshots newer than a periodic one in the
	// middle of the run.
	obs, err := e.js.ObjectStore(ctxT(t), streams.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	names := snapshotList(t, e.js)
	var restoreAt uint64
	for _, n := range names {
		seq, _ := streams.ParseSnapshotName(n)
		if seq > uint64(len(frames))/2 {
			if err := obs.Delete(ctxT(t), n); err != nil {
				t.Fatal(err)
			}
			continue
		}
		restoreAt = max(restoreAt, seq)
	}
	if restoreAt == 0 {
		t.Fatalf("no snapshot in the first half: %v", names)
	}
	last := uint64(len(frames))
	r = startMiner(t, e.js, cfg)
	waitFor(t, 60*time.Second, "replay", func() bool { return tp.seen(last) >= 2 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= last; seq++ {
		wantN := 1
		if seq > restoreAt {
			wantN = 2
		}
		if n := tp.seen(seq); n != wantN {
			t.Errorf("batch %d published %d times, want %d (restored at %d)", seq, n, wantN, restoreAt)
		}
	}
	tp.checkIdentical(t)
	compare(t, want, storedBatches(t, e.js))
	tp.mu.Lock()
	for seq, pubs := range tp.batches {
		if !bytes.Equal(pubs[0], want[seq]) {
			t.Errorf("batch %d differs from the uninterrupted run", seq)
		}
	}
	tp.mu.Unlock()
}

func TestCorruptSnapshotFallsBack(t *testing.T) {
	frames := corpus(5, 30)
	_, _, want := mineAll(t, frames, testConfig())

	e := newEnv(t)
	tp := newTap(t, e.srv.URL())
	publishFrames(t, e.js, frames[:20])
	cfg := testConfig()
	cfg.SnapshotEvery = 5
	r := startMiner(t, e.js, cfg)
	waitFor(t, 30*time.Second, "20 batches", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == 20 })
	waitFor(t, 30*time.Second, "a periodic snapshot", func() bool { return len(snapshotList(t, e.js)) >= 1 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	names := snapshotList(t, e.js)
	if names[0] != streams.SnapshotName(20) {
		t.Fatalf("newest snapshot %s, want %s", names[0], streams.SnapshotName(20))
	}
	older, _ := streams.ParseSnapshotName(names[1])
	obs, err := e.js.ObjectStore(ctxT(t), streams.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := obs.GetBytes(ctxT(t), names[0])
	if err != nil {
		t.Fatal(err)
	}
	blob[len(blob)/2] ^= 0xff
	if _, err := obs.PutBytes(ctxT(t), names[0], blob); err != nil {
		t.Fatal(err)
	}

	publishFrames(t, e.js, frames[20:])
	reg := prometheus.NewRegistry()
	r = startMiner(t, e.js, cfg, Deps{Registerer: reg})
	waitFor(t, 60*time.Second, "every batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == uint64(len(frames)) })
	waitFor(t, 30*time.Second, "replay of the batches after the older snapshot", func() bool { return tp.seen(20) >= 2 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(r.m.metrics.snapshotSkipped); n != 1 {
		t.Errorf("skipped snapshots %v, want 1", n)
	}
	for seq := older + 1; seq <= 20; seq++ {
		if tp.seen(seq) != 2 {
			t.Errorf("batch %d published %d times, want 2 (replayed from %d)", seq, tp.seen(seq), older)
		}
	}
	if tp.seen(older) != 1 {
		t.Errorf("batch %d at the older snapshot replayed", older)
	}
	tp.checkIdentical(t)
	compare(t, want, storedBatches(t, e.js))
}

func TestMalformedFrameAndBadRecords(t *testing.T) {
	e := newEnv(t)
	good := corpus(6, 3)
	bad := streams.Frame{Source: "src-acme", Tenant: "acme", FirstOffset: 1000, NextOffset: 1100, Records: []streams.Record{
		{TS: 1, Text: "user alice login"},
		{TS: 2, Text: "broken \xff\xfe bytes"},
		{TS: 3, Text: "user bob login"},
		{TS: 4, Text: "ok text", Attrs: []streams.Attr{{Key: "k", Value: "\xc3"}}},
	}}
	var seqs []uint64
	seqs = append(seqs, publishFrames(t, e.js, good[:1])...)
	garbage := []byte("this is not a frame")
	seqs = append(seqs, publishRaw(t, e.js, streams.LineSubject("acme"), garbage))
	seqs = append(seqs, publishRaw(t, e.js, streams.CDCSubject("db", "dbo_t"), []byte{'Q', 'F', 1, 0xff}))
	seqs = append(seqs, publishFrames(t, e.js, []streams.Frame{bad})...)
	seqs = append(seqs, publishFrames(t, e.js, good[1:])...)

	reg := prometheus.NewRegistry()
	r := startMiner(t, e.js, testConfig(), Deps{Registerer: reg})
	waitFor(t, 30*time.Second, "every batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == uint64(len(seqs)) })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	batches := decodeAll(t, storedBatches(t, e.js))
	var prev uint64
	for i, b := range batches {
		if b.WALSeq != seqs[i] || b.PrevSeq != prev {
			t.Fatalf("chain broken at %d: seq %d prev %d, want %d prev %d", i, b.WALSeq, b.PrevSeq, seqs[i], prev)
		}
		prev = b.WALSeq
	}
	for _, tc := range []struct {
		i           int
		tenant      string
		records     int
		quarantined uint32
	}{
		{1, "acme", 0, 1},
		{2, InvalidTenant, 0, 1},
		{3, "acme", 3, 1},
	} {
		b := batches[tc.i]
		if b.Tenant != tc.tenant || len(b.Records) != tc.records || b.Quarantined != tc.quarantined {
			t.Errorf("batch %d: tenant %s, %d records, %d quarantined; want %s, %d, %d",
				b.WALSeq, b.Tenant, len(b.Records), b.Quarantined, tc.tenant, tc.records, tc.quarantined)
		}
	}
	if idx := []uint32{batches[3].Records[0].Index, batches[3].Records[1].Index, batches[3].Records[2].Index}; idx[0] != 0 || idx[1] != 1 || idx[2] != 2 {
		t.Errorf("kept record indexes %v, want [0 1 2]: text that is not UTF-8 is mined, not dead-lettered", idx)
	}

	dl := storedMsgs(t, e.js, streams.DeadLetterStream)
	if len(dl) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dl))
	}
	if got := dl[0]; !bytes.Equal(got.Data, garbage) || got.Header.Get(streams.HeaderOrigSeq) != "2" ||
		!strings.Contains(got.Header.Get(streams.HeaderReason), "does not decode") || got.Subject != streams.DeadLetterSubject(Stage) {
		t.Errorf("malformed frame dead letter: subject %s headers %v data %q", got.Subject, got.Header, got.Data)
	}
	for i, want := range []struct {
		index  string
		text   string
		reason string
	}{{"3", bad.Records[3].Text, "value is not valid UTF-8"}} {
		got := dl[2+i]
		f, err := streams.DecodeFrame(got.Data)
		if err != nil {
			t.Fatalf("record dead letter is not a frame: %v", err)
		}
		if len(f.Records) != 1 || f.Records[0].Text != want.text || f.Source != "src-acme" || f.FirstOffset != 1000 ||
			got.Header.Get(HeaderRecordIndex) != want.index || got.Header.Get(streams.HeaderOrigSeq) != "4" ||
			!strings.Contains(got.Header.Get(streams.HeaderReason), want.reason) {
			t.Errorf("record dead letter %d: headers %v frame %+v", i, got.Header, f)
		}
	}
	if n := testutil.ToFloat64(r.m.metrics.quarantined); n != 3 {
		t.Errorf("quarantined metric %v, want 3", n)
	}
}

func TestTemplateEvents(t *testing.T) {
	e := newEnv(t)
	frames := []streams.Frame{
		{Source: "s", Tenant: "acme", FirstOffset: 0, NextOffset: 1, Records: []streams.Record{{Text: "disk sda is full"}, {Text: "disk sdb is full"}}},
		{Source: "s", Tenant: "acme", FirstOffset: 1, NextOffset: 2, Records: []streams.Record{{Text: "disk sdc is full"}, {Text: "disk sdd is full"}}},
		{Source: "t", Tenant: "globex", Records: []streams.Record{{Text: "disk sda is full"}}},
	}
	publishFrames(t, e.js, frames)
	r := startMiner(t, e.js, testConfig())
	waitFor(t, 30*time.Second, "every batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == uint64(len(frames)) })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var defs []streams.TemplateDef
	var walSeqs []uint64
	for _, b := range decodeAll(t, storedBatches(t, e.js)) {
		defs = append(defs, b.Templates...)
		for range b.Templates {
			walSeqs = append(walSeqs, b.WALSeq)
		}
	}
	kinds := map[streams.TemplateKind]int{}
	for _, d := range defs {
		kinds[d.Kind]++
	}
	if kinds[streams.TemplateCreated] < 2 || kinds[streams.TemplateChanged] < 1 {
		t.Fatalf("want created (both tenants) and changed templates, got %+v", defs)
	}
	// Every template definition in the batches (versions and merges) has
	// its event, in order.
	var msgs []*jetstream.RawStreamMsg
	var evs []*streams.TemplateEvent
	for _, m := range storedMsgs(t, e.js, streams.TemplateStream) {
		ev, err := streams.DecodeTemplateEvent(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		msgs, evs = append(msgs, m), append(evs, ev)
	}
	if len(msgs) != len(defs) {
		t.Fatalf("%d template events, %d templates in batches", len(msgs), len(defs))
	}
	for i, m := range msgs {
		ev := evs[i]
		d := defs[i]
		want := streams.TemplateEvent{Kind: d.Kind.String(), ID: d.ID, Tenant: d.Tenant, Version: d.Version,
			Template: d.Text, Previous: d.Previous, Into: d.Into, WALSeq: walSeqs[i]}
		if *ev != want {
			t.Errorf("event %d: %+v, want %+v", i, *ev, want)
		}
		wantID := streams.TemplateMsgID(d.ID, d.Version)
		if d.Kind == streams.TemplateMerged {
			wantID = streams.TemplateMergeMsgID(d.ID, d.Into)
		}
		if m.Subject != streams.TemplateSubject(d.Tenant) || m.Header.Get(streams.HeaderMsgID) != wantID ||
			m.Header.Get(streams.HeaderFormat) != streams.FormatTemplate {
			t.Errorf("event %d: subject %s headers %v", i, m.Subject, m.Header)
		}
	}
	js, _ := json.Marshal(defs)
	t.Logf("templates: %s", js)
}

func TestBadConfigReportsEveryProblem(t *testing.T) {
	cfg := Config{
		Mining:           mining.Config{Similarity: 2, MaxTokens: -1},
		SnapshotEvery:    -1,
		SnapshotInterval: time.Microsecond,
		SnapshotKeep:     -3,
		MaxInFlight:      -1,
		PublishTimeout:   time.Millisecond,
		RetryMin:         time.Second,
		RetryMax:         time.Millisecond * 500,
		FetchMessages:    -1,
		FetchBytes:       10,
		DrainTimeout:     time.Nanosecond,
	}
	_, err := New(cfg, Deps{})
	if err == nil {
		t.Fatal("New accepted a bad config")
	}
	for _, want := range []string{"similarity", "max_tokens", "snapshot_every", "snapshot_interval", "snapshot_keep",
		"max_in_flight", "publish_timeout", "retry_max", "fetch_messages", "fetch_bytes", "drain_timeout", "deps.JS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
	if err := (Config{}).Defaults().Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

func TestReadyAndPosition(t *testing.T) {
	e := newEnv(t)
	m, err := New(testConfig(), Deps{JS: e.js})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Ready(); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("Ready before Run: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitFor(t, 30*time.Second, "ready", func() bool { return m.Ready() == nil })
	if err := m.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
	seqs := publishFrames(t, e.js, corpus(7, 5))
	kv, err := e.js.KeyValue(ctxT(t), streams.PositionsBucket)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "position", func() bool {
		v, err := kv.Get(ctxT(t), streams.KeyMiner)
		return err == nil && string(v.Value()) == "5"
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := m.Ready(); err == nil {
		t.Error("Ready after Run returned nil")
	}
	v, err := kv.Get(ctxT(t), KeySnapshot)
	if err != nil || string(v.Value()) != "5" {
		t.Errorf("snapshot position %v %v, want 5", v, err)
	}
	_ = seqs
}

// TestBackpressureNeverSkips fills the work queue: the miner blocks, says so
// in Ready, and publishes every batch once there is room again.
func TestBackpressureNeverSkips(t *testing.T) {
	e := newEnv(t)
	limitMinedStream(t, e.js, 5)
	frames := corpus(8, 20)
	publishFrames(t, e.js, frames)
	mcfg := testConfig()
	mcfg.BlockedAfter = 200 * time.Millisecond
	r := startMiner(t, e.js, mcfg)
	// The queue is full by construction (8 batches, room for 5); wait for
	// that, not for the first "blocked": on a loaded machine an ack slower
	// than BlockedAfter says "blocked" before the queue is full.
	waitFor(t, 30*time.Second, "a full queue and Ready saying blocked", func() bool {
		err := r.m.Ready()
		return err != nil && strings.Contains(err.Error(), "publishing blocked") && streamMsgs(t, e.js, streams.MinedStream) >= 5
	})
	t.Logf("Ready: %v", r.m.Ready())
	if n := streamMsgs(t, e.js, streams.MinedStream); n != 5 {
		t.Fatalf("%d batches stored, want the limit 5", n)
	}
	limitMinedStream(t, e.js, -1)
	waitFor(t, 30*time.Second, "every batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == uint64(len(frames)) })
	waitFor(t, 30*time.Second, "ready again", func() bool { return r.m.Ready() == nil })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	batches := decodeAll(t, storedBatches(t, e.js))
	seqs := make([]uint64, len(frames))
	for i := range seqs {
		seqs[i] = uint64(i + 1)
	}
	checkBatches(t, frames, seqs, batches)
}

func TestBatchTooLargeStops(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	s, err := e.js.Stream(ctx, streams.MinedStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgSize = 64 << 10
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// 100 KB of parameters: the batch is larger than the frame.
	f := streams.Frame{Source: "s", Tenant: "acme"}
	for i := 0; i < 100; i++ {
		f.Records = append(f.Records, streams.Record{Text: "id " + strings.Repeat(fmt.Sprintf("%08x", i*7919+1), 125)})
	}
	publishFrames(t, e.js, []streams.Frame{f})
	r := startMiner(t, e.js, testConfig())
	select {
	case err := <-r.done:
		r.done <- err
		if !errors.Is(err, ErrBatchTooLarge) {
			t.Fatalf("Run: %v, want ErrBatchTooLarge", err)
		}
		t.Logf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("miner did not stop")
	}
	if n := streamMsgs(t, e.js, streams.MinedStream); n != 0 {
		t.Errorf("%d batches published", n)
	}
	if names := snapshotList(t, e.js); len(names) != 0 {
		t.Errorf("snapshot written past the failed batch: %v", names)
	}
}

func TestNoUsableSnapshotRefusesToStart(t *testing.T) {
	e := newEnv(t)
	obs, err := e.js.ObjectStore(ctxT(t), streams.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{3, 9} {
		if _, err := obs.PutBytes(ctxT(t), streams.SnapshotName(seq), []byte("QS\x01garbage")); err != nil {
			t.Fatal(err)
		}
	}
	publishFrames(t, e.js, corpus(10, 3))
	r := startMiner(t, e.js, testConfig())
	select {
	case err := <-r.done:
		r.done <- err
		if !errors.Is(err, ErrNoUsableSnapshot) || !strings.Contains(err.Error(), streams.SnapshotName(9)) {
			t.Fatalf("Run: %v, want ErrNoUsableSnapshot naming the newest", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("miner did not stop")
	}
	if n := streamMsgs(t, e.js, streams.MinedStream); n != 0 {
		t.Errorf("%d batches published", n)
	}
}

// TestServerRestartMidStream restarts the server under a running miner: the
// consumer is recreated, unacked publishes are retried with their ids, and
// the work queue ends up with exactly the batches of an undisturbed run.
func TestServerRestartMidStream(t *testing.T) {
	frames := corpus(11, 60)
	_, _, want := mineAll(t, frames, testConfig())

	dir := t.TempDir()
	srv := natstest.RunServerAt(t, dir, -1)
	port := srv.Addr().(*net.TCPAddr).Port
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	half := len(frames) / 2
	publishFrames(t, js, frames[:half])
	cfg := testConfig()
	cfg.PublishTimeout = 500 * time.Millisecond
	cfg.BlockedAfter = 200 * time.Millisecond
	r := startMiner(t, js, cfg)
	waitFor(t, 30*time.Second, "some batches", func() bool { return streamMsgs(t, js, streams.MinedStream) >= 5 })
	srv.Shutdown()
	srv.WaitForShutdown()
	waitFor(t, 30*time.Second, "not ready", func() bool { return r.m.Ready() != nil })
	t.Logf("server down: Ready: %v", r.m.Ready())
	natstest.RunServerAt(t, dir, port)
	// Publish the rest once the client has reconnected.
	waitFor(t, 30*time.Second, "reconnect", func() bool {
		_, err := js.AccountInfo(ctxT(t))
		return err == nil
	})
	publishFrames(t, js, frames[half:])
	waitFor(t, 60*time.Second, "every batch", func() bool { return streamMsgs(t, js, streams.MinedStream) == uint64(len(frames)) })
	waitFor(t, 30*time.Second, "every ack", func() bool {
		return testutil.ToFloat64(r.m.metrics.position) == float64(len(frames))
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if names := snapshotList(t, js); len(names) == 0 || names[0] != streams.SnapshotName(uint64(len(frames))) {
		t.Errorf("final snapshot missing: %v", names)
	}
	compare(t, want, storedBatches(t, js))
}

func TestWALRecreatedBehindSnapshot(t *testing.T) {
	e := newEnv(t)
	publishFrames(t, e.js, corpus(12, 3))
	r := startMiner(t, e.js, testConfig())
	waitFor(t, 30*time.Second, "batches", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == 3 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteStream(ctxT(t), streams.WALStream); err != nil {
		t.Fatal(err)
	}
	if err := streams.Ensure(ctxT(t), e.js, streams.Config{}.Defaults()); err != nil {
		t.Fatal(err)
	}
	publishFrames(t, e.js, corpus(13, 1))
	r = startMiner(t, e.js, testConfig())
	select {
	case err := <-r.done:
		r.done <- err
		if !errors.Is(err, ErrWALBehind) {
			t.Fatalf("Run: %v, want ErrWALBehind", err)
		}
		t.Logf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("miner did not stop")
	}
}

// TestDeadLetterStreamMissing: without the dead-letter stream the miner
// waits (and says so) instead of dropping the bad frame, then goes on.
func TestDeadLetterStreamMissing(t *testing.T) {
	e := newEnv(t)
	if err := e.js.DeleteStream(ctxT(t), streams.DeadLetterStream); err != nil {
		t.Fatal(err)
	}
	publishRaw(t, e.js, streams.LineSubject("acme"), []byte("garbage"))
	publishFrames(t, e.js, corpus(14, 2))
	r := startMiner(t, e.js, testConfig())
	waitFor(t, 30*time.Second, "blocked", func() bool {
		err := r.m.Ready()
		return err != nil && strings.Contains(err.Error(), "dead-lettering blocked")
	})
	if n := streamMsgs(t, e.js, streams.MinedStream); n != 0 {
		t.Fatalf("%d batches published past a frame that was not dead-lettered", n)
	}
	if err := streams.Ensure(ctxT(t), e.js, streams.Config{}.Defaults()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == 3 })
	waitFor(t, 30*time.Second, "ready", func() bool { return r.m.Ready() == nil })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, e.js, streams.DeadLetterStream); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
}

// TestStopWhileBlocked: a stop while the work queue refuses batches returns
// within the drain timeout, writes no snapshot past the acked batches, and
// a restart publishes the rest.
func TestStopWhileBlocked(t *testing.T) {
	e := newEnv(t)
	limitMinedStream(t, e.js, 3)
	frames := corpus(15, 10)
	publishFrames(t, e.js, frames)
	cfg := testConfig()
	cfg.DrainTimeout = 500 * time.Millisecond
	cfg.MaxInFlight = 2
	cfg.BlockedAfter = 100 * time.Millisecond
	r := startMiner(t, e.js, cfg)
	waitFor(t, 30*time.Second, "blocked", func() bool {
		err := r.m.Ready()
		return err != nil && strings.Contains(err.Error(), "publishing blocked")
	})
	start := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// Loose for a loaded machine: a stop that ignores the drain timeout
	// waits for ever (the full queue never drains), which r.stop's 30s
	// catches too; this bound only says it returned in about the timeout.
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("stop took %s with a drain timeout of %s", d, cfg.DrainTimeout)
	}
	for _, n := range snapshotList(t, e.js) {
		if seq, _ := streams.ParseSnapshotName(n); seq > 3 {
			t.Errorf("snapshot %s past the 3 acked batches", n)
		}
	}
	limitMinedStream(t, e.js, -1)
	r = startMiner(t, e.js, testConfig())
	waitFor(t, 30*time.Second, "every batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == uint64(len(frames)) })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	seqs := make([]uint64, len(frames))
	for i := range seqs {
		seqs[i] = uint64(i + 1)
	}
	checkBatches(t, frames, seqs, decodeAll(t, storedBatches(t, e.js)))
}

// TestModelMetrics: the per-tenant cap's evictions and the oversized lines
// are exported, so an operator sees memory being bounded.
func TestModelMetrics(t *testing.T) {
	e := newEnv(t)
	var recs []streams.Record
	for i := 0; i < 20; i++ {
		// Twenty different shapes: more than the cap of 5 templates.
		recs = append(recs, streams.Record{TS: int64(i), Text: strings.Repeat("word ", i+1) + "end"})
	}
	recs = append(recs, streams.Record{TS: 99, Text: strings.Repeat("x", 200<<10)}) // over max_line_bytes
	publishFrames(t, e.js, []streams.Frame{{Source: "s", Tenant: "acme", NextOffset: 1, Records: recs}})
	cfg := testConfig()
	cfg.Mining.MaxTemplatesPerTenant = 5
	r := startMiner(t, e.js, cfg, Deps{Registerer: prometheus.NewRegistry()})
	waitFor(t, 30*time.Second, "the batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == 1 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(r.m.metrics.evicted); n < 15 {
		t.Fatalf("evicted templates %v, want at least 15 of 20 shapes over a cap of 5", n)
	}
	if n := testutil.ToFloat64(r.m.metrics.oversized); n != 1 {
		t.Fatalf("oversized lines %v, want 1", n)
	}
	if n := testutil.ToFloat64(r.m.metrics.templates); n > 5 {
		t.Fatalf("live templates %v over the cap of 5", n)
	}
}

// TestMergeEvents: when the engine finds several templates to be one, the
// batch carries a merged definition per retired template, naming the
// survivor (for the lake's templates table), and the miner publishes a
// "merged" event for subscribers; records keep the (id, version) they were
// mined with.
func TestMergeEvents(t *testing.T) {
	e := newEnv(t)
	var recs []streams.Record
	for _, w := range []string{"alpha", "beta", "gamma", "delta"} {
		recs = append(recs, streams.Record{Text: "service " + w + " started"})
	}
	publishFrames(t, e.js, []streams.Frame{{Source: "s", Tenant: "acme", NextOffset: 1, Records: recs}})
	r := startMiner(t, e.js, testConfig())
	waitFor(t, 30*time.Second, "the batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == 1 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var merged []streams.TemplateEvent
	for _, m := range storedMsgs(t, e.js, streams.TemplateStream) {
		ev, err := streams.DecodeTemplateEvent(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind != "merged" {
			continue
		}
		if m.Header.Get(streams.HeaderMsgID) != streams.TemplateMergeMsgID(ev.ID, ev.Into) {
			t.Errorf("merge event id header %q", m.Header.Get(streams.HeaderMsgID))
		}
		merged = append(merged, *ev)
	}
	if len(merged) != 2 {
		t.Fatalf("%d merge events, want 2 (beta and gamma into alpha): %+v", len(merged), merged)
	}
	for _, ev := range merged {
		if ev.Into != 1 || ev.Template != "service <*> started" || !strings.HasPrefix(ev.Previous, "service ") || ev.WALSeq != 1 {
			t.Errorf("merge event %+v", ev)
		}
	}
	var defs []streams.TemplateDef
	for _, b := range decodeAll(t, storedBatches(t, e.js)) {
		for _, d := range b.Templates {
			if d.Kind == streams.TemplateMerged {
				defs = append(defs, d)
			}
		}
	}
	if len(defs) != 2 {
		t.Fatalf("%d merged definitions in the batch, want 2: %+v", len(defs), defs)
	}
	for i, d := range defs {
		if d.ID != merged[i].ID || d.Into != merged[i].Into || d.Text != merged[i].Template || d.Previous != merged[i].Previous {
			t.Errorf("merged definition %+v does not match its event %+v", d, merged[i])
		}
	}
	if n := testutil.ToFloat64(r.m.metrics.templateEvents.WithLabelValues("merged")); n != 2 {
		t.Errorf("merged metric %v", n)
	}
}

// limitMinedStream lets the work queue hold at most n batches (-1: no
// limit), so that the miner meets a full queue.
func limitMinedStream(t *testing.T, js jetstream.JetStream, n int64) {
	t.Helper()
	ctx := ctxT(t)
	s, err := js.Stream(ctx, streams.MinedStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgs = n
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// A created or changed template carries the kind of each parameter (the
// mask that made it), and every record its ts source, as the engine and the
// frame say.
func TestTemplateKindsAndTSSource(t *testing.T) {
	cfg := testConfig()
	cfg.Mining.Masks = []mining.Mask{{Name: "ipv4", Regex: `\b\d{1,3}(\.\d{1,3}){3}\b`}}
	frames := []streams.Frame{{Source: "src-acme", Tenant: "acme", NextOffset: 3, Records: []streams.Record{
		{TS: 10, TSSource: streams.TSEvent, Text: "conn from 10.0.0.1 accepted"},
		{TS: 10, TSSource: streams.TSPrevious, Text: "conn from 10.0.0.2 accepted"},
		{TS: 11, TSSource: streams.TSRead, Text: "conn from 10.0.0.3 refused"},
	}}}
	_, _, raw := mineAll(t, frames, cfg)
	batches := decodeAll(t, raw)
	if len(batches) != 1 {
		t.Fatalf("%d batches", len(batches))
	}
	b := batches[0]
	for i, r := range b.Records {
		if want := frames[0].Records[r.Index]; r.TS != want.TS || r.TSSource != want.TSSource {
			t.Errorf("record %d: ts %d %s, want %d %s", i, r.TS, r.TSSource, want.TS, want.TSSource)
		}
	}
	var defs int
	for _, d := range b.Templates {
		if d.Kind == streams.TemplateMerged {
			if d.Kinds != nil {
				t.Errorf("merge of %d carries kinds %q", d.ID, d.Kinds)
			}
			continue
		}
		defs++
		if n := strings.Count(d.Text, "<*>"); len(d.Kinds) != n {
			t.Fatalf("template %d v%d %q: kinds %q, want one per parameter", d.ID, d.Version, d.Text, d.Kinds)
		}
		if !slices.Contains(d.Kinds, "ipv4") {
			t.Errorf("template %d v%d %q: kinds %q lack the mask's ipv4", d.ID, d.Version, d.Text, d.Kinds)
		}
	}
	if defs == 0 {
		t.Fatal("no template defined")
	}
}

// TestSnapshotDeleteMarkersDropped: the snapshots the miner deletes leave
// no delete markers behind, so the snapshot bucket holds the kept
// snapshots only, however many were taken.
func TestSnapshotDeleteMarkersDropped(t *testing.T) {
	frames := corpus(3, 400)
	e := newEnv(t)
	cfg := testConfig()
	cfg.SnapshotEvery = 5
	cfg.SnapshotKeep = 2
	r := startMiner(t, e.js, cfg)
	// One frame at a time until six snapshots were seen (each written
	// after SnapshotEvery frames; one that fails is written again later).
	seen, next := map[string]bool{}, 0
	waitFor(t, 120*time.Second, "six snapshots", func() bool {
		if next < len(frames) {
			publishFrames(t, e.js, frames[next:next+1])
			next++
		}
		for _, n := range snapshotList(t, e.js) {
			seen[n] = true
		}
		return len(seen) >= 6
	})
	st, err := e.js.Stream(ctxT(t), "OBJ_"+streams.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	// Each snapshot is a chunk and a meta message: once the last write is
	// done, only the kept ones remain, and no marker of a deleted one.
	var state string
	waitFor(t, 30*time.Second, "the bucket down to the kept snapshots", func() bool {
		all, err := streams.ListSnapshots(ctxT(t), e.js)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		markers := 0
		for _, o := range all {
			if o.Deleted {
				markers++
			}
		}
		state = fmt.Sprintf("%d objects (%d delete markers), %d messages of %d written", len(all), markers, info.State.Msgs, info.State.LastSeq)
		return markers == 0 && len(all) <= cfg.SnapshotKeep && info.State.Msgs <= 2*uint64(cfg.SnapshotKeep)
	})
	t.Log(state)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
