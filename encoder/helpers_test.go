package encoder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// env is one embedded JetStream server with quarry's streams and a local
// folder store.
type env struct {
	t     testing.TB
	srv   *natstest.Server
	js    jetstream.JetStream
	store *objstore.Local
	reg   *prometheus.Registry // used by start when set
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	st, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, srv: srv, js: js, store: st}
}

// conn opens another connection (another encoder process).
func (e *env) conn() jetstream.JetStream {
	_, js := natstest.Connect(e.t, e.srv.URL(), streams.Config{})
	return js
}

func testLog(t testing.TB) *slog.Logger {
	if os.Getenv("ENCODER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

func (e *env) publish(bs ...*streams.MinedBatch) {
	e.t.Helper()
	for _, b := range bs {
		m := nats.NewMsg(streams.MinedSubject(b.Tenant))
		m.Header.Set(streams.HeaderMsgID, streams.MinedMsgID(b.WALSeq))
		m.Header.Set(streams.HeaderFormat, streams.FormatMined)
		m.Data = streams.AppendMinedBatch(nil, b)
		if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
			e.t.Fatalf("publish batch %d: %v", b.WALSeq, err)
		}
	}
}

// queueLen is the number of batches in the work queue (unacked).
func (e *env) queueLen() uint64 {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), streams.MinedStream)
	if err != nil {
		e.t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

// start runs an encoder until the test ends; stop drains it.
func (e *env) start(cfg Config, js jetstream.JetStream, store objstore.Store, setup ...func(*Encoder)) (enc *Encoder, stop func()) {
	e.t.Helper()
	if js == nil {
		js = e.js
	}
	if store == nil {
		store = e.store
	}
	deps := Deps{JS: js, Store: store, Log: testLog(e.t)}
	if e.reg != nil {
		deps.Registerer = e.reg
	}
	enc, err := New(cfg, deps)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range setup {
		f(enc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- enc.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					e.t.Errorf("run: %v", err)
				}
			case <-time.After(60 * time.Second):
				e.t.Error("encoder did not stop")
			}
		})
	}
	e.t.Cleanup(stop)
	return enc, stop
}

func fastConfig() Config {
	return Config{Name: "t", MaxAge: 100 * time.Millisecond, AckWait: 2 * time.Second, FetchWait: 100 * time.Millisecond,
		FetchBatch: 16, VerdictPoll: 100 * time.Millisecond, DrainTimeout: 10 * time.Second}
}

// committer plays the committer: it reads the report stream in order, the
// first report covering a batch owns it, a later report covering an owned
// batch is rejected whole with the owned batches as duplicates. decide may
// override the verdict.
type committer struct {
	e      *env
	mu     sync.Mutex
	owner  map[uint64]string
	all    []*streams.Report
	byID   map[string]*streams.Report
	verd   map[string]*streams.Verdict
	decide func(r *streams.Report, v *streams.Verdict)
	pause  bool
}

func (e *env) committer(decide func(r *streams.Report, v *streams.Verdict)) *committer {
	c := &committer{e: e, owner: map[uint64]string{}, byID: map[string]*streams.Report{}, verd: map[string]*streams.Verdict{}, decide: decide}
	ctx, cancel := context.WithCancel(context.Background())
	kv, err := e.js.KeyValue(ctx, streams.VerdictsBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	cons, err := e.js.OrderedConsumer(ctx, streams.ReportStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		e.t.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := it.Next()
			if err != nil {
				if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					e.t.Errorf("committer: %v", err)
				}
				return
			}
			r, err := streams.DecodeReport(m.Data())
			if err != nil {
				e.t.Errorf("committer: bad report: %v", err)
				continue
			}
			if m.Headers().Get(streams.HeaderMsgID) != r.ID || m.Headers().Get(streams.HeaderFormat) != streams.FormatReport || m.Subject() != streams.ReportSubject(r.Encoder) {
				e.t.Errorf("committer: report %s headers %v subject %s", r.ID, m.Headers(), m.Subject())
			}
			v := c.judge(r)
			b, _ := json.Marshal(v)
			if _, err := kv.Put(ctx, streams.VerdictKey(r.ID), b); err != nil && ctx.Err() == nil {
				e.t.Errorf("committer: put verdict: %v", err)
			}
		}
	}()
	e.t.Cleanup(func() { it.Stop(); cancel(); <-done })
	return c
}

func (c *committer) judge(r *streams.Report) *streams.Verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, r)
	c.byID[r.ID] = r
	v := &streams.Verdict{ReportID: r.ID, Accepted: true}
	for _, b := range r.Batches {
		if _, ok := c.owner[b.Seq]; ok {
			v.Accepted = false
			v.Duplicates = append(v.Duplicates, b.Seq)
		}
	}
	if !v.Accepted {
		v.Reason = "covers owned batches"
	}
	if c.decide != nil {
		c.decide(r, v)
	}
	if v.Accepted {
		for _, b := range r.Batches {
			c.owner[b.Seq] = r.ID
		}
	}
	c.verd[r.ID] = v
	return v
}

// accepted returns the accepted reports in stream order.
func (c *committer) accepted() []*streams.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*streams.Report
	for _, r := range c.all {
		if c.verd[r.ID].Accepted {
			out = append(out, r)
		}
	}
	return out
}

func (c *committer) reports() []*streams.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

// checkExactlyOnce fails unless every seq is in exactly one accepted report
// and no accepted report covers another seq.
func (c *committer) checkExactlyOnce(t *testing.T, seqs []uint64) {
	t.Helper()
	count := map[uint64]int{}
	for _, r := range c.accepted() {
		for _, b := range r.Batches {
			count[b.Seq]++
		}
	}
	for _, s := range seqs {
		if count[s] != 1 {
			t.Errorf("batch %d in %d accepted reports", s, count[s])
		}
		delete(count, s)
	}
	for s := range count {
		t.Errorf("unexpected batch %d in accepted reports", s)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// batch makes a mined batch with n records of tenant at ts (nanos), one
// record per second, alternating between two templates the batch defines.
func batch(seq, prev uint64, tenant string, ts int64, n int) *streams.MinedBatch {
	b := &streams.MinedBatch{WALSeq: seq, PrevSeq: prev, Tenant: tenant, Source: "src-" + tenant, Subject: streams.LineSubject(tenant),
		FirstOffset: seq * 100, NextOffset: seq*100 + uint64(n)}
	for i := range n {
		b.Records = append(b.Records, streams.MinedRecord{
			Index: uint32(i), TS: ts + int64(i)*int64(time.Second) + 123456, TemplateID: seq*10 + 1 + uint64(i%2), TemplateVersion: 1,
			Params: []string{fmt.Sprintf("p%d-%d", seq, i), "x"},
			Attrs:  []streams.Attr{{Key: "host", Value: fmt.Sprintf("h%d", i%2)}},
		})
	}
	if n > 0 {
		b.Templates = []streams.TemplateDef{{Kind: streams.TemplateCreated, ID: seq*10 + 1, Tenant: tenant, Version: 1, Text: "user <*> logged in <*>"}}
	}
	if n > 1 {
		b.Templates = append(b.Templates, streams.TemplateDef{Kind: streams.TemplateCreated, ID: seq*10 + 2, Tenant: tenant, Version: 1, Text: "<*> failed: <*>"})
	}
	return b
}

// textsOf is the template texts bs define.
func textsOf(bs []*streams.MinedBatch) recfile.Templates {
	out := recfile.Templates{}
	for _, b := range bs {
		for _, d := range b.Templates {
			out[recfile.Key{ID: d.ID, Version: d.Version}] = d.Text
		}
	}
	return out
}

// chain makes n batches with consecutive seqs from first, each with recs
// records, alternating tenants a and b.
func chain(first uint64, n, recs int) []*streams.MinedBatch {
	ts := time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC).UnixNano()
	var out []*streams.MinedBatch
	for i := range n {
		seq := first + uint64(i)
		tenant := []string{"a", "b"}[i%2]
		out = append(out, batch(seq, seq-1, tenant, ts+int64(i)*int64(time.Second), recs))
	}
	return out
}

func seqsOf(bs []*streams.MinedBatch) []uint64 {
	var out []uint64
	for _, b := range bs {
		out = append(out, b.WALSeq)
	}
	return out
}
