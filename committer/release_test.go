package committer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/streams"
)

// TestReleaseAfterLandedRenewal: a renewal the holder gave up waiting for
// (cancelled when its term ended) but the server applied leaves the lease
// at a revision the holder does not know; release still deletes it, as it
// still names the holder. A lease another committer took is left alone.
func TestReleaseAfterLandedRenewal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := New(testConfig("c1"), Deps{JS: e.js, Store: e.local})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := e.skv.Create(ctx, streams.KeyLease, c.leaseBytes(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	l := &lease{rev: rev, validUntil: time.Now().Add(time.Hour)}
	// The landed renewal: the holder's l.rev stays at rev.
	if _, err := e.skv.Update(ctx, streams.KeyLease, c.leaseBytes(time.Now()), rev); err != nil {
		t.Fatal(err)
	}
	c.release(e.skv, l)
	if _, err := e.skv.Get(ctx, streams.KeyLease); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("lease after release: %v, want deleted", err)
	}

	// Another committer's lease is not deleted.
	other, err := New(testConfig("c2"), Deps{JS: e.js, Store: e.local})
	if err != nil {
		t.Fatal(err)
	}
	rev, err = e.skv.Create(ctx, streams.KeyLease, c.leaseBytes(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	l = &lease{rev: rev, validUntil: time.Now().Add(time.Hour)}
	if _, err := e.skv.Update(ctx, streams.KeyLease, other.leaseBytes(time.Now()), rev); err != nil {
		t.Fatal(err)
	}
	c.release(e.skv, l)
	if _, err := e.skv.Get(ctx, streams.KeyLease); err != nil {
		t.Fatalf("c2's lease after c1's release: %v, want kept", err)
	}
}
