package committer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/streams"
)

// leaseValue is the JSON value of streams.KeyLease.
type leaseValue struct {
	Holder    string    `json:"holder"`
	ExpiresAt time.Time `json:"expires_at"`
}

// errLeaseLost: another committer took the lease, or it could not be renewed
// before it lapsed.
var errLeaseLost = errors.New("committer lease lost")

// errFenced: a Delta version this committer meant to write was written by
// someone else.
var errFenced = errors.New("committer fenced: another writer committed the version")

// lease is a held lease. validUntil is on the local monotonic clock: the
// time the last successful renewal was sent plus the TTL minus a margin, so
// the holder stops trusting its lease before any standby can see it lapse.
type lease struct {
	mu         sync.Mutex
	rev        uint64
	validUntil time.Time
	lost       bool
}

func (l *lease) valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost && time.Now().Before(l.validUntil)
}

func (l *lease) revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

func (c *Committer) leaseMargin() time.Duration { return c.cfg.LeaseTTL / 10 }

func (c *Committer) leaseBytes(now time.Time) []byte {
	b, _ := json.Marshal(leaseValue{Holder: c.cfg.Name, ExpiresAt: now.Add(c.cfg.LeaseTTL).UTC()})
	return b
}

// standbyObs is what a standby remembers of the lease it watches.
type standbyObs struct {
	rev    uint64
	seenAt time.Time
}

// tryAcquire makes one attempt at the lease. It returns the lease when this
// committer holds it now, nil when another holder's lease is live.
func (c *Committer) tryAcquire(ctx context.Context, kv jetstream.KeyValue, obs *standbyObs) (*lease, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	sent := time.Now()
	ent, err := kv.Get(ctx, streams.KeyLease)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		rev, err := kv.Create(ctx, streams.KeyLease, c.leaseBytes(sent))
		if errors.Is(err, jetstream.ErrKeyExists) {
			c.setStatus("standby: lost the race for a free lease")
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("create lease: %w", err)
		}
		return &lease{rev: rev, validUntil: sent.Add(c.cfg.LeaseTTL - c.leaseMargin())}, nil
	case err != nil:
		return nil, fmt.Errorf("read lease: %w", err)
	}
	var v leaseValue
	if err := json.Unmarshal(ent.Value(), &v); err != nil {
		c.log.Warn("unreadable lease value, treating it as lapsed", "err", err)
	}
	if ent.Revision() != obs.rev {
		obs.rev, obs.seenAt = ent.Revision(), time.Now()
	}
	// Lapsed: the holder's own expiry passed, or we watched the same
	// revision for a whole TTL (robust against clock skew), or it is ours
	// from an earlier term.
	lapsed := v.Holder == c.cfg.Name || time.Now().After(v.ExpiresAt) || time.Since(obs.seenAt) >= c.cfg.LeaseTTL
	if !lapsed {
		c.setStatus(fmt.Sprintf("standby: lease held by %s (expires %s)", v.Holder, v.ExpiresAt.Format(time.RFC3339Nano)))
		return nil, nil
	}
	rev, err := kv.Update(ctx, streams.KeyLease, c.leaseBytes(sent), ent.Revision())
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		c.setStatus("standby: lost the race for a lapsed lease")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take over lease from %s: %w", v.Holder, err)
	}
	c.log.Info("lease taken over", "previous_holder", v.Holder)
	return &lease{rev: rev, validUntil: sent.Add(c.cfg.LeaseTTL - c.leaseMargin())}, nil
}

// acquire polls until this committer holds the lease or ctx ends.
func (c *Committer) acquire(ctx context.Context, kv jetstream.KeyValue) (*lease, error) {
	var obs standbyObs
	poll := max(c.cfg.LeaseTTL/5, 20*time.Millisecond)
	for {
		l, err := c.tryAcquire(ctx, kv, &obs)
		if l != nil {
			return l, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			c.log.Warn("lease attempt", "err", err)
			c.setStatus("standby: " + err.Error())
		}
		if !backoff.Sleep(ctx, poll) {
			return nil, ctx.Err()
		}
	}
}

// renew keeps l alive every TTL/3 until ctx ends; when the lease is lost it
// marks it and calls lost.
func (c *Committer) renew(ctx context.Context, kv jetstream.KeyValue, l *lease, lost func(error)) {
	every := c.cfg.LeaseTTL / 3
	retry := max(c.cfg.LeaseTTL/20, 5*time.Millisecond)
	wait := every
	for {
		if !backoff.Sleep(ctx, wait) {
			return
		}
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, min(c.cfg.OpTimeout, every))
		rev, err := kv.Update(cctx, streams.KeyLease, c.leaseBytes(sent), l.revision())
		cancel()
		switch {
		case err == nil:
			l.mu.Lock()
			l.rev, l.validUntil = rev, sent.Add(c.cfg.LeaseTTL-c.leaseMargin())
			l.mu.Unlock()
			wait = every
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound):
			l.mu.Lock()
			l.lost = true
			l.mu.Unlock()
			lost(fmt.Errorf("%w: renewal: %w", errLeaseLost, err))
			return
		}
		if !l.valid() {
			l.mu.Lock()
			l.lost = true
			l.mu.Unlock()
			lost(fmt.Errorf("%w: not renewed in time: %w", errLeaseLost, err))
			return
		}
		c.log.Warn("lease renewal", "err", err)
		wait = retry
	}
}

// release deletes the lease if this committer still holds it, so a standby
// takes over at once.
func (c *Committer) release(kv jetstream.KeyValue, l *lease) {
	if l == nil || !l.valid() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.OpTimeout)
	defer cancel()
	err := kv.Delete(ctx, streams.KeyLease, jetstream.LastRevision(l.revision()))
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		// A renewal cancelled by the term's end may still have landed
		// (the server applied it, the client gave up waiting): the lease
		// is then ours at a later revision. Our name is written only by us.
		var v leaseValue
		if ent, gerr := kv.Get(ctx, streams.KeyLease); gerr == nil && json.Unmarshal(ent.Value(), &v) == nil && v.Holder == c.cfg.Name {
			err = kv.Delete(ctx, streams.KeyLease, jetstream.LastRevision(ent.Revision()))
		}
	}
	if err != nil {
		c.log.Warn("lease release", "err", err)
		return
	}
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	c.log.Info("lease released")
}
