package committer

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/streams"
)

// deafNotices is a JetStream whose commit notice publishes fail while
// fail is set: the committer's process "dies" between commit and notice.
type deafNotices struct {
	jetstream.JetStream
	fail atomic.Bool
}

func (d *deafNotices) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if d.fail.Load() && (m.Subject == streams.NoticeSubject(streams.TableRecords) || m.Subject == streams.NoticeSubject(streams.TableTemplates)) {
		return nil, errors.New("injected: notice publish lost")
	}
	return d.JetStream.PublishMsg(ctx, m, opts...)
}

// notices reads every notice in the stream, in stream order.
func (e *env) notices() []*streams.Notice {
	e.t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, streams.NoticeStream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*streams.Notice
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		if m.Header.Get(streams.HeaderFormat) != streams.FormatNotice {
			e.t.Fatalf("notice %d format %q", seq, m.Header.Get(streams.HeaderFormat))
		}
		n, err := streams.DecodeNotice(m.Data)
		if err != nil {
			e.t.Fatal(err)
		}
		if got, want := m.Header.Get(streams.HeaderMsgID), streams.NoticeMsgID(n.Table, n.Version); got != want {
			e.t.Errorf("notice msg id %q, want %q", got, want)
		}
		if want := streams.NoticeSubject(n.Table); m.Subject != want {
			e.t.Errorf("%s notice %d on %q, want %q", n.Table, n.Version, m.Subject, want)
		}
		out = append(out, n)
	}
	return out
}

// noticesOf is the notices of table in the stream, now.
func (e *env) noticesOf(table string) []*streams.Notice {
	var out []*streams.Notice
	for _, n := range e.notices() {
		if n.Table == table {
			out = append(out, n)
		}
	}
	return out
}

// checkNotices waits until the stream holds exactly one notice per version
// 0..table version of the records and of the templates table, each
// table's in order and equal to the commit in the log, an advance's
// records notice before its templates notice. It returns the records
// notices.
func (e *env) checkNotices() []*streams.Notice {
	e.t.Helper()
	var all []*streams.Notice
	of := func(table string) []*streams.Notice {
		var out []*streams.Notice
		for _, n := range all {
			if n.Table == table {
				out = append(out, n)
			}
		}
		return out
	}
	tables := []string{lake.RecordsTable, lake.TemplatesTable}
	eventually(e.t, 30*time.Second, "a notice for every records and templates version", func() bool {
		all = e.notices()
		for _, table := range tables {
			if int64(len(of(table))) < e.table(table).version+1 {
				return false
			}
		}
		return true
	})
	for _, table := range tables {
		tbl := delta.OpenTable(e.local, table)
		v := e.table(table).version
		ns := of(table)
		if int64(len(ns)) != v+1 {
			e.t.Fatalf("%d %s notices for versions 0..%d", len(ns), table, v)
		}
		for i, n := range ns {
			if n.Version != int64(i) {
				e.t.Fatalf("%s notice %d is version %d, want versions in order, each once", table, i, n.Version)
			}
			actions, err := lake.ReadCommit(context.Background(), tbl, n.Version)
			if err != nil {
				e.t.Fatal(err)
			}
			want := lake.NoticeOf(table, n.Version, actions)
			if !reflect.DeepEqual(n, want) {
				e.t.Errorf("%s notice %d:\n got %+v\nwant %+v", table, i, n, want)
			}
		}
	}
	// An advance commits templates, then records (both with its
	// high-water), and announces records first.
	recHW := uint64(0)
	for _, n := range all {
		switch {
		case n.Table == streams.TableRecords:
			recHW = max(recHW, n.HighWater)
		case n.HighWater > recHW:
			e.t.Errorf("templates notice of version %d (high-water %d) before the records notice of its advance (records announced up to high-water %d)", n.Version, n.HighWater, recHW)
		}
	}
	return of(lake.RecordsTable)
}

func TestNoticesFollowCommits(t *testing.T) {
	e := newEnv(t)
	a := e.start(testConfig("a"), nil)
	e.publish(e.encode("n.1", batch{1, 0}))
	e.waitHW(a.c, 1)
	e.publish(e.encode("n.2", batch{2, 1}, batch{3, 2}))
	e.waitHW(a.c, 3)
	ns := e.checkNotices()
	var adds []streams.NoticeFile
	for _, n := range ns {
		adds = append(adds, n.Adds...)
		if len(n.Adds) > 0 && (!n.DataChange || n.HighWater == 0 || n.Operation != "WRITE" || n.CommitTime.IsZero()) {
			t.Errorf("notice %+v: want a data change with its high-water, operation and time", n)
		}
	}
	if len(adds) != 2 {
		t.Fatalf("adds %+v, want one file per report", adds)
	}
	for i, want := range []string{"1", "2-3"} {
		f := adds[i]
		// The committer creates the table partitioned by tenant: no date.
		if f.WAL != want || f.Tenant != "acme" || f.Date != "" || !f.DataChange || f.Size <= 0 {
			t.Errorf("add %d: %+v, want tenant acme, no date, wal %s", i, f, want)
		}
	}
	if last := ns[len(ns)-1]; last.HighWater != 3 {
		t.Errorf("last notice high-water %d, want 3", last.HighWater)
	}
}

// TestNoticesRebuiltAfterCrash: commits of both tables whose notices were
// never published (the committer died between commit and notice) are
// announced by the next term, in order, before anything else.
func TestNoticesRebuiltAfterCrash(t *testing.T) {
	e := newEnv(t)
	deaf := &deafNotices{JetStream: e.js}
	c, err := New(testConfig("a"), Deps{JS: deaf, Store: e.local, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	a := runCommitter(t, c)

	e.publish(e.encode("r.1", batch{1, 0}))
	e.waitHW(a.c, 1)
	e.checkNotices()
	before := len(e.notices())
	tplBefore := e.table(lake.TemplatesTable).version
	deaf.fail.Store(true)
	e.publish(e.encode("r.2", batch{2, 1}))
	e.waitHW(a.c, 2)
	e.publish(e.encode("r.3", batch{3, 2}))
	e.waitHW(a.c, 3)
	a.kill(t)
	if got := len(e.notices()); got != before {
		t.Fatalf("%d notices after the notices were cut, want %d", got, before)
	}
	if e.table(lake.RecordsTable).version < int64(len(e.noticesOf(lake.RecordsTable)))+1 {
		t.Fatal("no records commit without a notice: the test tests nothing")
	}
	if e.table(lake.TemplatesTable).version <= tplBefore {
		t.Fatal("no templates commit without a notice: the test tests nothing")
	}
	b := e.start(testConfig("b"), nil)
	e.checkNotices()
	e.publish(e.encode("r.4", batch{4, 3}))
	e.waitHW(b.c, 4)
	ns := e.checkNotices()
	if ns[len(ns)-1].HighWater != 4 {
		t.Errorf("last notice %+v", ns[len(ns)-1])
	}
}
