package cdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarrylake/quarry/producer/sqlserver"
	"github.com/quarrylake/quarry/producer/sqlserver/memsource"
	"github.com/quarrylake/quarry/streams"
)

// cdcHistory tracks the commits a test makes, with the records each must
// yield, so expectations can be cut at the snapshot LSN.
type cdcHistory struct {
	mu      sync.Mutex
	cur     map[int]string // id → msg, as committed
	commits []cdcCommit
}

type cdcCommit struct {
	lsn  sqlserver.LSN
	recs []string // "<op>:<msg>"
}

type cdcStmt struct {
	op  sqlserver.Operation
	id  int
	msg string
}

func newCDCHistory(rows map[int]string) *cdcHistory {
	return &cdcHistory{cur: rows}
}

// commit runs the statements as one transaction and records what it must
// yield.
func (h *cdcHistory) commit(db *memsource.DB, table string, stmts ...cdcStmt) sqlserver.LSN {
	h.mu.Lock()
	defer h.mu.Unlock()
	tx := db.Begin()
	var recs []string
	for _, s := range stmts {
		switch s.op {
		case sqlserver.OpInsert:
			tx.Insert("dbo", table, map[string]any{"id": s.id, "msg": s.msg, "level": "info"})
			recs = append(recs, "insert:"+s.msg)
			h.cur[s.id] = s.msg
		case sqlserver.OpUpdateAfter:
			tx.Update("dbo", table, []any{s.id}, map[string]any{"msg": s.msg})
			recs = append(recs, "update_before:"+h.cur[s.id], "update_after:"+s.msg)
			h.cur[s.id] = s.msg
		case sqlserver.OpDelete:
			tx.Delete("dbo", table, s.id)
			recs = append(recs, "delete:"+h.cur[s.id])
			delete(h.cur, s.id)
		}
	}
	l := tx.Commit()
	h.commits = append(h.commits, cdcCommit{lsn: l, recs: recs})
	return l
}

// after is the records of the commits after lsn, in LSN order.
func (h *cdcHistory) after(lsn sqlserver.LSN) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := append([]cdcCommit(nil), h.commits...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].lsn.Compare(cs[j].lsn) < 0 })
	var out []string
	for _, c := range cs {
		if c.lsn.Compare(lsn) > 0 {
			out = append(out, c.recs...)
		}
	}
	return out
}

func (h *cdcHistory) minLSN() sqlserver.LSN {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.commits[0].lsn
	for _, c := range h.commits {
		if c.lsn.Compare(m) < 0 {
			m = c.lsn
		}
	}
	return m
}

// cdcApply replays records (snapshot, insert, update_after set; delete
// removes) into id → text.
func cdcApply(t testing.TB, recs []streams.Record) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, r := range recs {
		id := cdcAttr(r, "id")
		switch cdcAttr(r, "_op") {
		case "snapshot", "insert", "update_after":
			m[id] = r.Text
		case "delete":
			if _, ok := m[id]; !ok {
				t.Fatalf("delete of %s, which is not there", id)
			}
			delete(m, id)
		}
	}
	return m
}

func cdcTableMap(db *memsource.DB, table string) map[string]string {
	m := map[string]string{}
	for _, r := range db.Table("dbo", table) {
		m[strconv.FormatInt(r["id"].(int64), 10)] = r["msg"].(string)
	}
	return m
}

// The bootstrap races writes: between chunks (a hook) and all along (a
// goroutine inserting). The WAL must hold the table as of the snapshot LSN
// L once, then every change after L once, in order: nothing twice, nothing
// missing.
func TestCDCSnapshotConsistentUnderConcurrentWrites(t *testing.T) {
	e := newCDCEnv(t)
	e.db.CreateTable("dbo", "orders", cdcCols, "id")
	e.db.EnableCDC("dbo", "orders", "dbo_orders")
	initial := map[int]string{}
	for i := 0; i < 40; i++ {
		initial[i] = fmt.Sprintf("orders row %d", i)
	}
	e.insert("orders", 0, 40)
	cur := map[int]string{}
	for k, v := range initial {
		cur[k] = v
	}
	h := newCDCHistory(cur)
	ins := func(id int, msg string) cdcStmt { return cdcStmt{sqlserver.OpInsert, id, msg} }
	upd := func(id int, msg string) cdcStmt { return cdcStmt{sqlserver.OpUpdateAfter, id, msg} }
	del := func(id int) cdcStmt { return cdcStmt{op: sqlserver.OpDelete, id: id} }

	first := make(chan struct{})
	var once sync.Once
	var calls int
	e.db.Hook(memsource.MethodSnapshotChunk, func(string) {
		once.Do(func() { close(first) })
		calls++ // the stream's goroutine only
		switch calls {
		case 2: // rows 0..4 read: change some read rows and some ahead
			h.commit(e.db, "orders", upd(1, "u1"), upd(30, "u30"), del(2), del(35))
		case 3:
			h.commit(e.db, "orders", ins(500, "i500"), ins(-5, "i-5"), upd(30, "u30b"))
		case 4:
			h.commit(e.db, "orders", del(500))
			h.commit(e.db, "orders", ins(2, "again2"), upd(39, "u39"), upd(12, "u12"))
		case 6:
			h.commit(e.db, "orders", del(39), ins(39, "again39"))
		}
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-first
		for i := 1000; i < 1060; i++ {
			h.commit(e.db, "orders", ins(i, fmt.Sprintf("g%d", i)))
			// Pacing only spreads the writes over the snapshot: wherever
			// they land the WAL must match h, and the races this test
			// needs are the hook's, between chunks by construction.
			time.Sleep(time.Millisecond)
		}
	}()
	cfg := cdcTestConfig("dbo_orders")
	g := cdcStart(t, e, cfg)
	wg.Wait()
	subj := streams.CDCSubject("shop", "dbo_orders")
	var lsn sqlserver.LSN
	var want []string
	cdcWait(t, "snapshot and changes", func() bool {
		recs := cdcRecords(t, e.js, subj)
		if len(recs) == 0 {
			return false
		}
		var err error
		if lsn, err = sqlserver.ParseLSN(cdcAttr(recs[0], "_lsn")); err != nil {
			t.Fatal(err)
		}
		want = want[:0]
		for i := 0; i < 40; i++ {
			want = append(want, "snapshot:"+initial[i])
		}
		want = append(want, h.after(lsn)...)
		return len(recs) >= len(want)
	})
	// Anything extra would show before a sentinel change (the stream
	// publishes in LSN order): a barrier, not a sleep.
	h.commit(e.db, "orders", ins(5000, "sentinel"))
	want = append(want, "insert:sentinel")
	cdcWait(t, "the sentinel", func() bool {
		return slices.ContainsFunc(cdcRecords(t, e.js, subj), func(r streams.Record) bool { return r.Text == "sentinel" })
	})
	g.Stop()
	if calls < 8 {
		t.Fatalf("only %d chunks: the snapshot did not race the writes", calls)
	}
	if m := h.minLSN(); m.Compare(lsn) <= 0 {
		t.Fatalf("a racing commit at %s is not after the snapshot LSN %s", m, lsn)
	}
	recs := cdcRecords(t, e.js, subj)
	got := cdcTexts(recs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records (%d):\n%s\nwant (%d):\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	for _, r := range recs[:40] {
		if cdcAttr(r, "_lsn") != lsn.String() {
			t.Fatalf("snapshot record at %s, want %s", cdcAttr(r, "_lsn"), lsn)
		}
	}
	if got, want := cdcApply(t, recs), cdcTableMap(e.db, "orders"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed WAL\n%v\ntable\n%v", got, want)
	}
	cdcNoDuplicates(t, recs)
	if n := e.db.OpenSnapshots(); n != 0 {
		t.Fatalf("%d snapshots left open", n)
	}
}

// A stop in the middle of a snapshot: the restart cannot continue the
// snapshot transaction, so it takes a new snapshot at a new LSN after the
// records already published; from then on the WAL is consistent again
// (the last snapshot is the table as of its LSN, changes after it come
// once) and the frames keep chaining.
func TestCDCSnapshotRestartMidSnapshotStartsAgain(t *testing.T) {
	e := newCDCEnv(t, "orders")
	e.insert("orders", 0, 30)
	h := newCDCHistory(map[int]string{})
	cfg := cdcTestConfig("dbo_orders")
	subj := streams.CDCSubject("shop", "dbo_orders")
	var calls int
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	e.db.Hook(memsource.MethodSnapshotChunk, func(string) {
		calls++
		if calls == 4 {
			h.cur[3] = "orders row 3"
			h.commit(e.db, "orders", cdcStmt{sqlserver.OpUpdateAfter, 3, "u3"}) // in the next snapshot, not a change
			// The stop lands mid-snapshot by construction: the stream's
			// ctx is cancelled before this chunk is read (cancel returns
			// once it is done), after Start returned.
			<-started
			cancel()
		}
	})
	g, err := Start(ctx, cfg, Deps{JS: e.js, Source: e.db})
	if err != nil {
		t.Fatal(err)
	}
	close(started)
	if errs := g.Wait(); len(errs) != 0 {
		t.Fatal(errs)
	}
	st := savedState(t, e.js, "cdc.shop.dbo_orders")
	if st.Snapshot == nil {
		t.Fatalf("saved state is not mid-snapshot: %+v", st)
	}
	if n := e.db.OpenSnapshots(); n != 0 {
		t.Fatalf("%d snapshots left open after the stop", n)
	}
	partial := cdcRecords(t, e.js, subj)
	e.db.Hook(memsource.MethodSnapshotChunk, nil)
	g = cdcStart(t, e, cfg)
	cdcWait(t, "new snapshot", func() bool { return len(cdcRecords(t, e.js, subj)) >= len(partial)+30 })
	h.commit(e.db, "orders", cdcStmt{sqlserver.OpInsert, 100, "orders row 100"})
	cdcWait(t, "change", func() bool { return len(cdcRecords(t, e.js, subj)) >= len(partial)+31 })
	cdcSentinel(t, e, subj, 101, len(partial)+31)
	g.Stop()
	recs := cdcRecords(t, e.js, subj)
	if len(recs) != len(partial)+32 {
		t.Fatalf("%d records after %d partial: %v", len(recs), len(partial), cdcTexts(recs))
	}
	for i, r := range recs[:len(partial)] {
		if r.Text != fmt.Sprintf("orders row %d", i) || cdcAttr(r, "_op") != "snapshot" || cdcAttr(r, "_lsn") != st.Snapshot.LSN.String() {
			t.Fatalf("partial record %d: %q %v", i, r.Text, r.Attrs)
		}
	}
	snap := recs[len(partial) : len(partial)+30]
	l2 := cdcAttr(snap[0], "_lsn")
	if l2 == st.Snapshot.LSN.String() {
		t.Fatalf("the new snapshot reuses LSN %s", l2)
	}
	for i, r := range snap {
		want := fmt.Sprintf("orders row %d", i)
		if i == 3 {
			want = "u3"
		}
		if r.Text != want || cdcAttr(r, "_lsn") != l2 {
			t.Fatalf("snapshot record %d: %q at %s", i, r.Text, cdcAttr(r, "_lsn"))
		}
	}
	if last := cdcTexts(recs[len(recs)-2 : len(recs)-1])[0]; last != "insert:orders row 100" {
		t.Fatalf("last record %s", last)
	}
	var next uint64
	for _, f := range cdcFrames(t, e.js, subj) {
		if f.FirstOffset != next {
			t.Fatalf("frame at %d, want %d", f.FirstOffset, next)
		}
		next = f.NextOffset
	}
	if e.db.OpenSnapshots() != 0 {
		t.Fatal("snapshot left open")
	}
}

// Frames acked but a position save lost while the saved state is still
// mid-snapshot: the restart finds the snapshot frames and the change
// frames after them in the WAL; it neither snapshots again nor
// republishes anything.
func TestCDCCrashAfterSnapshotBeforeSave(t *testing.T) {
	e := newCDCEnv(t, "orders")
	e.insert("orders", 0, 12)
	cfg := cdcTestConfig("dbo_orders")
	subj := streams.CDCSubject("shop", "dbo_orders")
	g := cdcStart(t, e, cfg)
	cdcWait(t, "snapshot", func() bool { return len(cdcRecords(t, e.js, subj)) == 12 })
	e.insert("orders", 12, 3)
	cdcWait(t, "changes", func() bool { return len(cdcRecords(t, e.js, subj)) == 15 })
	g.Stop()
	recs := cdcRecords(t, e.js, subj)
	l, _ := sqlserver.ParseLSN(cdcAttr(recs[0], "_lsn"))
	// The state as saved right after the snapshot began.
	kv, _ := e.js.KeyValue(context.Background(), streams.PositionsBucket)
	b, _ := json.Marshal(state{V: 1, CaptureInstance: "dbo_orders", Snapshot: &snapState{LSN: l}})
	if _, err := kv.Put(context.Background(), "cdc.shop.dbo_orders", b); err != nil {
		t.Fatal(err)
	}
	n := e.db.Calls(memsource.MethodBeginSnapshot)
	e.insert("orders", 15, 1)
	g = cdcStart(t, e, cfg)
	cdcWait(t, "16", func() bool { return len(cdcRecords(t, e.js, subj)) >= 16 })
	cdcSentinel(t, e, subj, 16, 16)
	g.Stop()
	recs = cdcRecords(t, e.js, subj)
	if len(recs) != 17 || e.db.Calls(memsource.MethodBeginSnapshot) != n {
		t.Fatalf("%d records, %d new snapshots: %v", len(recs), e.db.Calls(memsource.MethodBeginSnapshot)-n, cdcTexts(recs))
	}
	cdcNoDuplicates(t, recs)
	if st := savedState(t, e.js, "cdc.shop.dbo_orders"); st.Snapshot != nil || st.Rows != 17 {
		t.Fatalf("state %+v", st)
	}
}

// ALLOW_SNAPSHOT_ISOLATION OFF stops the bootstrap with an error naming
// the fix; snapshot_isolation: read_committed accepts the risk and runs.
func TestCDCSnapshotIsolationNotAllowed(t *testing.T) {
	e := newCDCEnv(t, "orders")
	e.insert("orders", 0, 3)
	e.db.SetSnapshotIsolation(false)
	cfg := cdcTestConfig("dbo_orders")
	g := cdcStart(t, e, cfg)
	cdcWait(t, "stopped", func() bool { err := g.Ready(); return err != nil && strings.Contains(err.Error(), "stopped") })
	errs := g.Wait()
	err := errs["dbo_orders"]
	if !errors.Is(err, sqlserver.ErrSnapshotIsolation) || !strings.Contains(err.Error(), "SET ALLOW_SNAPSHOT_ISOLATION ON") ||
		!strings.Contains(err.Error(), "snapshot_isolation: read_committed") {
		t.Fatalf("err %v", err)
	}
	subj := streams.CDCSubject("shop", "dbo_orders")
	if n := len(cdcRecords(t, e.js, subj)); n != 0 {
		t.Fatalf("%d records", n)
	}
	cfg.SnapshotIsolation = string(sqlserver.IsolationReadCommitted)
	g = cdcStart(t, e, cfg)
	cdcWait(t, "read-committed snapshot", func() bool { return len(cdcRecords(t, e.js, subj)) == 3 })
	g.Stop()
	if errs := g.Wait(); len(errs) != 0 {
		t.Fatal(errs)
	}
	bad := cdcTestConfig("dbo_orders")
	bad.SnapshotIsolation = "repeatable_read"
	if err := bad.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), "snapshot_isolation") {
		t.Fatalf("validate: %v", err)
	}
}

// SQL errors during a snapshot: one at the first chunk (before anything is
// acked) must not skip the bootstrap; one in the middle closes the
// transaction and a new snapshot starts at a new LSN after the records
// already published.
func TestCDCSnapshotSQLErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failAt int // chunk call that fails
	}{{"first chunk", 1}, {"mid snapshot", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCDCEnv(t, "orders")
			e.insert("orders", 0, 30)
			calls := 0
			e.db.Hook(memsource.MethodSnapshotChunk, func(string) {
				calls++
				if calls == tc.failAt {
					e.db.Inject(memsource.MethodSnapshotChunk, 1, errors.New("connection reset"))
					e.db.Tick() // the next snapshot gets a new LSN
				}
			})
			subj := streams.CDCSubject("shop", "dbo_orders")
			g := cdcStart(t, e, cdcTestConfig("dbo_orders"))
			cdcWait(t, "complete snapshot", func() bool {
				recs := cdcRecords(t, e.js, subj)
				return len(recs) >= 30 && recs[len(recs)-1].Text == "orders row 29"
			})
			e.insert("orders", 30, 1)
			cdcWait(t, "change", func() bool {
				recs := cdcRecords(t, e.js, subj)
				return cdcAttr(recs[len(recs)-1], "_op") == "insert"
			})
			g.Stop()
			recs := cdcRecords(t, e.js, subj)
			last := recs[len(recs)-31 : len(recs)-1]
			for i, r := range last {
				if r.Text != fmt.Sprintf("orders row %d", i) || cdcAttr(r, "_lsn") != cdcAttr(last[0], "_lsn") {
					t.Fatalf("final snapshot record %d: %q %v", i, r.Text, r.Attrs)
				}
			}
			if tc.failAt == 1 && len(recs) != 31 {
				t.Fatalf("%d records: %v", len(recs), cdcTexts(recs))
			}
			if e.db.Calls(memsource.MethodBeginSnapshot) != 2 || e.db.OpenSnapshots() != 0 {
				t.Fatalf("%d snapshots begun, %d open", e.db.Calls(memsource.MethodBeginSnapshot), e.db.OpenSnapshots())
			}
			var next uint64
			for _, f := range cdcFrames(t, e.js, subj) {
				if f.FirstOffset != next {
					t.Fatalf("frame at %d, want %d", f.FirstOffset, next)
				}
				next = f.NextOffset
			}
		})
	}
}
