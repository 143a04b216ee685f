package committer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/crashpoint"
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
	// TagSeqs lists every batch seq of that report as ranges, e.g. "5-9,12".
	TagSeqs = "quarry.seqs"
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

	hw atomic.Uint64

	mu       sync.Mutex
	status   string    // what Ready reports; "" when active and caught up
	gapSince time.Time // since when the barrier waits (zero: it does not)
	gapBatch uint64    // the batch it waits for (0: unknown)
	gapHW    uint64

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
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Committer{
		cfg:       cfg,
		js:        deps.JS,
		store:     deps.Store,
		log:       log.With("stage", "committer", "name", cfg.Name),
		m:         m,
		records:   delta.OpenTable(deps.Store, lake.RecordsTable),
		templates: delta.OpenTable(deps.Store, lake.TemplatesTable),
		status:    "starting",
	}, nil
}

// HighWater is the committed high-water this committer last wrote or read
// (0 before it was active).
func (c *Committer) HighWater() uint64 { return c.hw.Load() }

// Ready is nil while this committer is active, caught up with the report
// stream and not stalled on a missing batch for longer than StallAfter;
// otherwise it says what it waits for.
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
	return nil
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

// tableState is what a term knows of one Delta table: it is the only writer
// while it holds the lease, so it tracks the version itself.
type tableState struct {
	name    string
	t       *delta.Table
	version int64
	txn     int64 // txn version of AppID, -1 when none
	paths   map[string]bool
}

// termState is the state of one active term.
type termState struct {
	l         *lease
	kvs       buckets
	arb       *arbiter
	rec, tpl  *tableState
	lastAdv   time.Time
	walPurged uint64
}

// maxFetchFailures is how many report fetches may fail in a row before the
// term ends and a new one starts with a new consumer.
const maxFetchFailures = 10

// term is one active term: create the tables, rebuild the state from the
// Delta log, replay the report stream and then follow it, committing every
// advance. It returns when ctx ends (after a final commit when parent, not
// the lease, ended) or on an error.
func (c *Committer) term(ctx, parent context.Context, kvs buckets, l *lease) error {
	c.setStatus("active: opening the tables")
	if err := c.ensureTables(ctx); err != nil {
		return err
	}
	ts := &termState{l: l, kvs: kvs}
	if err := c.rebuild(ctx, ts); err != nil {
		return err
	}
	c.setStatus(fmt.Sprintf("active: replaying %s from high-water %d", streams.ReportStream, ts.arb.hw))
	cctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	cons, err := c.js.OrderedConsumer(cctx, streams.ReportStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	cancel()
	if err != nil {
		return fmt.Errorf("report stream consumer: %w", err)
	}
	wait := min(max(c.cfg.CommitInterval/2, 10*time.Millisecond), time.Second)
	replayed := false
	// A consumer whose server died answers "no responders" for ever; the
	// client does not always recreate it. After maxFetchFailures failed
	// fetches in a row the term ends, and the next one replays the report
	// stream with a new consumer (verdicts are persisted, so nothing flips).
	failures := 0
	fetchFailed := func(err error) error {
		failures++
		c.log.Warn("fetch reports", "err", err, "failures_in_a_row", failures)
		if failures >= maxFetchFailures {
			return fmt.Errorf("report stream consumer: %d fetches failed in a row: %w", failures, err)
		}
		backoff.Sleep(ctx, wait)
		return nil
	}
	for ctx.Err() == nil {
		batch, err := cons.Fetch(c.cfg.FetchBatch, jetstream.FetchMaxWait(wait))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if err := fetchFailed(err); err != nil {
				return err
			}
			continue
		}
		n, caughtUp := 0, false
		var perr error
		for msg := range batch.Messages() {
			if perr != nil {
				continue // drain the batch; the next term replays it
			}
			n++
			pending, err := c.process(ctx, ts, msg)
			perr = err
			caughtUp = pending == 0
		}
		if perr != nil {
			if ctx.Err() != nil {
				break
			}
			return perr
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
			if err := fetchFailed(err); err != nil {
				return err
			}
		} else {
			failures = 0
		}
		if n == 0 {
			caughtUp = true
		}
		force := false
		if caughtUp && !replayed {
			replayed, force = true, true
			c.log.Info("report stream replayed", "high_water", ts.arb.hw, "pending_batches", ts.arb.pendingBatches())
		}
		if replayed && (force || time.Since(ts.lastAdv) >= c.cfg.CommitInterval) {
			if err := c.commit(ctx, ts); err != nil {
				return err
			}
		}
		if replayed {
			c.updateGap(ts)
		}
	}
	if c.crash.Load() || !l.valid() || parent.Err() == nil {
		return context.Cause(ctx)
	}
	// Graceful stop: commit what is accepted, with a fresh deadline.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(parent), c.cfg.ShutdownTimeout)
	defer cancel()
	if err := c.commit(fctx, ts); err != nil {
		return fmt.Errorf("final commit: %w", err)
	}
	return nil
}

func (c *Committer) updateGap(ts *termState) {
	low, prev, ok := ts.arb.gap()
	c.m.pending.Set(float64(ts.arb.pendingBatches()))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status = ""
	if !ok {
		c.gapSince = time.Time{}
		return
	}
	if c.gapSince.IsZero() || c.gapHW != ts.arb.hw {
		c.gapSince = time.Now()
	}
	c.gapHW = ts.arb.hw
	c.gapBatch = 0
	if prev > ts.arb.hw && prev < low {
		c.gapBatch = prev
	}
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

// process judges one report message and returns how many messages the
// stream holds after it.
func (c *Committer) process(ctx context.Context, ts *termState, msg jetstream.Msg) (uint64, error) {
	md, err := msg.Metadata()
	if err != nil {
		return 1, fmt.Errorf("report metadata: %w", err)
	}
	seq := md.Sequence.Stream
	r, derr := streams.DecodeReport(msg.Data())
	if derr == nil && !validKey(streams.VerdictKey(r.ID)) {
		derr = fmt.Errorf("%w: report id %q cannot be a verdict key", streams.ErrMalformed, r.ID)
	}
	if derr != nil {
		ts.arb.track(seq, 0)
		return md.NumPending, c.malformed(ctx, ts, msg, seq, derr)
	}
	var maxSeq uint64
	for _, b := range r.Batches {
		maxSeq = max(maxSeq, b.Seq)
	}
	defer ts.arb.track(seq, maxSeq)
	if d := ts.arb.decide(r); d.known {
		c.m.reports.WithLabelValues(verdictLabel(d.verdict)).Inc()
		return md.NumPending, nil
	}
	v, found, err := c.getVerdict(ctx, ts, r.ID)
	if err != nil {
		return 0, err
	}
	if !found {
		d := ts.arb.decide(r)
		v = d.verdict
		if !d.final {
			if v, err = c.checkFiles(ctx, r); err != nil {
				return 0, err
			}
		}
		if v, err = c.putVerdict(ctx, ts, v); err != nil {
			return 0, err
		}
	}
	if err := ts.arb.apply(r, seq, v); err != nil {
		c.log.Error("report kept out of the lake", "report", r.ID, "err", err)
		c.m.reports.WithLabelValues("conflict").Inc()
		return md.NumPending, c.deadLetter(ctx, msg, seq, err.Error())
	}
	c.m.reports.WithLabelValues(verdictLabel(v)).Inc()
	if !v.Accepted {
		c.log.Info("report rejected", "report", r.ID, "reason", v.Reason, "duplicates", len(v.Duplicates))
	}
	return md.NumPending, nil
}

func verdictLabel(v streams.Verdict) string {
	if v.Accepted {
		return "accepted"
	}
	return "rejected"
}

func (c *Committer) getVerdict(ctx context.Context, ts *termState, id string) (streams.Verdict, bool, error) {
	var v streams.Verdict
	var found bool
	err := c.retry(ctx, "read verdict", func(ctx context.Context) error {
		ent, err := ts.kvs.verdicts.Get(ctx, streams.VerdictKey(id))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read verdict %s: %w", id, err)
		}
		got, err := streams.DecodeVerdict(ent.Value())
		if err != nil {
			// An unreadable stored verdict cannot be reused; decide anew
			// and overwrite it below.
			c.log.Error("stored verdict unreadable", "report", id, "err", err)
			return nil
		}
		v, found = *got, true
		return nil
	})
	return v, found, err
}

// putVerdict stores v create-only; when a verdict is already stored (written
// concurrently by a fenced committer) that one wins and is returned.
func (c *Committer) putVerdict(ctx context.Context, ts *termState, v streams.Verdict) (streams.Verdict, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return v, fmt.Errorf("marshal verdict: %w", err)
	}
	out := v
	err = c.retry(ctx, "store verdict", func(ctx context.Context) error {
		key := streams.VerdictKey(v.ReportID)
		_, err := ts.kvs.verdicts.Create(ctx, key, b)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("store verdict %s: %w", v.ReportID, err)
		}
		ent, err := ts.kvs.verdicts.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("read verdict %s: %w", v.ReportID, err)
		}
		if got, err := streams.DecodeVerdict(ent.Value()); err == nil {
			out = *got
			return nil
		}
		_, err = ts.kvs.verdicts.Update(ctx, key, b, ent.Revision())
		return err
	})
	return out, err
}

// checkFiles Stat-checks every file of r: present with the reported size.
func (c *Committer) checkFiles(ctx context.Context, r *streams.Report) (streams.Verdict, error) {
	var reasons []string
	for _, f := range r.Files {
		key := c.table(f.Table).FileKey(f.Path)
		err := c.retry(ctx, "stat "+key, func(ctx context.Context) error {
			info, err := c.store.Stat(ctx, key)
			switch {
			case errors.Is(err, objstore.ErrNotFound):
				reasons = append(reasons, fmt.Sprintf("file %s is missing", key))
			case err != nil:
				return fmt.Errorf("stat %s: %w", key, err)
			case info.Size != f.Size:
				reasons = append(reasons, fmt.Sprintf("file %s has %d bytes, the report says %d", key, info.Size, f.Size))
			}
			return nil
		})
		if err != nil {
			return streams.Verdict{}, err
		}
	}
	if len(reasons) > 0 {
		return streams.Verdict{ReportID: r.ID, Reason: strings.Join(reasons, "; ")}, nil
	}
	return streams.Verdict{ReportID: r.ID, Accepted: true}, nil
}

func (c *Committer) table(name string) *delta.Table {
	if name == streams.TableTemplates {
		return c.templates
	}
	return c.records
}

// malformed rejects a report that does not decode (when it has an id an
// encoder waits on) and dead-letters it.
func (c *Committer) malformed(ctx context.Context, ts *termState, msg jetstream.Msg, seq uint64, derr error) error {
	c.m.reports.WithLabelValues("malformed").Inc()
	var probe struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(msg.Data(), &probe)
	if probe.ID != "" && validKey(streams.VerdictKey(probe.ID)) {
		if _, found, err := c.getVerdict(ctx, ts, probe.ID); err != nil || found {
			return err // decided in an earlier term: dead-lettered then
		}
		if _, err := c.putVerdict(ctx, ts, streams.Verdict{ReportID: probe.ID, Reason: derr.Error()}); err != nil {
			return err
		}
	}
	c.log.Warn("malformed report", "stream_seq", seq, "report", probe.ID, "err", derr)
	return c.deadLetter(ctx, msg, seq, derr.Error())
}

// validKey is the KV key rule of nats.go (unexported there): a verdict
// cannot be stored under any other key, so such a report is malformed.
func validKey(k string) bool {
	if k == "" || k[0] == '.' || k[len(k)-1] == '.' || strings.Contains(k, "..") {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-/_=.", c) >= 0) {
			return false
		}
	}
	return true
}

func (c *Committer) deadLetter(ctx context.Context, msg jetstream.Msg, seq uint64, reason string) error {
	c.m.deadLetters.Inc()
	return c.retry(ctx, "dead-letter", func(ctx context.Context) error {
		return streams.DeadLetter(ctx, c.js, "committer", msg.Subject(), seq, msg.Data(), reason, nil)
	})
}

// ensureTables creates both tables when absent.
func (c *Committer) ensureTables(ctx context.Context) error {
	for _, t := range []struct {
		t      *delta.Table
		schema string
		parts  []string
	}{
		{c.templates, lake.TemplatesSchemaString, []string{}},
		{c.records, lake.RecordsSchemaString, lake.RecordsPartitionColumns},
	} {
		err := c.retry(ctx, "create table "+t.t.Root(), func(ctx context.Context) error {
			snap, err := t.t.Snapshot(ctx)
			if err != nil {
				return fmt.Errorf("snapshot %s: %w", t.t.Root(), err)
			}
			if snap.Version >= 0 {
				return nil
			}
			err = t.t.Create(ctx, delta.Metadata{
				Name: t.t.Root(), SchemaString: t.schema, PartitionColumns: t.parts, Configuration: map[string]string{},
			})
			if err != nil && !errors.Is(err, delta.ErrVersionExists) {
				return fmt.Errorf("create %s: %w", t.t.Root(), err)
			}
			if err == nil {
				c.log.Info("table created", "table", t.t.Root())
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// rebuild reads both tables and sets up the term's arbiter: the high-water
// is the records table's txn, and every committed file's report and seqs
// come from its tags.
func (c *Committer) rebuild(ctx context.Context, ts *termState) error {
	load := func(name string, t *delta.Table) (*tableState, *delta.Snapshot, error) {
		var snap *delta.Snapshot
		err := c.retry(ctx, "snapshot "+name, func(ctx context.Context) (err error) {
			snap, err = t.Snapshot(ctx)
			return err
		})
		if err != nil {
			return nil, nil, err
		}
		if err := snap.Writable(); err != nil {
			return nil, nil, fmt.Errorf("table %s: %w", name, err)
		}
		st := &tableState{name: name, t: t, version: snap.Version, txn: -1, paths: map[string]bool{}}
		if v, ok := snap.Txns[AppID]; ok {
			st.txn = v
		}
		for _, f := range snap.Files {
			st.paths[f.Path] = true
		}
		return st, snap, nil
	}
	rec, recSnap, err := load(lake.RecordsTable, c.records)
	if err != nil {
		return err
	}
	tpl, tplSnap, err := load(lake.TemplatesTable, c.templates)
	if err != nil {
		return err
	}
	hw := uint64(max(rec.txn, 0))
	arb := newArbiter(hw)
	arb.trackSeen = c.cfg.PurgeReports
	for _, f := range recSnap.Files {
		seqs, err := parseSeqs(f.Tags[TagSeqs])
		if err != nil {
			c.log.Error("unreadable seqs tag on a committed file", "table", lake.RecordsTable, "path", f.Path, "err", err)
		}
		arb.loadCommitted(streams.TableRecords, f.Path, f.Tags[TagReport], seqs)
	}
	for _, f := range tplSnap.Files {
		arb.loadCommittedPath(streams.TableTemplates, f.Path, f.Tags[TagReport])
	}
	if tpl.txn > rec.txn {
		c.log.Warn("templates table is ahead of records: the last advance was cut between its commits, repairing",
			"templates_txn", tpl.txn, "records_txn", rec.txn)
	}
	ts.arb, ts.rec, ts.tpl = arb, rec, tpl
	c.hw.Store(hw)
	c.m.highWater.Set(float64(hw))
	c.log.Info("state rebuilt", "high_water", hw, "records_version", rec.version, "templates_version", tpl.version,
		"committed_files", len(recSnap.Files)+len(tplSnap.Files))
	return nil
}

// commit writes one advance, when the barrier allows one: templates first,
// then records, each with every accepted file it lacks and txn(AppID, W').
func (c *Committer) commit(ctx context.Context, ts *termState) error {
	w := ts.arb.advance()
	if w <= ts.arb.hw {
		return nil
	}
	if !ts.l.valid() {
		return fmt.Errorf("%w: before committing high-water %d", errLeaseLost, w)
	}
	// An advance is not cut short by a cancel: both table commits are
	// attempted (the lease is checked before each), bounded by a timeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 8*c.cfg.OpTimeout)
	defer cancel()
	start := time.Now()
	reps := ts.arb.commitSet()
	ids := make([]string, len(reps))
	for i, r := range reps {
		ids[i] = r.id
	}
	tplAdds := c.adds(reps, streams.TableTemplates, ts.tpl)
	if len(tplAdds) > 0 || ts.tpl.txn < int64(w) {
		if err := c.commitTable(ctx, ts, ts.tpl, tplAdds, w, ids); err != nil {
			return err
		}
	}
	crashpoint.Hit("committer.between-tables")
	if err := c.commitTable(ctx, ts, ts.rec, c.adds(reps, streams.TableRecords, ts.rec), w, ids); err != nil {
		return err
	}
	crashpoint.Hit("committer.before-high-water")
	ts.arb.committedUpTo(w, reps)
	ts.lastAdv = time.Now()
	c.hw.Store(w)
	c.m.highWater.Set(float64(w))
	c.m.commits.Inc()
	c.m.pending.Set(float64(ts.arb.pendingBatches()))
	c.log.Info("high-water advanced", "high_water", w, "reports", len(reps),
		"records_version", ts.rec.version, "templates_version", ts.tpl.version)
	if err := c.putHighWater(ctx, ts, w); err != nil {
		c.log.Warn("high-water key", "err", err) // the Delta log is the truth; next advance retries
	}
	c.m.commitTime.Observe(time.Since(start).Seconds())
	c.purge(ctx, ts)
	return nil
}

// adds are the Delta add actions of reps' files in table that ts lacks.
func (c *Committer) adds(reps []*accepted, table string, ts *tableState) []delta.Action {
	var out []delta.Action
	now := time.Now().UnixMilli()
	for _, r := range reps {
		seqs := formatSeqs(r.seqs)
		for _, f := range r.files {
			if f.Table != table || ts.paths[f.Path] {
				continue
			}
			pv := f.PartitionValues
			if pv == nil {
				pv = map[string]string{}
			}
			mt := f.ModificationTime
			if mt <= 0 {
				mt = now
			}
			out = append(out, delta.Action{Add: &delta.Add{
				Path: f.Path, PartitionValues: pv, Size: f.Size, ModificationTime: mt, DataChange: true,
				Stats: f.Stats, Tags: map[string]string{TagReport: r.id, TagSeqs: seqs},
			}})
		}
	}
	return out
}

func (c *Committer) commitTable(ctx context.Context, ts *termState, st *tableState, adds []delta.Action, w uint64, ids []string) error {
	version := st.version + 1
	info := delta.CommitInfo{
		"operation":           "WRITE",
		"operationParameters": map[string]any{"mode": "Append"},
		"engineInfo":          "quarry-committer",
		"quarry": map[string]any{
			"high_water": w, "reports": ids, "committer": c.cfg.Name, "lease_revision": ts.l.revision(),
		},
	}
	actions := make([]delta.Action, 0, len(adds)+2)
	actions = append(actions, delta.Action{CommitInfo: info})
	actions = append(actions, adds...)
	actions = append(actions, delta.Action{Txn: &delta.Txn{AppID: AppID, Version: int64(w), LastUpdated: time.Now().UnixMilli()}})
	if !ts.l.valid() {
		return fmt.Errorf("%w: before committing %s version %d", errLeaseLost, st.name, version)
	}
	cctx, cancel := context.WithTimeout(ctx, 3*c.cfg.OpTimeout)
	err := st.t.Commit(cctx, version, actions)
	cancel()
	if errors.Is(err, delta.ErrVersionExists) {
		who := "unknown"
		sctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
		if snap, serr := st.t.Snapshot(sctx); serr == nil {
			if q, ok := snap.CommitInfo["quarry"].(map[string]any); ok {
				who = fmt.Sprint(q["committer"])
			}
		}
		cancel()
		return fmt.Errorf("%w: %s version %d written by %s", errFenced, st.name, version, who)
	}
	if err != nil {
		return fmt.Errorf("commit %s version %d: %w", st.name, version, err)
	}
	st.version, st.txn = version, int64(w)
	for _, a := range adds {
		st.paths[a.Add.Path] = true
	}
	return nil
}

// putHighWater stores w under streams.KeyHighWater unless a higher value is
// there already.
func (c *Committer) putHighWater(ctx context.Context, ts *termState, w uint64) error {
	kv := ts.kvs.state
	val := []byte(strconv.FormatUint(w, 10))
	for range 5 {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
		ent, err := kv.Get(cctx, streams.KeyHighWater)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = kv.Create(cctx, streams.KeyHighWater, val)
		case err == nil:
			if cur, perr := strconv.ParseUint(string(ent.Value()), 10, 64); perr == nil && cur >= w {
				cancel()
				return nil
			}
			_, err = kv.Update(cctx, streams.KeyHighWater, val, ent.Revision())
		}
		cancel()
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("store %s: %w", streams.KeyHighWater, err)
		}
	}
	return fmt.Errorf("store %s: kept losing the race", streams.KeyHighWater)
}

// purge trims the WAL and the report stream after an advance, as configured.
// Failures are logged: the next advance tries again.
func (c *Committer) purge(ctx context.Context, ts *termState) {
	if c.cfg.PurgeReports {
		if below := ts.arb.purgeBefore(); below > 0 {
			cctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
			err := c.purgeStream(cctx, streams.ReportStream, below)
			cancel()
			if err != nil {
				c.log.Warn("purge reports", "err", err)
			} else {
				ts.arb.purged(below)
			}
		}
	}
	if c.cfg.PurgeWAL {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
		defer cancel()
		snap, err := oldestSnapshot(cctx, c.js)
		if err != nil {
			c.log.Warn("purge wal: miner snapshots", "err", err)
			return
		}
		floor, err := producerFloor(cctx, c.js, c.cfg.FloorMaxAge)
		if err != nil {
			c.log.Warn("purge wal: producer floors", "err", err)
			return
		}
		safe := min(ts.arb.hw, snap) + 1
		if floor > 0 && floor < safe {
			safe = floor // a producer's restart may need to read back frames from there
		}
		if safe <= max(ts.walPurged, 1) {
			return
		}
		if err := c.purgeStream(cctx, streams.WALStream, safe); err != nil {
			c.log.Warn("purge wal", "err", err)
			return
		}
		ts.walPurged = safe
		c.log.Debug("wal purged", "below", safe)
	}
}

func (c *Committer) purgeStream(ctx context.Context, name string, below uint64) error {
	s, err := c.js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(below)); err != nil {
		return fmt.Errorf("purge %s below %d: %w", name, below, err)
	}
	return nil
}

// producerFloor is the lowest WAL floor (streams.FloorKey) a producer
// updated within maxAge, 0 when there is none. The WAL is never purged at or
// above it: those are frames a producer published after its saved position,
// which its restart reads back so as not to publish them twice.
func producerFloor(ctx context.Context, js jetstream.JetStream, maxAge time.Duration) (uint64, error) {
	kv, err := js.KeyValue(ctx, streams.PositionsBucket)
	if err != nil {
		return 0, fmt.Errorf("bucket %s: %w", streams.PositionsBucket, err)
	}
	lister, err := kv.ListKeysFiltered(ctx, streams.FloorPrefix+">")
	if err != nil {
		return 0, fmt.Errorf("list %s floors: %w", streams.PositionsBucket, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var floor uint64
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("floor %s: %w", k, err)
		}
		if time.Since(e.Created()) > maxAge {
			continue
		}
		v, err := strconv.ParseUint(string(e.Value()), 10, 64)
		if err != nil {
			continue // not a floor this committer understands; it only holds nothing back
		}
		if floor == 0 || v < floor {
			floor = v
		}
	}
	return floor, nil
}

// oldestSnapshot is the WAL sequence of the oldest miner snapshot
// (streams.SnapshotName in streams.SnapshotBucket) still stored, 0 when there
// is none. The WAL is purged below it, not below the newest: a miner whose
// newest snapshot is corrupt falls back to an older one and replays the WAL
// from there, so every retained snapshot must stay restorable. Snapshots
// only get newer, so a sequence read here stays safe after the miner
// deletes old ones.
func oldestSnapshot(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	obs, err := js.ObjectStore(ctx, streams.SnapshotBucket)
	if err != nil {
		return 0, fmt.Errorf("object store %s: %w", streams.SnapshotBucket, err)
	}
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", streams.SnapshotBucket, err)
	}
	var oldest uint64
	for _, in := range infos {
		if seq, ok := streams.ParseSnapshotName(in.Name); ok && !in.Deleted && (oldest == 0 || seq < oldest) {
			oldest = seq
		}
	}
	return oldest, nil
}
