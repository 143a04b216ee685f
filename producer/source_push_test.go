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

// A request is published as soon as nothing is queued behind it, not after
// the linger (an hour here); requests queued behind each other share a
// frame.
func TestPushRequestNotLingered(t *testing.T) {
	js := testJS(t)
	l, p, err := NewPush(Config{Tenant: "eager", Linger: time.Hour}, Deps{JS: js})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 3)
	done := func(_ Ingested, err error) { res <- err }
	// Two requests queued before the source runs: one batch, one frame.
	for _, e := range [][]Entry{{{Text: "a1"}, {Text: "a2"}}, {{Text: "b1"}}} {
		if err := p.Submit(ctx, e, done); err != nil {
			t.Fatal(err)
		}
	}
	runErr := make(chan error, 1)
	go func() { runErr <- l.Run(ctx) }()
	wait := func(n int) {
		t.Helper()
		awaitAnswers(t, res, n, "request not answered: its frame waits for the linger")
	}
	wait(2)
	// A request alone, after the first were answered: a frame of its own.
	if err := p.Submit(ctx, []Entry{{Text: "c1"}}, done); err != nil {
		t.Fatal(err)
	}
	wait(1)
	var got [][]string
	for _, f := range walFrames(t, js, streams.LineSubject("eager")) {
		var texts []string
		for _, r := range f.Records {
			texts = append(texts, r.Text)
		}
		got = append(got, texts)
	}
	if len(got) != 2 || strings.Join(got[0], ",") != "a1,a2,b1" || strings.Join(got[1], ",") != "c1" {
		t.Fatalf("frames %q, want [a1 a2 b1] [c1]", got)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
}

// A request that ends while a frame of its source is in flight is held
// until that frame is resolved, and the requests arriving meanwhile share
// its frame (group commit); with nothing in flight it is cut at once.
func TestPushRequestsShareFrameWhileOneInFlight(t *testing.T) {
	js := testJS(t)
	l, p, err := NewPush(Config{Tenant: "group", Linger: time.Hour}, Deps{JS: js})
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{}, 4)
	l.hookHold = func() { held <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- l.Run(ctx) }()
	res := make(chan error, 3)
	done := func(_ Ingested, err error) { res <- err }
	answered := func(n int) {
		t.Helper()
		awaitAnswers(t, res, n, "request not answered")
	}
	submit := func(e ...Entry) {
		t.Helper()
		if err := p.Submit(ctx, e, done); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing in flight: a frame at once.
	submit(Entry{Text: "a1"})
	answered(1)
	// Something of the source in flight (a barrier in the publisher's
	// callback order that resolves when the test says).
	release := make(chan struct{})
	l.pub.AfterResolved(func() { <-release })
	submit(Entry{Text: "b1"}, Entry{Text: "b2"})
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("request b published while a frame was in flight, not held")
	}
	submit(Entry{Text: "c1"})
	close(release)
	answered(2)
	var got [][]string
	for _, f := range walFrames(t, js, streams.LineSubject("group")) {
		var texts []string
		for _, r := range f.Records {
			texts = append(texts, r.Text)
		}
		got = append(got, texts)
	}
	// c1 shares b's frame unless the release reached the loop before c1
	// did (Submit returns once c1 is queued, not framed).
	var frames []string
	for _, f := range got {
		frames = append(frames, strings.Join(f, ","))
	}
	if s := strings.Join(frames, " | "); s != "a1 | b1,b2,c1" && s != "a1 | b1,b2 | c1" {
		t.Fatalf("frames %q, want [a1] [b1 b2 c1]", got)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
}

// awaitAnswers takes n answers from res, failing on an error or, with why,
// on an answer that has not come after 30s.
func awaitAnswers(t *testing.T, res <-chan error, n int, why string) {
	t.Helper()
	for range n {
		select {
		case err := <-res:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal(why)
		}
	}
}
