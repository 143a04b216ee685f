package miner

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

// stallingStore serves object reads that deliver the first bytes and then
// nothing, until closed: what a snapshot read looks like when the server
// restarts mid-object (nats.go's GetBytes then waits for ever).
type stallingStore struct {
	jetstream.ObjectStore
}

func (s stallingStore) Get(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) (jetstream.ObjectResult, error) {
	res, err := s.ObjectStore.Get(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	return &stallingResult{ObjectResult: res, closed: make(chan struct{})}, nil
}

type stallingResult struct {
	jetstream.ObjectResult
	sent   bool
	closed chan struct{}
}

func (r *stallingResult) Read(p []byte) (int, error) {
	if !r.sent {
		r.sent = true
		return r.ObjectResult.Read(p[:1])
	}
	<-r.closed
	return 0, errors.New("read on closed object")
}

func (r *stallingResult) Close() error {
	select {
	case <-r.closed:
	default:
		close(r.closed)
	}
	return r.ObjectResult.Close()
}

// unansweredStore's Get never gets the object's info: its request went
// out as the server restarted and the reply was lost (nats.go waits for
// the context).
type unansweredStore struct {
	jetstream.ObjectStore
}

func (s unansweredStore) Get(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) (jetstream.ObjectResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestReadObject(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	obs, err := e.js.ObjectStore(ctx, streams.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	blob := bytes.Repeat([]byte("snapshot "), 50_000)
	name := streams.SnapshotName(7)
	if _, err := obs.PutBytes(ctx, name, blob); err != nil {
		t.Fatal(err)
	}
	t.Run("whole", func(t *testing.T) {
		got, err := readObject(ctx, obs, name, time.Minute)
		if err != nil || !bytes.Equal(got, blob) {
			t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(blob))
		}
	})
	t.Run("stalled read ends", func(t *testing.T) {
		_, err := readObject(ctx, stallingStore{obs}, name, 50*time.Millisecond)
		if !errors.Is(err, errReadIdle) {
			t.Fatalf("err %v, want errReadIdle", err)
		}
	})
	t.Run("an info request that is never answered ends", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_, err := readObject(cctx, unansweredStore{obs}, name, 50*time.Millisecond)
		if !errors.Is(err, errReadIdle) {
			t.Fatalf("err %v, want errReadIdle (not the caller's deadline)", err)
		}
	})
	t.Run("context ends a stalled read", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := readObject(cctx, stallingStore{obs}, name, time.Hour)
			errc <- err
		}()
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a cancelled read did not return")
		}
	})
	t.Run("loadNewest retries a stalled snapshot instead of skipping it", func(t *testing.T) {
		defer func(d time.Duration) { snapshotReadIdle = d }(snapshotReadIdle)
		snapshotReadIdle = 50 * time.Millisecond
		skipped := 0
		_, _, err := loadNewest(ctx, e.js, stallingStore{obs}, mining.DefaultConfig(), time.Minute, slog.New(slog.DiscardHandler), func() { skipped++ })
		if err == nil || skipped != 0 {
			t.Fatalf("loadNewest: err %v, skipped %d; want an error to retry and no skip", err, skipped)
		}
	})
}
