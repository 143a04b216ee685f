package subscribe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/committer"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/pqtest"
	"github.com/quarrylake/quarry/streams"
	"github.com/quarrylake/quarry/subscribe"
)

// env is an embedded JetStream server, a local lake, a committer and a
// fake encoder that commits lines through it.
type env struct {
	t       *testing.T
	srv     *natstest.Server
	js      jetstream.JetStream
	store   objstore.Store
	seq     uint64 // last WAL seq reported
	lines   []string
	cmt     *runningCommitter
	names   int
	reports int // reports published
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	store, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv, js: js, store: store}
	e.cmt = e.startCommitter(js)
	return e
}

// deafNotices loses the committer's commit notices while fail is set, as
// if it died after each commit and before its notice.
type deafNotices struct {
	jetstream.JetStream
	fail atomic.Bool
}

func (d *deafNotices) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if d.fail.Load() && m.Subject == streams.NoticeSubject(streams.TableRecords) {
		return nil, errors.New("injected: notice lost")
	}
	return d.JetStream.PublishMsg(ctx, m, opts...)
}

type runningCommitter struct {
	c      *committer.Committer
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func (e *env) startCommitter(js jetstream.JetStream) *runningCommitter {
	e.t.Helper()
	e.names++
	c, err := committer.New(committer.Config{
		Name: fmt.Sprintf("c%d", e.names), LeaseTTL: 600 * time.Millisecond,
		CommitInterval: 5 * time.Millisecond, OpTimeout: 5 * time.Second,
	}, committer.Deps{JS: js, Store: e.store})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningCommitter{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	e.t.Cleanup(func() { r.stop(e.t) })
	return r
}

func (r *runningCommitter) stop(t *testing.T) {
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("committer Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("committer did not stop within 30s")
		}
	})
}

// restartCommitter stops the committer and starts a new one on js.
func (e *env) restartCommitter(js jetstream.JetStream) {
	e.cmt.stop(e.t)
	e.cmt = e.startCommitter(js)
}

// commit plays an encoder: one WAL batch per tenant in tenants, n lines
// each, in one report; it waits until the committer has committed it and
// returns the lines.
func (e *env) commit(n int, tenants ...string) []string {
	e.t.Helper()
	var bs []batch
	for _, tenant := range tenants {
		bs = append(bs, batch{tenant: tenant, date: "2026-01-01", n: n})
	}
	return e.commitBatches(bs, nil)
}

// batch is one WAL batch of n lines of tenant, in the partition of date.
// By default its WAL sequence follows the last one, its rows use version 1
// of template 1 and its templates file holds that version; seq and prev
// (both set), version and tpls (a non-nil empty slice: no templates file)
// change that. Its rows' ts is 2023-11-14 unless ages gives row i's age
// (its ts is that long before now).
type batch struct {
	tenant, date string
	n            int
	seq, prev    uint64
	version      int32
	tpls         []int32
	ages         []time.Duration
}

// commitBatches commits bs (consecutive WAL sequences, in order) in one
// report whose files (one per batch) are listed in the order of the
// indexes in fileOrder (nil: in WAL order), waits until the committer has
// committed them and returns their lines in WAL order.
func (e *env) commitBatches(bs []batch, fileOrder []int) []string {
	e.t.Helper()
	return e.commitUpTo(bs, fileOrder, 0)
}

// commitUpTo is commitBatches waiting for high-water w (0: the newest
// WAL sequence of bs and every batch before).
func (e *env) commitUpTo(bs []batch, fileOrder []int, w uint64) []string {
	e.t.Helper()
	ctx := context.Background()
	e.reports++
	rep := &streams.Report{ID: fmt.Sprintf("e.%d", e.reports), Encoder: "e1", CreatedAt: time.Now()}
	var out []string
	var files [][]streams.FileInfo
	for _, b := range bs {
		tenant, n := b.tenant, b.n
		seq, prev := b.seq, b.prev
		if seq == 0 {
			seq, prev = e.seq+1, e.seq
		}
		e.seq = max(e.seq, seq)
		version := max(b.version, 1)
		rep.Batches = append(rep.Batches, streams.BatchRef{Seq: seq, Prev: prev, Records: n})
		var rows []lake.RecordRow
		for i := range n {
			p := fmt.Sprintf("%s-%d-%d", tenant, seq, i)
			ts := int64(1_700_000_000_000_000)
			if b.ages != nil {
				ts = time.Now().Add(-b.ages[i]).UnixMicro()
			}
			rows = append(rows, lake.RecordRow{WALSeq: int64(seq), RecordIndex: int32(i), TS: ts,
				TemplateID: 1, TemplateVersion: version, Params: []string{p}, Source: "src"})
			out = append(out, "line "+p)
		}
		if b.tpls == nil {
			b.tpls = []int32{version}
		}
		var tpl []lake.TemplateRow
		for _, v := range b.tpls {
			kind := "created"
			if v > 1 {
				kind = "changed"
			}
			tpl = append(tpl, lake.TemplateRow{TemplateID: 1, Tenant: tenant, Version: v, Template: "line <*>", Kind: kind, WALSeq: int64(seq)})
		}
		name := lake.FileName(seq, seq, "e1")
		type file struct {
			table, path string
			data        []byte
			pv          map[string]string
		}
		// The committer creates the records table partitioned by tenant
		// (lake.CurrentLayout): date is not a partition (b.date names the
		// batch's day only).
		part := lake.CurrentLayout.PartOf(tenant, 0)
		put := []file{{streams.TableRecords, part.FilePath(name), pqtest.Write(e.t, rows), part.PartitionValues()}}
		if len(tpl) > 0 {
			put = append(put, file{streams.TableTemplates, tenant + "-" + name, pqtest.Write(e.t, tpl), nil})
		}
		var fs []streams.FileInfo
		for _, f := range put {
			if err := e.store.Put(ctx, f.table+"/"+f.path, f.data); err != nil {
				e.t.Fatal(err)
			}
			fi := streams.FileInfo{Table: f.table, Path: f.path, Size: int64(len(f.data)),
				PartitionValues: f.pv, NumRecords: int64(n), ModificationTime: time.Now().UnixMilli()}
			if f.table == streams.TableRecords && len(rows) > 0 {
				// The ts and wal_seq stats an encoder writes: compaction
				// closes a tenant whose rows' days have ended by them.
				lo, hi := rows[0].TS, rows[0].TS
				for _, r := range rows {
					lo, hi = min(lo, r.TS), max(hi, r.TS)
				}
				fi.Stats = delta.StatsJSON(int64(n), map[string]any{"wal_seq": int64(seq), "ts": time.UnixMicro(lo)},
					map[string]any{"wal_seq": int64(seq), "ts": time.UnixMicro(hi)}, nil)
			}
			fs = append(fs, fi)
		}
		files = append(files, fs)
	}
	if fileOrder == nil {
		for i := range files {
			fileOrder = append(fileOrder, i)
		}
	}
	for _, i := range fileOrder {
		rep.Files = append(rep.Files, files[i]...)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		e.t.Fatal(err)
	}
	msg := nats.NewMsg(streams.ReportSubject("e1"))
	msg.Header.Set(streams.HeaderMsgID, rep.ID)
	msg.Header.Set(streams.HeaderFormat, streams.FormatReport)
	msg.Data = b
	if _, err := e.js.PublishMsg(ctx, msg); err != nil {
		e.t.Fatal(err)
	}
	if w == 0 {
		w = e.seq
	}
	e.waitHighWater(w)
	e.lines = append(e.lines, releaseOrder(out)...)
	return out
}

// releaseOrder is the order in which one commit that releases lines (in
// WAL order) delivers them: tenant by tenant, in name order.
func releaseOrder(lines []string) []string {
	out := slices.Clone(lines)
	tenant := func(l string) string {
		t, _, _ := strings.Cut(strings.TrimPrefix(l, "line "), "-")
		return t
	}
	slices.SortStableFunc(out, func(a, b string) int { return strings.Compare(tenant(a), tenant(b)) })
	return out
}

// waitHighWater waits until the committer's high-water is at least w.
func (e *env) waitHighWater(w uint64) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for e.cmt.c.HighWater() < w {
		if time.Now().After(deadline) {
			e.t.Fatalf("high-water %d, want %d", e.cmt.c.HighWater(), w)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) subscribe(cfg subscribe.Config) *subscribe.Subscription {
	e.t.Helper()
	if cfg.Store == nil {
		cfg.Store = e.store
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := subscribe.Subscribe(ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// take reads n records from s.
func take(t *testing.T, s *subscribe.Subscription, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for range n {
		r, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d of %d records (cursor %s): %v", len(out), n, s.Cursor(), err)
		}
		out = append(out, r.Line)
	}
	return out
}

// quiet checks s has nothing more to deliver: Next waits until ctx ends.
func quiet(t *testing.T, s *subscribe.Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	before := s.Cursor()
	if r, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next delivered %q (err %v), want nothing more", r.Line, err)
	}
	_ = before
}

// sameMultiset fails unless got and want hold the same lines, each as
// often.
func sameMultiset(t *testing.T, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("delivered %d lines, want %d; got %v\nwant %v", len(got), len(want), got, want)
	}
}
