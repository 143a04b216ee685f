package committer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// deafJS hands out report consumers whose fetches come back empty, with no
// error, while deaf is set: what an R1 ordered consumer on a dead cluster
// node looks like from the client (its fetches only time out).
type deafJS struct {
	jetstream.JetStream
	deaf      atomic.Bool
	consumers atomic.Int32
}

func (f *deafJS) OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	c, err := f.JetStream.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, err
	}
	f.consumers.Add(1)
	return &deafConsumer{Consumer: c, deaf: f.deaf.Load()}, nil
}

// deafConsumer stays deaf for its whole life when it was made deaf.
type deafConsumer struct {
	jetstream.Consumer
	deaf bool
}

func (c *deafConsumer) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	if c.deaf {
		time.Sleep(5 * time.Millisecond) // a fetch's wait, shortened
		return emptyBatch{}, nil
	}
	return c.Consumer.Fetch(n, opts...)
}

func (c *deafConsumer) FetchNoWait(n int) (jetstream.MessageBatch, error) {
	if c.deaf {
		return emptyBatch{}, nil
	}
	return c.Consumer.FetchNoWait(n)
}

type emptyBatch struct{}

func (emptyBatch) Messages() <-chan jetstream.Msg {
	ch := make(chan jetstream.Msg)
	close(ch)
	return ch
}

func (emptyBatch) Error() error { return nats.ErrTimeout }

// TestReportConsumerDeaf: a report consumer that delivers nothing and
// reports no error, while the report stream holds reports it has not
// delivered, ends the term; the next term's consumer delivers them and
// the high-water moves on. A quiet stream does not end the term.
func TestReportConsumerDeaf(t *testing.T) {
	e := newEnv(t)
	fjs := &deafJS{JetStream: e.js}
	fjs.deaf.Store(true) // the first term's consumer is deaf from the start
	e.publish(e.encode("w.1", chain(1, 2)...))
	c, err := New(testConfig("a"), Deps{JS: fjs, Store: e.local, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	eventually(t, 60*time.Second, "a second term with a new report consumer", func() bool { return fjs.consumers.Load() >= 2 })
	fjs.deaf.Store(false)
	eventually(t, 60*time.Second, "the high-water passes the reports the deaf consumer held back", func() bool {
		return c.HighWater() >= 2
	})
	// Quiet now: every report is delivered, so empty fetches are no sign of
	// a stuck consumer and the term goes on. Three check intervals pass
	// (each interval is at least 2s: stuckWatch.every).
	n := fjs.consumers.Load()
	e.publish(e.encode("w.2", batch{3, 2}))
	e.waitHW(c, 3)
	deadline := time.Now().Add(7 * time.Second)
	for time.Now().Before(deadline) {
		if got := fjs.consumers.Load(); got != n {
			t.Fatalf("a quiet stream ended the term: %d consumers, want %d", got, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
