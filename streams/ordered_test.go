package streams_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/streams"
)

// TestOrderedConsumerGivesUp: an ordered consumer that cannot recreate
// itself (here its stream is gone) returns an error from Fetch after
// OrderedResetAttempts tries, instead of retrying inside Fetch for ever:
// the stage sees the error and can say so and start over.
func TestOrderedConsumerGivesUp(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "GONE", Subjects: []string{"gone.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "gone.x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, "GONE", jetstream.OrderedConsumerConfig{MaxResetAttempts: streams.OrderedResetAttempts})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}
	if err := js.DeleteStream(ctx, "GONE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err == nil {
			for range b.Messages() {
			}
			err = b.Error()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("fetch from a consumer whose stream is gone succeeded")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("fetch did not give up: the ordered consumer retries for ever")
	}
}
