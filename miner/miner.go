package miner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/streams"
)

// Stage is the miner's name in dead letters and logs.
const Stage = "miner"

// KeySnapshot is the key in streams.PositionsBucket holding the WAL sequence
// of the miner's newest snapshot: a restart replays the WAL from the next
// sequence, so the WAL must keep every message above it.
const KeySnapshot = streams.KeyMiner + ".snapshot"

// InvalidTenant is the tenant of the empty batch of a WAL message whose
// tenant cannot be told.
const InvalidTenant = "_invalid"

// HeaderRecordIndex is set on a dead-lettered record: its index in the frame.
const HeaderRecordIndex = "Quarry-Record-Index"

// Errors callers may branch on.
var (
	// ErrBatchTooLarge: a mined batch exceeds the work queue's max message
	// size. The miner stops; nothing is lost.
	ErrBatchTooLarge = errors.New("mined batch exceeds the max message size")
	// ErrWALBehind: the WAL's last sequence is below the newest snapshot's.
	ErrWALBehind = errors.New("WAL is behind the miner snapshot")
	// ErrWALPurged: the WAL was purged above the restored snapshot, so the
	// messages between them cannot be replayed. The miner refuses to skip
	// them (ids would silently differ from an uninterrupted run); the
	// committer purges below the oldest stored snapshot to prevent it.
	ErrWALPurged = errors.New("WAL purged above the miner snapshot")
	// ErrRunning: Run was called while the miner is running.
	ErrRunning = errors.New("miner already running")
)

// Miner is the WAL consumer stage. Create it with New and drive it with Run.
type Miner struct {
	cfg     Config
	js      jetstream.JetStream
	log     *slog.Logger
	metrics *metrics

	running atomic.Bool
	// waiting is what the miner waits for (nil when healthy).
	waiting atomic.Pointer[string]
	// blockedSince is when a publish started failing (unix nanos, 0 = not).
	blockedSince atomic.Int64
	blockedErr   atomic.Pointer[string]
	// oldestPending is when the oldest unacked publish was sent.
	oldestPending atomic.Int64
	inFlight      atomic.Int64
}

// New checks cfg (after Defaults) and returns a miner.
func New(cfg Config, deps Deps) (*Miner, error) {
	cfg = cfg.Defaults()
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if deps.JS == nil {
		errs = append(errs, errors.New("miner: deps.JS is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	met, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Miner{cfg: cfg, js: deps.JS, log: log.With("stage", Stage), metrics: met}
	m.setWaiting("not started")
	return m, nil
}

// Config returns the effective configuration.
func (m *Miner) Config() Config { return m.cfg }

func (m *Miner) setWaiting(s string) {
	if s == "" {
		m.waiting.Store(nil)
		return
	}
	m.waiting.Store(&s)
}

// Ready returns nil while the miner runs and can publish; otherwise it says
// what the miner waits for.
func (m *Miner) Ready() error {
	if w := m.waiting.Load(); w != nil {
		return errors.New(*w)
	}
	if nc := m.js.Conn(); nc != nil && !nc.IsConnected() {
		return fmt.Errorf("waiting for the NATS connection (%s)", nc.Status())
	}
	if since := m.blockedSince.Load(); since != 0 {
		reason := ""
		if e := m.blockedErr.Load(); e != nil {
			reason = ": " + *e
		}
		return fmt.Errorf("publishing blocked since %s (%d WAL messages in flight)%s",
			time.Unix(0, since).UTC().Format(time.RFC3339), m.inFlight.Load(), reason)
	}
	if old := m.oldestPending.Load(); old != 0 && time.Since(time.Unix(0, old)) > m.cfg.BlockedAfter {
		return fmt.Errorf("publishing blocked since %s: no ack yet (%d WAL messages in flight)",
			time.Unix(0, old).UTC().Format(time.RFC3339), m.inFlight.Load())
	}
	return nil
}

// Run mines the WAL until ctx ends (then it drains and returns nil) or a
// fatal error (returned).
func (m *Miner) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer m.running.Store(false)
	defer m.setWaiting("stopped")

	r := &runner{Miner: m, pubBackoff: backoff.New(m.cfg.retryPolicy())}
	if err := r.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return r.run(ctx)
}

// retry calls fn, each attempt bounded by timeout, until it succeeds or
// ctx ends, reporting what it waits for.
func (m *Miner) retry(ctx context.Context, what string, timeout time.Duration, fn func(ctx context.Context) error) error {
	err := backoff.Retry(ctx, m.cfg.retryPolicy(), func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return fn(cctx)
	}, func(err error, wait time.Duration) {
		m.setWaiting(fmt.Sprintf("waiting for %s: %v", what, err))
		m.log.Warn("retry", "what", what, "err", err, "backoff", wait)
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
