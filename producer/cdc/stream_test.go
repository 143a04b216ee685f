package cdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/syncbuf"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/internal/floortest"
	"github.com/quarrylake/quarry/producer/sqlserver"
	"github.com/quarrylake/quarry/producer/sqlserver/memsource"
	"github.com/quarrylake/quarry/streams"
)

var cdcCols = []sqlserver.Column{{Name: "id", Type: "int"}, {Name: "msg", Type: "nvarchar"}, {Name: "level", Type: "varchar"}}

type cdcEnv struct {
	js  jetstream.JetStream
	db  *memsource.DB
	clk *cdcClock
}

// cdcClock is a settable clock for commit times.
type cdcClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *cdcClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func newCDCEnv(t testing.TB, tables ...string) *cdcEnv {
	t.Helper()
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	db := memsource.New()
	clk := &cdcClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	db.SetClock(clk.now)
	for _, tb := range tables {
		db.CreateTable("dbo", tb, cdcCols, "id")
		db.EnableCDC("dbo", tb, "dbo_"+tb)
	}
	return &cdcEnv{js: js, db: db, clk: clk}
}

func cdcTestConfig(cis ...string) Config {
	return Config{
		Database:            "shop",
		CaptureInstances:    cis,
		TableDefaults:       TableConfig{Text: []string{"msg"}, Attrs: []string{"level"}},
		PollInterval:        10 * time.Millisecond,
		HeartbeatInterval:   50 * time.Millisecond,
		SchemaCheckInterval: 10 * time.Millisecond,
		RetryBackoff:        5 * time.Millisecond,
		MaxRetryBackoff:     20 * time.Millisecond,
		PageSize:            7,
		SnapshotChunk:       5,
		FrameRecords:        10,
		Publisher:           producer.PublisherConfig{AckTimeout: 2 * time.Second},
	}
}

func (e *cdcEnv) insert(table string, from, n int) sqlserver.LSN {
	tx := e.db.Begin()
	for i := from; i < from+n; i++ {
		tx.Insert("dbo", table, map[string]any{"id": i, "msg": fmt.Sprintf("%s row %d", table, i), "level": "info"})
	}
	return tx.Commit()
}

func cdcFrames(t testing.TB, js jetstream.JetStream, subject string) []*streams.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		t.Fatal(err)
	}
	var out []*streams.Frame
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := streams.DecodeFrame(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
		seq = m.Sequence + 1
	}
}

func cdcRecords(t testing.TB, js jetstream.JetStream, subject string) []streams.Record {
	var out []streams.Record
	for _, f := range cdcFrames(t, js, subject) {
		out = append(out, f.Records...)
	}
	return out
}

func cdcAttr(r streams.Record, k string) string {
	for _, a := range r.Attrs {
		if a.Key == k {
			return a.Value
		}
	}
	return ""
}

// cdcTexts are the records' texts, each prefixed with its operation.
func cdcTexts(recs []streams.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = cdcAttr(r, "_op") + ":" + r.Text
	}
	return out
}

// cdcSentinel is the barrier for "nothing extra was published": it
// inserts row id into table orders and waits until want+1 records are on
// subj. A stream publishes in LSN order, so whatever it would publish
// twice (or extra) before the sentinel is in the WAL by then, and the
// caller's exact count sees it; no sleep, and the sentinel shows the
// stream still works.
func cdcSentinel(t testing.TB, e *cdcEnv, subj string, id, want int) {
	t.Helper()
	e.insert("orders", id, 1)
	text := fmt.Sprintf("orders row %d", id)
	cdcWait(t, "the sentinel "+text, func() bool {
		recs := cdcRecords(t, e.js, subj)
		return len(recs) > want && slices.ContainsFunc(recs, func(r streams.Record) bool { return r.Text == text })
	})
}

func cdcWait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func cdcStart(t testing.TB, e *cdcEnv, cfg Config) *Set {
	t.Helper()
	var log *slog.Logger
	if os.Getenv("CDC_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	g, err := Start(context.Background(), cfg, Deps{JS: e.js, Source: e.db, Log: log})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { g.Stop() })
	return g
}

func savedState(t testing.TB, js jetstream.JetStream, key string) state {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), streams.PositionsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("position %s: %v", key, err)
	}
	var st state
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func cdcNoDuplicates(t testing.TB, recs []streams.Record) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range recs {
		k := cdcAttr(r, "_op") + cdcAttr(r, "_lsn") + cdcAttr(r, "_cmd") + cdcAttr(r, "_seqval") + r.Text
		if seen[k] {
			t.Fatalf("duplicate record %s %q", cdcAttr(r, "_lsn"), r.Text)
		}
		seen[k] = true
	}
}

func TestCDCSnapshotThenStream(t *testing.T) {
	e := newCDCEnv(t)
	e.db.CreateTable("dbo", "orders", cdcCols, "id")
	// Rows that exist before CDC is enabled only reach the WAL by the snapshot.
	tx := e.db.Begin()
	for i := 0; i < 12; i++ {
		tx.Insert("dbo", "orders", map[string]any{"id": i, "msg": fmt.Sprintf("old %d", i), "level": "warn"})
	}
	tx.Commit()
	e.db.EnableCDC("dbo", "orders", "dbo_orders")
	g := cdcStart(t, e, cdcTestConfig("dbo_orders"))
	subj := streams.CDCSubject("shop", "dbo_orders")
	cdcWait(t, "snapshot", func() bool { return len(cdcRecords(t, e.js, subj)) == 12 })
	e.db.Begin().Update("dbo", "orders", []any{3}, map[string]any{"msg": "changed 3"}).Delete("dbo", "orders", 4).
		Insert("dbo", "orders", map[string]any{"id": 100, "msg": "new 100", "level": nil}).Commit()
	cdcWait(t, "changes", func() bool { return len(cdcRecords(t, e.js, subj)) == 16 })
	recs := cdcRecords(t, e.js, subj)
	got := cdcTexts(recs)
	want := []string{}
	for i := 0; i < 12; i++ {
		want = append(want, fmt.Sprintf("snapshot:old %d", i))
	}
	want = append(want, "update_before:old 3", "update_after:changed 3", "delete:old 4", "insert:new 100")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Attributes: operation, LSN, seqval, command id, key, configured attrs.
	r := recs[13]
	if cdcAttr(r, "id") != "3" || cdcAttr(r, "level") != "warn" || cdcAttr(r, "_cmd") != "1" || !strings.HasPrefix(cdcAttr(r, "_lsn"), "0x") || cdcAttr(r, "_seqval") == "" {
		t.Errorf("attrs %v", r.Attrs)
	}
	if r.Attrs[0].Key != "_op" || r.Attrs[1].Key != "_lsn" {
		t.Errorf("attr order %v", r.Attrs)
	}
	if cdcAttr(recs[15], "level") != "" { // NULL attribute left out
		t.Errorf("null attr %v", recs[15].Attrs)
	}
	if recs[0].TS == 0 || recs[13].TS <= recs[0].TS {
		t.Errorf("ts %d %d", recs[0].TS, recs[13].TS)
	}
	// Every record keeps its transaction's commit time (the test clock's,
	// days before the read time), as event time; the four changes of one
	// transaction share it.
	clockStart := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i, r := range recs {
		ts := time.Unix(0, r.TS)
		if r.TSSource != streams.TSEvent || ts.Before(clockStart) || ts.After(clockStart.Add(time.Hour)) {
			t.Errorf("record %d: ts %s (%s), want a commit time of the test clock, event", i, ts.UTC(), r.TSSource)
		}
	}
	for i := 13; i < 16; i++ {
		if recs[i].TS != recs[12].TS {
			t.Errorf("record %d of the transaction: ts %d, record 12 %d", i, recs[i].TS, recs[12].TS)
		}
	}
	frames := cdcFrames(t, e.js, subj)
	var next uint64
	for _, f := range frames {
		if f.Tenant != "dbo_orders" || f.Source != "cdc.shop.dbo_orders" || f.FirstOffset != next {
			t.Fatalf("frame %+v", f)
		}
		next = f.NextOffset
	}
	st := g.Streams()[0]
	cdcWait(t, "acked stats", func() bool { return st.Stats().Rows == 16 })
}

func TestCDCBigTransactionPagesInOrder(t *testing.T) {
	e := newCDCEnv(t, "orders")
	cfg := cdcTestConfig("dbo_orders")
	cfg.TableDefaults.Bootstrap = BootstrapNever
	cdcStart(t, e, cfg)
	lsn := e.insert("orders", 0, 250) // one LSN, 250 seqvals, pages of 7
	subj := streams.CDCSubject("shop", "dbo_orders")
	cdcWait(t, "250 rows", func() bool { return len(cdcRecords(t, e.js, subj)) >= 250 })
	cdcSentinel(t, e, subj, 250, 250)
	recs := cdcRecords(t, e.js, subj)
	if len(recs) != 251 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs[:250] {
		if r.Text != fmt.Sprintf("orders row %d", i) || cdcAttr(r, "_lsn") != lsn.String() {
			t.Fatalf("record %d: %q %s", i, r.Text, cdcAttr(r, "_lsn"))
		}
	}
	cdcNoDuplicates(t, recs)
	for _, f := range cdcFrames(t, e.js, subj) {
		if len(f.Records) > 10 {
			t.Fatalf("frame of %d records", len(f.Records))
		}
	}
}

func TestCDCRestartResumesExactly(t *testing.T) {
	e := newCDCEnv(t, "orders")
	cfg := cdcTestConfig("dbo_orders")
	subj := streams.CDCSubject("shop", "dbo_orders")
	e.insert("orders", 0, 20)
	g := cdcStart(t, e, cfg)
	cdcWait(t, "first 20", func() bool { return len(cdcRecords(t, e.js, subj)) == 20 })
	g.Stop()
	if errs := g.Wait(); len(errs) != 0 {
		t.Fatal(errs)
	}
	st := savedState(t, e.js, "cdc.shop.dbo_orders")
	if st.Rows != 20 || !st.Pos.TxEnd || st.Snapshot != nil {
		t.Fatalf("saved state %+v", st)
	}
	for i := 20; i < 50; i += 10 {
		e.insert("orders", i, 10)
	}
	g = cdcStart(t, e, cfg)
	cdcWait(t, "50", func() bool { return len(cdcRecords(t, e.js, subj)) >= 50 })
	g.Stop()
	recs := cdcRecords(t, e.js, subj)
	if len(recs) != 50 {
		t.Fatalf("%d records", len(recs))
	}
	cdcNoDuplicates(t, recs)
}

// A crash after frames were acked but before the position was saved: the
// restart finds them in the WAL and republishes nothing, even when the
// restart would cut the frames differently.
func TestCDCCrashBeforePositionSave(t *testing.T) {
	e := newCDCEnv(t, "orders")
	cfg := cdcTestConfig("dbo_orders")
	cfg.TableDefaults.Bootstrap = BootstrapNever
	subj := streams.CDCSubject("shop", "dbo_orders")
	e.insert("orders", 0, 5)
	g := cdcStart(t, e, cfg)
	cdcWait(t, "5", func() bool { return len(cdcRecords(t, e.js, subj)) == 5 })
	g.Stop()
	old := savedState(t, e.js, "cdc.shop.dbo_orders")
	e.insert("orders", 5, 3) // a short frame at the head of the log...
	g = cdcStart(t, e, cfg)
	cdcWait(t, "8", func() bool { return len(cdcRecords(t, e.js, subj)) == 8 })
	g.Stop()
	// ...whose position save is lost.
	kv, _ := e.js.KeyValue(context.Background(), streams.PositionsBucket)
	b, _ := json.Marshal(old)
	if _, err := kv.Put(context.Background(), "cdc.shop.dbo_orders", b); err != nil {
		t.Fatal(err)
	}
	e.insert("orders", 8, 4) // the restart would now cut 5..11 as one frame
	g = cdcStart(t, e, cfg)
	cdcWait(t, "12", func() bool { return len(cdcRecords(t, e.js, subj)) >= 12 })
	cdcSentinel(t, e, subj, 12, 12)
	g.Stop()
	recs := cdcRecords(t, e.js, subj)
	if len(recs) != 13 {
		t.Fatalf("%d records: %v", len(recs), cdcTexts(recs))
	}
	cdcNoDuplicates(t, recs)
}

func TestCDCTwoCaptureInstancesAndPurgeIsolation(t *testing.T) {
	e := newCDCEnv(t, "a", "b")
	cfg := cdcTestConfig("dbo_a", "dbo_b")
	g := cdcStart(t, e, cfg)
	sa, sb := streams.CDCSubject("shop", "dbo_a"), streams.CDCSubject("shop", "dbo_b")
	e.insert("a", 0, 3)
	e.insert("b", 0, 4)
	cdcWait(t, "both", func() bool { return len(cdcRecords(t, e.js, sa)) == 3 && len(cdcRecords(t, e.js, sb)) == 4 })
	for _, r := range cdcRecords(t, e.js, sa) {
		if !strings.HasPrefix(r.Text, "a row") {
			t.Fatalf("a holds %q", r.Text)
		}
	}
	for _, f := range cdcFrames(t, e.js, sb) {
		for _, r := range f.Records {
			if !strings.HasPrefix(r.Text, "b row") || f.Tenant != "dbo_b" {
				t.Fatalf("b holds %q tenant %s", r.Text, f.Tenant)
			}
		}
	}
	// The cleanup job purges a's changes before its stream reads them.
	var once sync.Once
	e.db.Hook(memsource.MethodChanges, func(ci string) {
		if ci == "dbo_a" {
			once.Do(func() { e.db.CleanupInstance("dbo_a", e.db.Tick()) })
		}
	})
	e.insert("a", 3, 2)
	sta := g.Streams()[0]
	cdcWait(t, "a stopped", func() bool { err := sta.Ready(); return err != nil && strings.Contains(err.Error(), "stopped") })
	// b goes on.
	e.insert("b", 4, 2)
	cdcWait(t, "b continues", func() bool { return len(cdcRecords(t, e.js, sb)) == 6 })
	g.Stop()
	errs := g.Wait()
	if len(errs) != 1 || !errors.Is(errs["dbo_a"], ErrPurgedRange) {
		t.Fatalf("errors %v", errs)
	}
	msg := errs["dbo_a"].Error()
	if !strings.Contains(msg, "dbo_a") || !strings.Contains(msg, "saved LSN 0x") || !strings.Contains(msg, "minimum LSN 0x") {
		t.Fatalf("error text %q", msg)
	}
	if len(cdcRecords(t, e.js, sa)) != 3 {
		t.Fatal("a published past a purged range")
	}
	// A restart fails again at once (the position stays).
	g2, err := Start(context.Background(), cfg, Deps{JS: e.js, Source: e.db})
	if err != nil {
		t.Fatal(err)
	}
	cdcWait(t, "a fails again", func() bool {
		err := g2.Streams()[0].Ready()
		return err != nil && strings.Contains(err.Error(), "stopped")
	})
	g2.Stop()
	if errs := g2.Wait(); !errors.Is(errs["dbo_a"], ErrPurgedRange) || errs["dbo_b"] != nil {
		t.Fatalf("restart errors %v", errs)
	}
}

func TestCDCPurgedWhenNeededSnapshotsAgain(t *testing.T) {
	e := newCDCEnv(t, "a")
	cfg := cdcTestConfig("dbo_a")
	cfg.TableDefaults.Bootstrap = BootstrapWhenNeeded
	subj := streams.CDCSubject("shop", "dbo_a")
	e.insert("a", 0, 3)
	g := cdcStart(t, e, cfg)
	cdcWait(t, "snapshot", func() bool { return len(cdcRecords(t, e.js, subj)) == 3 })
	g.Stop()
	e.insert("a", 3, 2)
	e.db.Cleanup(e.db.Tick()) // purged while stopped
	g = cdcStart(t, e, cfg)
	cdcWait(t, "resnapshot", func() bool { return len(cdcRecords(t, e.js, subj)) == 8 })
	e.insert("a", 5, 1)
	cdcWait(t, "stream after resnapshot", func() bool { return len(cdcRecords(t, e.js, subj)) == 9 })
	g.Stop()
	if errs := g.Wait(); len(errs) != 0 {
		t.Fatal(errs)
	}
	got := cdcTexts(cdcRecords(t, e.js, subj))
	want := "snapshot:a row 0,snapshot:a row 1,snapshot:a row 2,snapshot:a row 0,snapshot:a row 1,snapshot:a row 2,snapshot:a row 3,snapshot:a row 4,insert:a row 5"
	if strings.Join(got, ",") != want {
		t.Fatalf("got %v", got)
	}
}

func TestCDCSchemaChangeTakeover(t *testing.T) {
	e := newCDCEnv(t, "orders")
	cfg := cdcTestConfig("dbo_orders")
	cfg.TableDefaults.Attrs = []string{"level"}
	s1, s2 := streams.CDCSubject("shop", "dbo_orders"), streams.CDCSubject("shop", "dbo_orders_v2")
	g := cdcStart(t, e, cfg)
	e.insert("orders", 0, 3)
	cdcWait(t, "v1", func() bool { return len(cdcRecords(t, e.js, s1)) == 3 })
	// Schema change: a column is added and a second capture instance made.
	e.db.AddColumn("dbo", "orders", sqlserver.Column{Name: "region", Type: "varchar"})
	e.insert("orders", 3, 2) // before v2 exists: only in v1
	e.db.EnableCDC("dbo", "orders", "dbo_orders_v2")
	tx := e.db.Begin()
	tx.Insert("dbo", "orders", map[string]any{"id": 5, "msg": "orders row 5", "level": "info", "region": "eu"})
	tx.Commit() // in both: must come once, from v2
	cdcWait(t, "v2", func() bool { return len(cdcRecords(t, e.js, s2)) == 1 })
	e.insert("orders", 6, 2)
	cdcWait(t, "v2 more", func() bool { return len(cdcRecords(t, e.js, s2)) == 3 })
	g.Stop()
	r1, r2 := cdcRecords(t, e.js, s1), cdcRecords(t, e.js, s2)
	if len(r1) != 5 || len(r2) != 3 {
		t.Fatalf("v1 %v v2 %v", cdcTexts(r1), cdcTexts(r2))
	}
	if r2[0].Text != "orders row 5" {
		t.Fatalf("v2 first %q", r2[0].Text)
	}
	st1 := savedState(t, e.js, "cdc.shop.dbo_orders")
	if st1.Successor != "dbo_orders_v2" {
		t.Fatalf("v1 state %+v", st1)
	}
	// The configured (old) name keeps working: the restart follows to v2.
	e.insert("orders", 8, 1)
	g = cdcStart(t, e, cfg)
	cdcWait(t, "after restart", func() bool { return len(cdcRecords(t, e.js, s2)) == 4 })
	g.Stop()
	if n := len(cdcRecords(t, e.js, s1)); n != 5 {
		t.Fatalf("v1 got %d after restart", n)
	}
	cdcNoDuplicates(t, append(r1, cdcRecords(t, e.js, s2)...))
}

func TestCDCHeartbeatAdvancesQuietTable(t *testing.T) {
	e := newCDCEnv(t, "quiet", "busy")
	cfg := cdcTestConfig("dbo_quiet")
	cfg.TableDefaults.Bootstrap = BootstrapNever
	g := cdcStart(t, e, cfg)
	kv, _ := e.js.KeyValue(context.Background(), streams.ProgressBucket)
	progress := func() streams.Progress {
		en, err := kv.Get(context.Background(), "cdc.shop.dbo_quiet")
		if err != nil {
			return streams.Progress{}
		}
		p, err := streams.DecodeProgress(en.Value())
		if err != nil {
			t.Fatal(err)
		}
		return *p
	}
	cdcWait(t, "first progress", func() bool { return !progress().FinalizedUntil.IsZero() })
	first := progress().FinalizedUntil
	// Another table changes; the quiet one has no change but is complete
	// up to the new max LSN.
	lsn := e.insert("busy", 0, 1)
	cdcWait(t, "progress advances", func() bool { return progress().FinalizedUntil.After(first) })
	p := progress()
	if p.Kind != "mssql" || p.CaptureInstance != "dbo_quiet" || p.Rows != 0 || p.LastLSN != lsn.String() {
		t.Fatalf("progress %+v", p)
	}
	tickAt := e.db.Tick()
	cdcWait(t, "tick", func() bool { return progress().LastLSN == tickAt.String() })
	st := savedState(t, e.js, "cdc.shop.dbo_quiet")
	if st.Pos != sqlserver.Through(tickAt) {
		t.Fatalf("position %+v", st.Pos)
	}
	if g.Ready() != nil {
		t.Fatalf("ready: %v", g.Ready())
	}
}

func TestCDCTransientErrorsRetry(t *testing.T) {
	e := newCDCEnv(t, "orders")
	cfg := cdcTestConfig("dbo_orders")
	cfg.TableDefaults.Bootstrap = BootstrapNever
	subj := streams.CDCSubject("shop", "dbo_orders")
	g := cdcStart(t, e, cfg)
	boom := errors.New("connection reset")
	e.db.Inject(memsource.MethodChanges, 3, boom)
	e.db.Inject(memsource.MethodCommitTime, 2, boom)
	e.insert("orders", 0, 30)
	cdcWait(t, "30", func() bool { return len(cdcRecords(t, e.js, subj)) >= 30 })
	cdcSentinel(t, e, subj, 30, 30)
	recs := cdcRecords(t, e.js, subj)
	if len(recs) != 31 {
		t.Fatalf("%d records", len(recs))
	}
	cdcNoDuplicates(t, recs)
	cdcWait(t, "ready", func() bool { return g.Ready() == nil })
}

func TestCDCStartFailureStopsStarted(t *testing.T) {
	e := newCDCEnv(t, "a", "b")
	cfg := cdcTestConfig("dbo_a", "dbo_missing", "dbo_b")
	_, err := Start(context.Background(), cfg, Deps{JS: e.js, Source: e.db})
	if !errors.Is(err, sqlserver.ErrNoCaptureInstance) || !strings.Contains(err.Error(), "dbo_missing") {
		t.Fatalf("err %v", err)
	}
	// dbo_a was started and is stopped again; dbo_b never started.
	n := e.db.Calls(memsource.MethodMaxLSN)
	// A negative check, kept as a sleep (6 poll intervals): Start returns
	// only after the streams it started have ended (Stop waits for them),
	// so an honest set makes no call however long the sleep or slow the
	// machine; the sleep can only let a leaked poller go unnoticed.
	time.Sleep(60 * time.Millisecond)
	if e.db.Calls(memsource.MethodMaxLSN) != n {
		t.Fatal("a stream still polls after the failed start")
	}
	if e.db.Calls(memsource.MethodSnapshotChunk) > 1 {
		t.Fatal("dbo_b started")
	}
	// Missing column: a start error naming it.
	cfg = cdcTestConfig("dbo_a")
	cfg.Tables = map[string]TableConfig{"DBO_A": {Text: []string{"nope"}}}
	if _, err := Start(context.Background(), cfg, Deps{JS: e.js, Source: e.db}); !errors.Is(err, ErrColumn) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("column err %v", err)
	}
	// Two capture instances of one table.
	e.db.EnableCDC("dbo", "a", "dbo_a_v2")
	if _, err := Start(context.Background(), cdcTestConfig("dbo_a", "dbo_a_v2"), Deps{JS: e.js, Source: e.db}); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflict err %v", err)
	}
}

func TestCDCTextRulesAndOverrides(t *testing.T) {
	e := newCDCEnv(t, "a", "b")
	cfg := cdcTestConfig()
	cfg.TableDefaults = TableConfig{} // whole row
	cfg.Tables = map[string]TableConfig{
		"DBO_A": {Text: []string{"level", "msg"}, TextSeparator: " ~ ", Tenant: "acme"},
		"dbo_b": {Bootstrap: BootstrapNever},
	}
	cdcStart(t, e, cfg)
	e.db.Begin().Insert("dbo", "a", map[string]any{"id": 1, "msg": "hello", "level": nil}).Commit()
	e.db.Begin().Insert("dbo", "b", map[string]any{"id": 2, "msg": "hi there", "level": "warn"}).Commit()
	sa, sb := streams.CDCSubject("shop", "dbo_a"), streams.CDCSubject("shop", "dbo_b")
	cdcWait(t, "both", func() bool { return len(cdcRecords(t, e.js, sa)) == 1 && len(cdcRecords(t, e.js, sb)) == 1 })
	fa := cdcFrames(t, e.js, sa)[0]
	if fa.Tenant != "acme" || fa.Records[0].Text != " ~ hello" {
		t.Fatalf("a: %s %q", fa.Tenant, fa.Records[0].Text)
	}
	rb := cdcRecords(t, e.js, sb)[0]
	if rb.Text != "msg=hi there level=warn" || cdcAttr(rb, "id") != "2" {
		t.Fatalf("b: %q %v", rb.Text, rb.Attrs)
	}
}

func TestCDCOversizedRecordDeadLettered(t *testing.T) {
	e := newCDCEnv(t, "orders")
	cfg := cdcTestConfig("dbo_orders")
	cfg.FrameBytes = 4 << 10
	cfg.TableDefaults.Bootstrap = BootstrapNever
	cdcStart(t, e, cfg)
	tx := e.db.Begin()
	tx.Insert("dbo", "orders", map[string]any{"id": 1, "msg": strings.Repeat("x", 5000), "level": "info"})
	tx.Insert("dbo", "orders", map[string]any{"id": 2, "msg": "small", "level": "info"})
	tx.Commit()
	subj := streams.CDCSubject("shop", "dbo_orders")
	cdcWait(t, "small", func() bool { return len(cdcRecords(t, e.js, subj)) == 1 })
	s, _ := e.js.Stream(context.Background(), streams.DeadLetterStream)
	m, err := s.GetMsg(context.Background(), 1, jetstream.WithGetMsgSubject(streams.DeadLetterSubject("producer")))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(streams.HeaderSource) != "cdc.shop.dbo_orders" || !strings.Contains(m.Header.Get(streams.HeaderReason), "exceeds frame_bytes") || len(m.Data) != 5000 {
		t.Fatalf("dead letter %v %d", m.Header, len(m.Data))
	}
}

func TestCDCConfigValidate(t *testing.T) {
	c := Config{Database: "bad.db", CaptureInstances: []string{"a", "A"}, PageSize: -1,
		Tables: map[string]TableConfig{"x": {Tenant: "bad tenant", Bootstrap: "sometimes"}}, ServerTimeZone: "Mars/Base"}.Defaults()
	err := c.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"mssql.database", "listed twice", "page_size", "tables.x.tenant", "bootstrap \"sometimes\"", "server_time_zone"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	if err := cdcTestConfig("a").Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{Database: "d"}).Defaults().Validate(); err == nil || !strings.Contains(err.Error(), "no capture instances") {
		t.Fatalf("empty: %v", err)
	}
	tc := Config{TableDefaults: TableConfig{Text: []string{"m"}}, Tables: map[string]TableConfig{"Dbo_X": {Tenant: "t1"}}}.Defaults().TableConfig("DBO_x")
	if tc.Tenant != "t1" || tc.Text[0] != "m" || tc.Bootstrap != BootstrapInitial {
		t.Fatalf("table config %+v", tc)
	}
	if tc := (Config{}).Defaults().TableConfig("dbo_y"); tc.Tenant != "dbo_y" {
		t.Fatalf("default tenant %+v", tc)
	}
}

// A CDC stream holds its WAL floor only while frames may be in the WAL
// beyond its saved state: a quiet table (heartbeats only) releases it, new
// changes put it back before their first frame, and it is released again
// once they are saved.
func TestCDCFloorReleasedWhileQuiet(t *testing.T) {
	e := newCDCEnv(t, "orders")
	cfg := cdcTestConfig("dbo_orders")
	cfg.TableDefaults.Bootstrap = BootstrapNever
	subj := streams.CDCSubject("shop", "dbo_orders")
	released := floortest.Released(t, e.js, "cdc.shop.dbo_orders")
	e.insert("orders", 0, 5)
	cdcStart(t, e, cfg)
	cdcWait(t, "5 records and a released floor", func() bool { return len(cdcRecords(t, e.js, subj)) == 5 && released() })
	// Quiet: heartbeats go on, the floor stays released. No sleep: wait
	// for three heartbeats (progress facts, each put after its save synced
	// the floor), then the floor key must not have been written since the
	// release, not even held for a moment.
	rev := floorRevision(t, e.js, "cdc.shop.dbo_orders")
	heartbeats := progressRevisions(t, e.js, "cdc.shop.dbo_orders")
	cdcWait(t, "three heartbeats", func() bool { return heartbeats() >= 3 })
	if got := floorRevision(t, e.js, "cdc.shop.dbo_orders"); got != rev || !released() {
		t.Fatalf("a quiet table holds its WAL floor (floor key at revision %d after the release at %d, released %v)", got, rev, released())
	}

	w := floortest.Watch(t, e.js, "cdc.shop.dbo_orders")
	before := len(cdcFrames(t, e.js, subj))
	for i := 5; i < 45; i += 8 {
		e.insert("orders", i, 8)
	}
	events := floortest.EventsUntilReleased(t, e.js, "cdc.shop.dbo_orders", w, func() bool { return len(cdcRecords(t, e.js, subj)) == 45 })
	floortest.CheckCovered(t, e.js, subj, before, events)
}

// floorRevision is the revision of source's last WAL floor event (a put
// or a release): it changes with every write of the floor key.
func floorRevision(t testing.TB, js jetstream.JetStream, source string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kvs, err := js.Stream(ctx, "KV_"+streams.PositionsBucket)
	if err != nil {
		t.Fatal(err)
	}
	m, err := kvs.GetLastMsgForSubject(ctx, "$KV."+streams.PositionsBucket+"."+streams.FloorKey(source))
	if err != nil {
		t.Fatal(err)
	}
	return m.Sequence
}

// progressRevisions returns a poll that counts the progress facts of
// source put since the call (each one seen: poll it more often than they
// come, or it counts fewer).
func progressRevisions(t testing.TB, js jetstream.JetStream, source string) func() int {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), streams.ProgressBucket)
	if err != nil {
		t.Fatal(err)
	}
	rev := func() uint64 {
		en, err := kv.Get(context.Background(), source)
		if err != nil {
			return 0
		}
		return en.Revision()
	}
	last, n := rev(), 0
	return func() int {
		if r := rev(); r != last {
			last, n = r, n+1
		}
		return n
	}
}

// A restart after a crash whose floor the WAL was purged past says so in
// a warning and a metric; a restart after a clean stop does not.
func TestCDCRestartPastPurgedFloorWarns(t *testing.T) {
	e := newCDCEnv(t, "orders")
	cfg := cdcTestConfig("dbo_orders")
	cfg.TableDefaults.Bootstrap = BootstrapNever
	subj := streams.CDCSubject("shop", "dbo_orders")
	ctx := context.Background()
	kv, _ := e.js.KeyValue(ctx, streams.PositionsBucket)
	start := func() (*Set, *syncbuf.Buffer) {
		logs := &syncbuf.Buffer{}
		g, err := Start(ctx, cfg, Deps{JS: e.js, Source: e.db, Log: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Stop() })
		return g, logs
	}
	const warning = "wal purged past this stream's floor"
	e.insert("orders", 0, 12)
	g, logs := start()
	cdcWait(t, "12", func() bool { return len(cdcRecords(t, e.js, subj)) == 12 })
	g.Stop()
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("first run warned:\n%s", logs.String())
	}
	// A crash leaves the floor of the state it last saved; the WAL is then
	// purged past it (the committer ignores floors older than
	// floor_max_age).
	if _, err := kv.Put(ctx, streams.FloorKey("cdc.shop.dbo_orders"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	wal, _ := e.js.Stream(ctx, streams.WALStream)
	info, _ := wal.Info(ctx)
	if err := wal.Purge(ctx, jetstream.WithPurgeSequence(info.State.LastSeq+1)); err != nil {
		t.Fatal(err)
	}
	g, logs = start()
	cdcWait(t, "a warning", func() bool { return strings.Contains(logs.String(), warning) })
	if n := testutil.ToFloat64(g.Streams()[0].m.unverified.WithLabelValues("dbo_orders")); n != 1 {
		t.Fatalf("quarry_producer_cdc_unverified_restarts_total = %v, want 1", n)
	}
	g.Stop()
	g, logs = start()
	cdcWait(t, "ready", func() bool { return g.Streams()[0].Ready() == nil })
	g.Stop()
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("restart after a clean stop warned:\n%s", logs.String())
	}
}

// In a busy database a quiet table's position still moves (heartbeats to
// the advancing max LSN), so its state is dirty again and again, but it
// writes no frames: a save that runs while a heartbeat has just marked the
// state dirty must not put the floor back.
func TestCDCFloorStaysReleasedOnHeartbeats(t *testing.T) {
	e := newCDCEnv(t, "orders")
	cfg := cdcTestConfig("dbo_orders")
	cfg.TableDefaults.Bootstrap = BootstrapNever
	released := floortest.Released(t, e.js, "cdc.shop.dbo_orders")
	e.insert("orders", 0, 3)
	g := cdcStart(t, e, cfg)
	subj := streams.CDCSubject("shop", "dbo_orders")
	cdcWait(t, "3 records and a released floor", func() bool { return len(cdcRecords(t, e.js, subj)) == 3 && released() })
	s := g.Streams()[0]
	// The interleaving under test, made certain: a heartbeat marks the
	// state dirty between a save's put and its floor decision.
	s.mu.Lock()
	s.dirty = true
	s.mu.Unlock()
	if err := s.syncFloor(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if !released() {
		t.Fatal("a heartbeat's state change put the floor back on a table that wrote no frame")
	}
}

// A restart that recovers frames written after the saved state (a crash
// between the ack and the save) saves the state they end at, so a quiet
// table then releases its floor instead of holding it for those frames.
func TestCDCRecoveredStateSavedAndFloorReleased(t *testing.T) {
	e := newCDCEnv(t, "orders")
	cfg := cdcTestConfig("dbo_orders")
	cfg.TableDefaults.Bootstrap = BootstrapNever
	subj := streams.CDCSubject("shop", "dbo_orders")
	const key = "cdc.shop.dbo_orders"
	released := floortest.Released(t, e.js, key)
	e.insert("orders", 0, 4)
	g := cdcStart(t, e, cfg)
	cdcWait(t, "4", func() bool { return len(cdcRecords(t, e.js, subj)) == 4 })
	g.Stop()
	old := savedState(t, e.js, key)
	e.insert("orders", 4, 3)
	g = cdcStart(t, e, cfg)
	cdcWait(t, "7", func() bool { return len(cdcRecords(t, e.js, subj)) == 7 })
	g.Stop()
	done := savedState(t, e.js, key)
	// The crash: the last save is lost and the floor of the old state stays.
	kv, _ := e.js.KeyValue(context.Background(), streams.PositionsBucket)
	b, _ := json.Marshal(old)
	if _, err := kv.Put(context.Background(), key, b); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), streams.FloorKey(key), fmt.Appendf(nil, "%d", old.WALSeq+1)); err != nil {
		t.Fatal(err)
	}
	cdcStart(t, e, cfg) // nothing new to read: only the recovery moves it
	cdcWait(t, "the recovered state saved and the floor released", func() bool {
		return savedState(t, e.js, key).WALSeq == done.WALSeq && released()
	})
	if n := len(cdcRecords(t, e.js, subj)); n != 7 {
		t.Fatalf("%d records after the restart, want 7", n)
	}
}
