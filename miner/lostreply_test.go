package miner

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/streams"
)

// lostReplyJS answers the first lookup of the snapshot bucket, the
// positions bucket and the streams never, until the caller's context
// ends: a request sent as the NATS server restarts, whose reply is lost
// (nats.go then waits for its context, not for the reconnect).
type lostReplyJS struct {
	jetstream.JetStream
	lost atomic.Int32
}

func (f *lostReplyJS) swallow(ctx context.Context) error {
	f.lost.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

func (f *lostReplyJS) ObjectStore(ctx context.Context, bucket string) (jetstream.ObjectStore, error) {
	if f.lost.Load() == 0 {
		return nil, f.swallow(ctx)
	}
	return f.JetStream.ObjectStore(ctx, bucket)
}

func (f *lostReplyJS) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	if f.lost.Load() == 1 {
		return nil, f.swallow(ctx)
	}
	return f.JetStream.KeyValue(ctx, bucket)
}

func (f *lostReplyJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	if f.lost.Load() == 2 && name == streams.MinedStream {
		return nil, f.swallow(ctx)
	}
	return f.JetStream.Stream(ctx, name)
}

// TestStartLookupsLostReply: each lookup at start whose reply is lost is
// asked again after op_timeout, so the miner starts and mines although a
// snapshot may take an hour (snapshot_timeout). Without the bound it
// waited snapshot_timeout for each (a chaos soak's miner sat out a whole
// round after a NATS restart at its start).
func TestStartLookupsLostReply(t *testing.T) {
	e := newEnv(t)
	frames := corpus(7, 3)
	seqs := publishFrames(t, e.js, frames)
	cfg := testConfig()
	cfg.SnapshotTimeout = time.Hour
	cfg.OpTimeout = 100 * time.Millisecond
	fjs := &lostReplyJS{JetStream: e.js}
	r := startMiner(t, fjs, cfg)
	waitFor(t, 30*time.Second, "the frames mined after three lost replies", func() bool {
		return streamMsgs(t, e.js, streams.MinedStream) >= uint64(len(seqs))
	})
	if n := fjs.lost.Load(); n != 3 {
		t.Fatalf("%d replies lost, want 3", n)
	}
	if err := r.stop(t); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("stop: %v", err)
	}
}
