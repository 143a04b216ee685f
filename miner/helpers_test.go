package miner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/streams"
)

// env is one embedded JetStream server with quarry's streams.
type env struct {
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv := natstest.RunServer(t)
	nc, js := natstest.Connect(t, srv.URL(), streams.Config{})
	return &env{srv: srv, nc: nc, js: js}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testConfig is a config with short intervals for tests.
func testConfig() Config {
	return Config{
		SnapshotInterval: time.Hour, // snapshots by count or on shutdown only
		RetryMin:         10 * time.Millisecond,
		RetryMax:         200 * time.Millisecond,
		PublishTimeout:   2 * time.Second,
		PositionInterval: 50 * time.Millisecond,
		DrainTimeout:     10 * time.Second,
	}
}

// publishFrames appends frames to the WAL in order and returns their WAL
// sequences.
func publishFrames(t testing.TB, js jetstream.JetStream, frames []streams.Frame) []uint64 {
	t.Helper()
	ctx := ctxT(t)
	seqs := make([]uint64, len(frames))
	for i := range frames {
		f := &frames[i]
		msg := nats.NewMsg(streams.LineSubject(f.Tenant))
		msg.Header.Set(streams.HeaderMsgID, streams.FrameMsgID(f.Source, f.FirstOffset))
		msg.Header.Set(streams.HeaderFormat, streams.FormatFrame)
		msg.Data = streams.AppendFrame(nil, f)
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatalf("publish frame %d: %v", i, err)
		}
		seqs[i] = ack.Sequence
	}
	return seqs
}

// publishRaw appends a raw payload to the WAL.
func publishRaw(t testing.TB, js jetstream.JetStream, subject string, data []byte) uint64 {
	t.Helper()
	ack, err := js.Publish(ctxT(t), subject, data)
	if err != nil {
		t.Fatalf("publish raw: %v", err)
	}
	return ack.Sequence
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// testLogger logs to the test log at debug level with -v, else warnings.
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

// running is a miner running in the background.
type running struct {
	m      *Miner
	cancel context.CancelFunc
	done   chan error
}

func startMiner(t testing.TB, js jetstream.JetStream, cfg Config, deps ...Deps) *running {
	t.Helper()
	d := Deps{JS: js}
	if len(deps) > 0 {
		d = deps[0]
		d.JS = js
	}
	if d.Log == nil {
		d.Log = testLogger(t)
	}
	m, err := New(cfg, d)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
		}
	})
	return r
}

// stop cancels the miner and returns what Run returned.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("miner did not stop within 30s")
		return nil
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// streamMsgs returns the number of messages stored in stream.
func streamMsgs(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctxT(t))
	if err != nil {
		t.Fatalf("stream %s info: %v", stream, err)
	}
	return info.State.Msgs
}

// storedMsgs returns every message stored in stream, in stream order.
func storedMsgs(t testing.TB, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := ctxT(t)
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s info: %v", stream, err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get %s/%d: %v", stream, seq, err)
		}
		out = append(out, m)
	}
	return out
}

// storedBatches returns the raw mined batches in the work queue by WAL seq,
// checking each has the right headers.
func storedBatches(t testing.TB, js jetstream.JetStream) map[uint64][]byte {
	t.Helper()
	out := map[uint64][]byte{}
	for _, m := range storedMsgs(t, js, streams.MinedStream) {
		b, err := streams.DecodeMinedBatch(m.Data)
		if err != nil {
			t.Fatalf("stored batch %d: %v", m.Sequence, err)
		}
		if got, want := m.Header.Get(streams.HeaderMsgID), streams.MinedMsgID(b.WALSeq); got != want {
			t.Fatalf("batch %d: Nats-Msg-Id %q, want %q", b.WALSeq, got, want)
		}
		if got := m.Header.Get(streams.HeaderFormat); got != streams.FormatMined {
			t.Fatalf("batch %d: format %q", b.WALSeq, got)
		}
		if m.Subject != streams.MinedSubject(b.Tenant) {
			t.Fatalf("batch %d on %s, tenant %s", b.WALSeq, m.Subject, b.Tenant)
		}
		if _, dup := out[b.WALSeq]; dup {
			t.Fatalf("batch for WAL seq %d stored twice", b.WALSeq)
		}
		out[b.WALSeq] = m.Data
	}
	return out
}

func decodeAll(t testing.TB, raw map[uint64][]byte) []*streams.MinedBatch {
	t.Helper()
	var out []*streams.MinedBatch
	for _, d := range raw {
		b, err := streams.DecodeMinedBatch(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	sortBatches(out)
	return out
}

func sortBatches(bs []*streams.MinedBatch) {
	for i := 1; i < len(bs); i++ {
		for j := i; j > 0 && bs[j].WALSeq < bs[j-1].WALSeq; j-- {
			bs[j], bs[j-1] = bs[j-1], bs[j]
		}
	}
}

// tap records every publication on the mined and template subjects with a
// core NATS subscription, duplicates included (JetStream de-duplication
// does not hide them from it).
type tap struct {
	mu      sync.Mutex
	batches map[uint64][][]byte
	events  map[string][][]byte
}

func newTap(t testing.TB, url string) *tap {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	tp := &tap{batches: map[uint64][][]byte{}, events: map[string][][]byte{}}
	sub, err := nc.Subscribe(streams.MinedSubjects, func(m *nats.Msg) {
		b, err := streams.DecodeMinedBatch(m.Data)
		if err != nil {
			return
		}
		tp.mu.Lock()
		tp.batches[b.WALSeq] = append(tp.batches[b.WALSeq], m.Data)
		tp.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	sub2, err := nc.Subscribe(streams.TemplateSubjects, func(m *nats.Msg) {
		tp.mu.Lock()
		id := m.Header.Get(streams.HeaderMsgID)
		tp.events[id] = append(tp.events[id], m.Data)
		tp.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	sub2.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return tp
}

func (tp *tap) seen(seq uint64) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.batches[seq])
}

// checkIdentical fails when two publications of one batch or event differ.
func (tp *tap) checkIdentical(t testing.TB) {
	t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for seq, pubs := range tp.batches {
		for _, p := range pubs[1:] {
			if !bytes.Equal(p, pubs[0]) {
				t.Errorf("batch of WAL seq %d republished with different bytes", seq)
			}
		}
	}
	for id, pubs := range tp.events {
		for _, p := range pubs[1:] {
			if !bytes.Equal(p, pubs[0]) {
				t.Errorf("template event %s republished with different bytes", id)
			}
		}
	}
}

// corpus builds frames of several tenants with lines that exercise the
// engine: variable fields, odd whitespace, punctuation, non-ASCII text,
// empty lines, a literal "<*>", over-long lines and too many tokens.
func corpus(seed uint64, nframes int) []streams.Frame {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	tenants := []string{"acme", "globex", "initech"}
	users := []string{"alice", "bob", "carol", "dave", "eve", "mallory"}
	actions := []string{"login", "logout", "startup", "shutdown", "reload"}
	gens := []func() string{
		func() string {
			return fmt.Sprintf("2026-11-29T10:%02d:%02d.%03dZ INFO user %s %s from 10.0.%d.%d", rng.IntN(60), rng.IntN(60), rng.IntN(1000),
				users[rng.IntN(len(users))], actions[rng.IntN(len(actions))], rng.IntN(256), rng.IntN(256))
		},
		func() string {
			return fmt.Sprintf("GET /api/v1/items/%d?page=%d HTTP/1.1 %d %dms", rng.IntN(100000), rng.IntN(20), []int{200, 404, 500}[rng.IntN(3)], rng.IntN(900))
		},
		func() string {
			return fmt.Sprintf("worker-%d:\tprocessed  %d jobs in %.3fs (queue=%s)", rng.IntN(8), rng.IntN(5000), rng.Float64()*10, []string{"fast", "slow", "bulk"}[rng.IntN(3)])
		},
		func() string {
			return fmt.Sprintf("Größe der Datei %s: %d Bytes — 日本語 %x", users[rng.IntN(len(users))], rng.IntN(1<<20), rng.Uint64())
		},
		func() string {
			return fmt.Sprintf("kernel: [%8.6f] eth%d: link up, %d Mbps", rng.Float64()*1000, rng.IntN(4), []int{100, 1000, 10000}[rng.IntN(3)])
		},
		func() string { return "" },
		func() string { return "   " },
		func() string { return fmt.Sprintf("literal <*> marker %d and <*>", rng.IntN(10)) },
		func() string { return fmt.Sprintf("trailing space %d ", rng.IntN(10)) },
		func() string { return strings.Repeat("x", mining.DefaultMaxLineBytes+1+rng.IntN(100)) },
		func() string { return strings.Repeat("a,", mining.DefaultMaxTokens) + fmt.Sprint(rng.IntN(9)) },
		func() string {
			return fmt.Sprintf("{\"level\":\"warn\",\"msg\":\"disk %s at %d%%\",\"host\":\"db-%d\"}", []string{"sda", "sdb"}[rng.IntN(2)], rng.IntN(100), rng.IntN(5))
		},
		func() string {
			return fmt.Sprintf("session %s closed after %d s\r", users[rng.IntN(len(users))], rng.IntN(3600))
		},
	}
	weights := []int{30, 25, 15, 8, 8, 1, 1, 2, 3, 1, 1, 4, 5}
	total := 0
	for _, w := range weights {
		total += w
	}
	pick := func() string {
		n := rng.IntN(total)
		for i, w := range weights {
			if n < w {
				return gens[i]()
			}
			n -= w
		}
		panic("unreachable")
	}
	offsets := map[string]uint64{}
	frames := make([]streams.Frame, nframes)
	for i := range frames {
		tenant := tenants[rng.IntN(len(tenants))]
		src := "src-" + tenant
		n := 1 + rng.IntN(40)
		f := streams.Frame{Source: src, Tenant: tenant, FirstOffset: offsets[src]}
		for j := 0; j < n; j++ {
			line := pick()
			rec := streams.Record{TS: int64(1_790_000_000_000_000_000 + i*1000 + j), TSSource: streams.TSSource(j % 3), Text: line}
			if rng.IntN(4) == 0 {
				rec.Attrs = []streams.Attr{{Key: "host", Value: fmt.Sprintf("h%d", rng.IntN(3))}, {Key: "op", Value: "insert"}}
			}
			f.Records = append(f.Records, rec)
			offsets[src] += uint64(len(line) + 1)
		}
		f.NextOffset = offsets[src]
		frames[i] = f
	}
	return frames
}

// checkBatches checks the whole output against the frames: one batch per
// WAL message with an unbroken PrevSeq chain, every (id, version) defined
// in exactly one batch, and every record rendering back to its line byte
// for byte.
func checkBatches(t testing.TB, frames []streams.Frame, seqs []uint64, batches []*streams.MinedBatch) {
	t.Helper()
	if len(batches) != len(frames) {
		t.Fatalf("%d batches for %d frames", len(batches), len(frames))
	}
	type key struct {
		id  uint64
		ver uint32
	}
	texts := map[key]string{}
	var prev uint64
	lines := 0
	for i, b := range batches {
		if b.WALSeq != seqs[i] || b.PrevSeq != prev {
			t.Fatalf("batch %d: wal seq %d prev %d, want %d prev %d", i, b.WALSeq, b.PrevSeq, seqs[i], prev)
		}
		prev = b.WALSeq
		for _, d := range b.Templates {
			if d.Kind == streams.TemplateMerged {
				continue // a merge defines no version
			}
			k := key{d.ID, d.Version}
			if _, dup := texts[k]; dup {
				t.Fatalf("template %d version %d defined twice", d.ID, d.Version)
			}
			if (d.Kind == streams.TemplateCreated) != (d.Version == 1) {
				t.Fatalf("template %d version %d has kind %s", d.ID, d.Version, d.Kind)
			}
			if d.Kind == streams.TemplateChanged && texts[key{d.ID, d.Version - 1}] != d.Previous {
				t.Fatalf("template %d version %d: previous %q is not version %d", d.ID, d.Version, d.Previous, d.Version-1)
			}
			texts[k] = d.Text
		}
		f := &frames[i]
		if b.Tenant != f.Tenant || b.Source != f.Source || b.FirstOffset != f.FirstOffset || b.NextOffset != f.NextOffset ||
			b.Subject != streams.LineSubject(f.Tenant) {
			t.Fatalf("batch %d header %+v does not match frame", b.WALSeq, b)
		}
		if len(b.Records)+int(b.Quarantined) != len(f.Records) {
			t.Fatalf("batch %d: %d records + %d quarantined, frame has %d", b.WALSeq, len(b.Records), b.Quarantined, len(f.Records))
		}
		for _, r := range b.Records {
			orig := f.Records[r.Index]
			text, ok := texts[key{r.TemplateID, r.TemplateVersion}]
			if !ok {
				t.Fatalf("batch %d record %d: template %d version %d not defined in this or an earlier batch", b.WALSeq, r.Index, r.TemplateID, r.TemplateVersion)
			}
			got, err := mining.Render(text, r.Params)
			if err != nil {
				t.Fatalf("batch %d record %d: %v", b.WALSeq, r.Index, err)
			}
			if got != orig.Text {
				t.Fatalf("batch %d record %d does not reconstruct:\n got  %q\n want %q\n template %q params %q", b.WALSeq, r.Index, got, orig.Text, text, r.Params)
			}
			if r.TS != orig.TS || r.TSSource != orig.TSSource || fmt.Sprint(r.Attrs) != fmt.Sprint(orig.Attrs) {
				t.Fatalf("batch %d record %d: ts/ts source/attrs differ", b.WALSeq, r.Index)
			}
			lines++
		}
	}
	if lines == 0 {
		t.Fatal("no records checked")
	}
}
