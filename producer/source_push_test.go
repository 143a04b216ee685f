package producer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/streams"
)

// A push batch's done runs only once every line is durable: right after
// it, the WAL holds the good lines with their attributes and times, and
// the dead-letter stream the bad one with its reason. After the source
// stopped, Submit refuses.
func TestPushAnsweredWhenDurable(t *testing.T) {
	js := testJS(t)
	l, p, err := NewPush(Config{Tenant: "push", Linger: 20 * time.Millisecond}, Deps{JS: js})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- l.Run(ctx) }()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	type result struct {
		in  Ingested
		err error
	}
	res := make(chan result, 1)
	entries := []Entry{
		{Text: "first", Attrs: []streams.Attr{{Key: "host", Value: "h1"}}, TS: ts},
		{Text: "garbage", Bad: "not syslog"},
		{Text: "2026-01-02T03:04:06Z third"}, // no TS: the stamper finds it
	}
	if err := p.Submit(ctx, entries, func(in Ingested, err error) { res <- result{in, err} }); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil || r.in != (Ingested{Source: "push-push", FirstOffset: 0, NextOffset: 3}) {
		t.Fatalf("answer %+v %v", r.in, r.err)
	}
	var recs []streams.Record
	for _, f := range walFrames(t, js, streams.LineSubject("push")) {
		recs = append(recs, f.Records...)
	}
	if len(recs) != 2 || recs[0].Text != "first" || recs[0].TS != ts.UnixNano() || recs[0].TSSource != streams.TSEvent ||
		len(recs[0].Attrs) != 1 || recs[1].Text != "2026-01-02T03:04:06Z third" || recs[1].TSSource != streams.TSEvent {
		t.Fatalf("WAL right after the answer: %+v", recs)
	}
	st, info := streamInfo(t, js, streams.DeadLetterStream)
	if info.State.Msgs != 1 {
		t.Fatalf("dead-letter stream holds %d right after the answer, want 1", info.State.Msgs)
	}
	m, err := st.GetMsg(context.Background(), info.State.FirstSeq)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "garbage" || !strings.Contains(m.Header.Get(streams.HeaderReason), "not syslog") {
		t.Fatalf("dead letter %q %v", m.Data, m.Header)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	if err := p.Submit(context.Background(), entries, func(Ingested, error) {}); !errors.Is(err, ErrPushStopped) {
		t.Fatalf("submit after stop: %v", err)
	}
}

// A restarted push source continues its offsets after what the WAL holds,
// so its frame ids never repeat and no frame is de-duplicated away.
func TestPushRestartContinuesOffsets(t *testing.T) {
	js := testJS(t)
	var nexts []uint64
	for run := range 2 {
		l, p, err := NewPush(Config{Tenant: "again", Linger: time.Millisecond}, Deps{JS: js})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		runErr := make(chan error, 1)
		go func() { runErr <- l.Run(ctx) }()
		res := make(chan Ingested, 1)
		if err := p.Submit(ctx, []Entry{{Text: "a"}, {Text: "b"}}, func(in Ingested, err error) {
			if err != nil {
				t.Errorf("run %d: %v", run, err)
			}
			res <- in
		}); err != nil {
			t.Fatal(err)
		}
		in := <-res
		if run == 1 && in.FirstOffset < nexts[0] {
			t.Fatalf("restart wrote from offset %d, the first run ended at %d", in.FirstOffset, nexts[0])
		}
		nexts = append(nexts, in.NextOffset)
		cancel()
		if err := <-runErr; err != nil {
			t.Fatal(err)
		}
	}
	if got := walLines(t, js, streams.LineSubject("again")); len(got) != 4 {
		t.Fatalf("WAL %q, want 4 lines", got)
	}
}
