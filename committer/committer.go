package committer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/streams"
)

// AppID is the Delta txn appId of the committer's commits; the txn version
// is the high-water.
const AppID = "quarry"

// Tags on every Delta add the committer writes.
const (
	// TagReport is the id of the report the file came from.
	TagReport = "quarry.report"
	// TagSeqs lists every batch seq of that report (streams.Seqs).
	TagSeqs = streams.TagSeqs
)

// Committer is the lake's single writer. See the package doc.
type Committer struct {
	cfg   Config
	js    jetstream.JetStream
	store objstore.Store
	log   *slog.Logger
	m     *metrics

	records   *delta.Table
	templates *delta.Table
	progress  *delta.Table

	hw    atomic.Uint64
	cp    *checkpointer
	maint *maintainer // retention and compaction, see maintain.go

	mu       sync.Mutex
	status   string    // what Ready reports; "" when active and caught up
	gapSince time.Time // since when the barrier waits (zero: it does not)
	gapBatch uint64    // the batch it waits for (0: unknown)
	gapHW    uint64
	// progFailSince is when writing the progress table started failing
	// (zero: it does not), progErr the last error.
	progFailSince time.Time
	progErr       error
	// bgFail are the background jobs failing in a row (stall.go).
	bgFail map[string]*bgFailure

	// idleWait is the longest a fetch of reports waits (for the first
	// report when the committer idles): CommitInterval/2 within 10ms..1s,
	// so a quiet term still checks its consumer, maintenance and
	// progress. Tests set it.
	idleWait time.Duration
	// drainWait is how long a term waits for more reports, within a
	// commit interval and with an advance waiting, before it asks whether
	// the WAL is drained (term.go): CommitInterval/10 within 5ms..100ms.
	drainWait time.Duration
	// now is the clock of tombstone expiry and log cleanup; tests set it.
	now func() time.Time

	running atomic.Bool
	// crash, in tests, makes a term end without releasing the lease or
	// flushing, as if the process died.
	crash atomic.Bool
}

// New checks cfg and returns a committer; Run starts it.
func New(cfg Config, deps Deps) (*Committer, error) {
	cfg = cfg.Defaults()
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if deps.JS == nil {
		errs = append(errs, errors.New("committer: JetStream is required"))
	}
	if deps.Store == nil {
		errs = append(errs, errors.New("committer: object store is required"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	m, err := newMetrics(deps.Registerer, newDLQCollector(deps.JS))
	if err != nil {
		return nil, err
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Committer{
		cfg:       cfg,
		js:        deps.JS,
		store:     deps.Store,
		log:       log.With("stage", "committer", "name", cfg.Name),
		m:         m,
		records:   delta.OpenTable(deps.Store, lake.RecordsTable),
		templates: delta.OpenTable(deps.Store, lake.TemplatesTable),
		progress:  delta.OpenTable(deps.Store, lake.ProgressTable),
		status:    "starting",
		idleWait:  min(max(cfg.CommitInterval/2, 10*time.Millisecond), time.Second),
		drainWait: min(max(cfg.CommitInterval/10, 5*time.Millisecond), 100*time.Millisecond),
		now:       time.Now,
	}
	c.cp = newCheckpointer(c)
	c.maint = newMaintainer(cfg, deps.Store, c.log, time.Now)
	return c, nil
}

// HighWater is the committed high-water this committer last wrote or read
// (0 before it was active).
func (c *Committer) HighWater() uint64 { return c.hw.Load() }

// Ready is nil while this committer is active, caught up with the report
// stream and neither stalled on a missing batch nor failing to write the
// progress table for longer than StallAfter, nor failing a background job
// (checkpoints, log cleanup, maintenance) twice or more in a row for longer
// than StallAfter (stall.go); otherwise it says what it waits for.
func (c *Committer) Ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status != "" {
		return errors.New(c.status)
	}
	if !c.gapSince.IsZero() && time.Since(c.gapSince) >= c.cfg.StallAfter {
		since := time.Since(c.gapSince).Truncate(time.Second)
		if c.gapBatch != 0 {
			return fmt.Errorf("waiting for batch %d (the gap above high-water %d) since %s", c.gapBatch, c.gapHW, since)
		}
		return fmt.Errorf("waiting for the batch after high-water %d since %s", c.gapHW, since)
	}
	if !c.progFailSince.IsZero() && time.Since(c.progFailSince) >= c.cfg.StallAfter {
		return fmt.Errorf("progress table not written since %s: %w", time.Since(c.progFailSince).Truncate(time.Second), c.progErr)
	}
	return c.bgStalled()
}

func (c *Committer) setStatus(s string) {
	c.mu.Lock()
	c.status = s
	c.mu.Unlock()
}

// Run takes part in the lease election until ctx ends: as a standby it polls
// the lease; holding it, it judges reports and commits. It returns nil once
// ctx is cancelled and the active term (if any) flushed and released the
// lease.
func (c *Committer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("committer: Run called twice")
	}
	defer c.setStatus("stopped")
	cpCtx, stopCP := context.WithCancel(ctx)
	var cpWG sync.WaitGroup
	cpWG.Go(func() { c.cp.run(cpCtx) })
	defer cpWG.Wait()
	defer stopCP()
	kvs, err := c.buckets(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// After a failed term: 100ms doubling to LeaseTTL; after a lost lease
	// the next election starts at once.
	b := backoff.New(backoff.Policy{Min: min(100*time.Millisecond, c.cfg.LeaseTTL), Max: c.cfg.LeaseTTL})
	var wait time.Duration
	for {
		if wait > 0 && !backoff.Sleep(ctx, wait) {
			return nil
		}
		c.setStatus("standby: waiting for the lease")
		l, err := c.acquire(ctx, kvs.state)
		if err != nil {
			return nil // only ctx ends acquire
		}
		c.m.leaseHeld.Set(1)
		c.log.Info("lease acquired", "revision", l.revision())
		err = c.holdTerm(ctx, kvs, l)
		c.m.leaseHeld.Set(0)
		c.mu.Lock()
		c.gapSince = time.Time{}
		c.mu.Unlock()
		switch {
		case ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)):
			return nil
		case errors.Is(err, errLeaseLost), errors.Is(err, errFenced):
			c.log.Warn("lost the lease, back to standby", "err", err)
			wait = 0
			b.Reset()
		case err != nil:
			c.log.Error("active term failed, back to standby", "err", err)
			c.setStatus("standby after error: " + err.Error())
			wait = b.Next()
		}
	}
}

type buckets struct{ state, verdicts jetstream.KeyValue }

func (c *Committer) buckets(ctx context.Context) (buckets, error) {
	var b buckets
	err := backoff.Retry(ctx, backoff.Policy{Min: time.Second, Max: time.Second}, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
		defer cancel()
		var err error
		if b.state, err = c.js.KeyValue(cctx, streams.StateBucket); err == nil {
			b.verdicts, err = c.js.KeyValue(cctx, streams.VerdictsBucket)
		}
		return err
	}, func(err error, _ time.Duration) {
		c.setStatus(fmt.Sprintf("key-value buckets: %v", err))
		c.log.Warn("key-value buckets", "err", err)
	})
	if err != nil && ctx.Err() != nil {
		return b, ctx.Err()
	}
	return b, err
}

// holdTerm runs one active term with the lease renewed in the background.
func (c *Committer) holdTerm(ctx context.Context, kvs buckets, l *lease) error {
	termCtx, cancel := context.WithCancelCause(ctx)
	renewCtx, stopRenew := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		c.renew(renewCtx, kvs.state, l, func(err error) { cancel(err) })
	})
	err := c.term(termCtx, ctx, kvs, l)
	stopRenew()
	wg.Wait()
	if cause := context.Cause(termCtx); err == nil || errors.Is(err, context.Canceled) {
		if errors.Is(cause, errLeaseLost) {
			err = cause
		}
	}
	cancel(nil)
	if !c.crash.Load() {
		c.release(kvs.state, l)
	}
	return err
}

// retry runs fn until it succeeds or ctx ends, backing off between tries.
func (c *Committer) retry(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	var prev *string // the status before the first failure, restored on success
	err := backoff.Retry(ctx, retryPolicy, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
		defer cancel()
		return fn(cctx)
	}, func(err error, wait time.Duration) {
		c.log.Warn("retrying", "what", what, "err", err, "in", wait)
		if prev == nil {
			c.mu.Lock()
			p := c.status
			c.mu.Unlock()
			prev = &p
		}
		c.setStatus(fmt.Sprintf("retrying %s: %v", what, err))
	})
	switch {
	case err == nil:
		if prev != nil {
			c.setStatus(*prev)
		}
		return nil
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return err
}

// retryPolicy is the backoff of the committer's store and KV operations.
var retryPolicy = backoff.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second}
