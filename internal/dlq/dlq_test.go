package dlq

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/streams"
)

// deadLetterReport dead-letters a report as the committer does and returns
// its dead-letter sequence.
func deadLetterReport(t *testing.T, js jetstream.JetStream, origSeq uint64) uint64 {
	t.Helper()
	ctx := context.Background()
	if err := streams.DeadLetter(ctx, js, "committer", streams.ReportSubject("e1"), origSeq, []byte(`{"id":"x"}`), "bad report", nil); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, streams.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

func reportsWith(t *testing.T, js jetstream.JetStream, seq string) int {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, streams.ReportStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := info.State.FirstSeq; i <= info.State.LastSeq && info.State.Msgs > 0; i++ {
		m, err := s.GetMsg(ctx, i)
		if err == nil && m.Header.Get(HeaderReplayOf) == seq {
			n++
		}
	}
	return n
}

func TestReplayTwiceAddsOnce(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	ctx := context.Background()
	seq := deadLetterReport(t, js, 7)
	res, err := Replay(ctx, js, seq)
	if err != nil || !res.Published || res.Stream != streams.ReportStream {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	res, err = Replay(ctx, js, seq)
	if err != nil || res.Published || !res.AlreadyDone {
		t.Fatalf("second replay: %+v, %v", res, err)
	}
	if n := reportsWith(t, js, "1"); n != 1 {
		t.Fatalf("%d replayed reports, want 1", n)
	}
	if _, err := Get(ctx, js, seq); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dead letter after replay: %v", err)
	}
}

// TestReplayCrashAfterPublish interrupts a replay between its publish and
// the dead letter's deletion: the next replay finds the published message
// through its marker and publishes nothing (Published false), so it does not
// lean on JetStream's duplicate window, which a late retry would outlive.
func TestReplayCrashAfterPublish(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	ctx := context.Background()
	seq := deadLetterReport(t, js, 9)
	crash := errors.New("crash")
	afterPublish = func() error { return crash }
	t.Cleanup(func() { afterPublish = func() error { return nil } })
	first, err := Replay(ctx, js, seq)
	if !errors.Is(err, crash) || !first.Published {
		t.Fatalf("interrupted replay: %+v, %v", first, err)
	}
	if _, err := Get(ctx, js, seq); err != nil {
		t.Fatalf("the dead letter should still be there: %v", err)
	}
	afterPublish = func() error { return nil }
	res, err := Replay(ctx, js, seq)
	if err != nil || res.Published || res.StreamSeq != first.StreamSeq {
		t.Fatalf("replay after the crash: %+v, %v (first published at %d)", res, err, first.StreamSeq)
	}
	if n := reportsWith(t, js, "1"); n != 1 {
		t.Fatalf("%d replayed reports, want 1", n)
	}
	if _, err := Get(ctx, js, seq); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dead letter after replay: %v", err)
	}
}

func TestProducerDeadLetterNotReplayable(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	ctx := context.Background()
	if err := streams.DeadLetter(ctx, js, "producer", streams.LineSubject("acme"), 0, []byte("cut line"), "too long", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(ctx, js, 1); !errors.Is(err, ErrNotReplayable) {
		t.Fatalf("replay of a producer dead letter: %v", err)
	}
	es, err := List(ctx, js, "producer", 10)
	if err != nil || len(es) != 1 || es[0].Tenant != "acme" || es[0].Reason != "too long" {
		t.Fatalf("list: %+v, %v", es, err)
	}
	if err := Drop(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	if err := Drop(ctx, js, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second drop: %v", err)
	}
	if m, b, err := Size(ctx, js); err != nil || m != 0 || b != 0 {
		t.Fatalf("size after drop: %d %d %v", m, b, err)
	}
}
