package committer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/streams"
)

// TestReportConsumerLost: the report stream's consumer can vanish under an
// active committer (it lived on a cluster node that died, or an operator
// deleted it). The committer must not fetch from it forever: it ends the
// term and a new term replays the stream with a new consumer.
func TestReportConsumerLost(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := testConfig("a")
	e.publish(e.encode("w.1", chain(1, 2)...))
	a := e.start(cfg, nil)
	e.waitHW(a.c, 2)
	s, err := e.js.Stream(ctx, streams.ReportStream)
	if err != nil {
		t.Fatal(err)
	}
	// The ordered consumer may be recreated between the listing and the
	// delete (its name changes): a name that is gone already is fine, as
	// long as one live consumer was deleted.
	deleted := 0
	eventually(t, 30*time.Second, "a report stream consumer deleted", func() bool {
		for name := range s.ConsumerNames(ctx).Name() {
			err := s.DeleteConsumer(ctx, name)
			if err == nil {
				deleted++
			} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
				t.Fatal(err)
			}
		}
		return deleted > 0
	})
	e.publish(e.encode("w.2", batch{3, 2}, batch{4, 3}))
	eventually(t, 30*time.Second, "the high-water passes the reports published after the consumer vanished", func() bool {
		return a.c.HighWater() >= 4
	})
	a.stop(t)
}

// failingJS hands out report consumers whose fetches fail with "no
// responders" while fail is set, as a consumer on a dead cluster node does.
type failingJS struct {
	jetstream.JetStream
	fail      atomic.Bool
	consumers atomic.Int32
}

func (f *failingJS) OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	c, err := f.JetStream.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, err
	}
	f.consumers.Add(1)
	return &failingConsumer{Consumer: c, f: f}, nil
}

type failingConsumer struct {
	jetstream.Consumer
	f *failingJS
}

func (c *failingConsumer) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	if c.f.fail.Load() {
		return nil, nats.ErrNoResponders
	}
	return c.Consumer.Fetch(n, opts...)
}

func (c *failingConsumer) FetchNoWait(n int) (jetstream.MessageBatch, error) {
	if c.f.fail.Load() {
		return nil, nats.ErrNoResponders
	}
	return c.Consumer.FetchNoWait(n)
}

// TestReportConsumerStuck: a consumer that only ever answers "no responders"
// ends the term; the next term's new consumer catches up.
func TestReportConsumerStuck(t *testing.T) {
	e := newEnv(t)
	fjs := &failingJS{JetStream: e.js}
	cfg := testConfig("a")
	e.publish(e.encode("w.1", chain(1, 2)...))
	c, err := New(cfg, Deps{JS: fjs, Store: e.local, Log: testLog(t)})
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
	e.waitHW(c, 2)
	fjs.fail.Store(true)
	e.publish(e.encode("w.2", batch{3, 2}, batch{4, 3}))
	eventually(t, 30*time.Second, "a new term with a new report consumer", func() bool { return fjs.consumers.Load() >= 2 })
	fjs.fail.Store(false)
	eventually(t, 30*time.Second, "the high-water passes the reports published while fetches failed", func() bool {
		return c.HighWater() >= 4
	})
}
