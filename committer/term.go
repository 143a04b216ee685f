package committer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/streams"
)

// tableState is what a term knows of one Delta table: it is the only writer
// while it holds the lease, so it tracks the version itself.
type tableState struct {
	name    string
	t       *delta.Table
	version int64
	txn     int64 // txn version of AppID, -1 when none
	paths   map[string]bool
	noticed int64 // last version with a published notice (notice.go)
}

// termState is the state of one active term.
type termState struct {
	l         *lease
	kvs       buckets
	arb       *arbiter
	rec, tpl  *tableState
	lastAdv   time.Time
	walPurged uint64
	prog      *progressState
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
	c.catchUpNotices(ctx, ts)
	stopMaint := c.startMaintenance(ctx)
	defer stopMaint()
	c.setStatus(fmt.Sprintf("active: replaying %s from high-water %d", streams.ReportStream, ts.arb.hw))
	cctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	cons, err := c.js.OrderedConsumer(cctx, streams.ReportStream, jetstream.OrderedConsumerConfig{
		MaxResetAttempts: streams.OrderedResetAttempts,
		DeliverPolicy:    jetstream.DeliverAllPolicy,
	})
	cancel()
	if err != nil {
		return fmt.Errorf("report stream consumer: %w", err)
	}
	wait := c.idleWait
	replayed := false
	// A consumer whose server died answers "no responders" for ever; the
	// client does not always recreate it. After maxFetchFailures failed
	// fetches in a row the term ends, and the next one replays the report
	// stream with a new consumer (verdicts are persisted, so nothing flips).
	failures := 0
	// A consumer can also go deaf without an error: its fetches time out
	// as if the stream were quiet (an R1 consumer on a node that died).
	// stuck watches for that: while fetches come back empty, it compares
	// the stream's last sequence with the last report delivered, and ends
	// the term when the stream has held a later report for a whole check
	// interval without the consumer delivering it.
	stuck := stuckWatch{every: max(20*wait, 2*time.Second)}
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
		// While replaying, take what the stream holds without waiting: an
		// empty fetch means the replay caught up. Then, when the next
		// commit is due (CommitInterval passed since the last advance), a
		// report that arrives is committed at once: wait for the first one
		// only, then take what is already there without waiting. Otherwise
		// nothing is committed before the interval ends: batch up what
		// arrives until then, and no longer, so a report never waits past
		// its commit for a fetch to end. Within an interval the advance
		// is committed early when the WAL is drained (drainCheck below).
		const (
			noWait   = iota // what is there, at once
			first           // block for one report
			untilDue        // a batch, until the next commit is due
		)
		steps := []int{noWait}
		due := time.Duration(0)
		// drainCheck: within an interval, with an advance waiting, the
		// batch of reports is taken for drainWait only; when none came, a
		// WAL holding nothing beyond the advance (the pipeline drained: no
		// report can come before more lines do) is committed at once
		// rather than when the interval ends.
		// Without an advance waiting, the first report ends the wait, so
		// that the next round looks at the drain.
		drainCheck := false
		firstWait := wait
		if replayed {
			due = c.cfg.CommitInterval - time.Since(ts.lastAdv)
			steps = []int{first, noWait}
			if due > 0 {
				if ts.arb.advance() > ts.arb.hw {
					drainCheck = true
					steps = []int{untilDue}
					due = min(due, c.drainWait)
				} else {
					firstWait = min(due, wait)
				}
			}
		}
		n, caughtUp := 0, false
		var perr error
		ok := true
		for i, step := range steps {
			var batch jetstream.MessageBatch
			var done func()
			var err error
			switch step {
			case untilDue:
				batch, done, err = fetchReports(ctx, cons, c.cfg.FetchBatch, min(due, wait))
			case first:
				batch, done, err = fetchReports(ctx, cons, 1, firstWait)
			default:
				size := c.cfg.FetchBatch
				if i > 0 {
					size-- // after the first report
				}
				batch, err = cons.FetchNoWait(max(size, 1))
				done = func() {}
			}
			if errors.Is(err, errFetchExpired) {
				break // the wait ended before the fetch was sent
			}
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				if err := fetchFailed(err); err != nil {
					return err
				}
				ok = n > 0 // nothing fetched: fetch again
				break
			}
			got := 0
			for msg := range batch.Messages() {
				if perr != nil {
					continue // drain the batch; the next term replays it
				}
				got++
				if md, err := msg.Metadata(); err == nil {
					stuck.delivered(md.Sequence.Stream)
				}
				pending, err := c.process(ctx, ts, msg)
				perr = err
				caughtUp = pending == 0
			}
			berr := batch.Error()
			done()
			n += got
			if perr != nil {
				break
			}
			if berr != nil && !fetchTimeout(berr) && ctx.Err() == nil {
				if err := fetchFailed(berr); err != nil {
					return err
				}
				break
			}
			failures = 0
			// The first report of an idle wait came: take the rest.
			if step != first || got == 0 || c.cfg.FetchBatch == 1 || caughtUp {
				break
			}
		}
		if perr != nil {
			if ctx.Err() != nil {
				break
			}
			return perr
		}
		if ctx.Err() != nil {
			break
		}
		if !ok {
			continue
		}
		if n == 0 {
			caughtUp = true
			if err := stuck.idle(ctx, c.reportsState); err != nil {
				if ctx.Err() != nil {
					break
				}
				if errors.Is(err, errConsumerStuck) {
					c.setStatus(err.Error())
					return err
				}
				if err := fetchFailed(err); err != nil {
					return err
				}
			}
		}
		force := false
		if caughtUp && !replayed {
			replayed, force = true, true
			c.log.Info("report stream replayed", "high_water", ts.arb.hw, "pending_batches", ts.arb.pendingBatches())
		}
		due = 0
		if replayed && !force && drainCheck && n == 0 && time.Since(ts.lastAdv) < c.cfg.CommitInterval {
			force = c.walDrained(ctx, ts.arb.advance())
		}
		if replayed && (force || time.Since(ts.lastAdv) >= c.cfg.CommitInterval) {
			if err := c.commit(ctx, ts); err != nil {
				return err
			}
		}
		if replayed {
			c.updateGap(ts)
		}
		if replayed {
			before, tplBefore := ts.rec.version, ts.tpl.version
			if err := c.maintenanceCommits(ctx, ts); err != nil {
				return err
			}
			if ts.rec.version != before || ts.tpl.version != tplBefore {
				c.notify(ctx, ts) // compaction and retention commits
			}
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

// errFetchExpired is a fetch whose wait ended before it was sent.
var errFetchExpired = errors.New("fetch wait expired")

// fetchReports asks cons for up to n reports, waiting at most d (at least
// 10ms) for them, and returns as soon as ctx ends. done releases the
// fetch's context once its batch is drained.
func fetchReports(ctx context.Context, cons jetstream.Consumer, n int, d time.Duration) (jetstream.MessageBatch, func(), error) {
	fctx, cancel := context.WithTimeout(ctx, max(d, 10*time.Millisecond))
	batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
	if err != nil {
		cancel()
		if errors.Is(err, jetstream.ErrInvalidOption) && fctx.Err() != nil && ctx.Err() == nil {
			// FetchContext refuses a deadline already passed (a slow
			// scheduler): the wait is over, nothing was asked.
			return nil, nil, errFetchExpired
		}
		return nil, nil, err
	}
	return batch, cancel, nil
}

// fetchTimeout tells a fetch that ended by its wait (the server's expiry
// or the fetch context's deadline) from a failed one.
func fetchTimeout(err error) bool {
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, context.DeadlineExceeded)
}

// errConsumerStuck ends a term whose report consumer stopped delivering.
var errConsumerStuck = errors.New("report stream consumer stuck")

// stuckWatch tells a deaf report consumer from a quiet stream.
type stuckWatch struct {
	every     time.Duration
	last      uint64    // stream sequence of the last report delivered
	since     time.Time // start of the current run of empty fetches
	behind    uint64    // a later stream sequence seen at the last check, 0 if none
	checkedAt time.Time
}

func (w *stuckWatch) delivered(seq uint64) {
	w.last, w.since, w.behind = seq, time.Time{}, 0
}

// idle is called after an empty fetch. Every interval of empty fetches it
// reads the stream's state; a report the stream still holds beyond the last
// delivered one, undelivered at the next check, means the consumer is stuck.
//
// The stream is asked for its state, not just its last sequence: once the
// reports are purged to the high-water the stream is empty but keeps its
// last sequence (first 34, last 33, no message), and a term that started
// after the purge has delivered nothing: that is a quiet stream, not a
// deaf consumer (a chaos soak saw two committers hand the lease back and
// forth every 4 s on it, for as long as no report came).
func (w *stuckWatch) idle(ctx context.Context, streamState func(context.Context) (jetstream.StreamState, error)) error {
	now := time.Now()
	if w.since.IsZero() {
		w.since, w.checkedAt = now, now
		return nil
	}
	if now.Sub(w.checkedAt) < w.every {
		return nil
	}
	w.checkedAt = now
	st, err := streamState(ctx)
	if err != nil {
		return err
	}
	seq := st.LastSeq
	if st.Msgs == 0 {
		seq = 0 // nothing held: nothing to deliver
	}
	if w.behind != 0 && w.last < w.behind && seq > w.last {
		return fmt.Errorf("%w: the stream holds report %d, the consumer delivered up to %d and nothing for %s",
			errConsumerStuck, seq, w.last, now.Sub(w.since).Truncate(time.Millisecond))
	}
	w.behind = 0
	if seq > w.last {
		w.behind = seq
	}
	return nil
}

// reportsState is the report stream's state (messages, first and last
// sequence).
func (c *Committer) reportsState(ctx context.Context) (jetstream.StreamState, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	st, err := c.js.Stream(ctx, streams.ReportStream)
	if err != nil {
		return jetstream.StreamState{}, fmt.Errorf("%s stream info: %w", streams.ReportStream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return jetstream.StreamState{}, fmt.Errorf("%s stream info: %w", streams.ReportStream, err)
	}
	return info.State, nil
}

// walDrained tells whether the WAL holds no frame above w, the high-water
// an advance would reach: every line in it is then written, and a commit
// made now leaves nothing behind for the interval's end. An error reads
// as not drained (the interval's commit follows as before). It asks once
// (the stream's info as the lookup fetched it) and waits at most one
// commit interval: the check can only save what is left of one, and a WAL
// slow to answer (a cluster electing leaders) held the term for
// op_timeout at every round, a report per 10s (TestSlowWALNoDrainStall).
func (c *Committer) walDrained(ctx context.Context, w uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.CommitInterval, 10*time.Millisecond))
	defer cancel()
	st, err := c.js.Stream(ctx, streams.WALStream)
	if err != nil {
		c.log.Debug("wal last sequence", "err", err)
		return false
	}
	return st.CachedInfo().State.LastSeq <= w
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

// ensureTables creates both tables when absent (records in
// lake.CurrentLayout: partitioned by tenant; a table that exists keeps its
// layout), and updates the records table's schema to
// lake.RecordsSchemaString() when it has an older one.
func (c *Committer) ensureTables(ctx context.Context) error {
	for _, t := range []struct {
		t      *delta.Table
		schema string
		parts  []string
	}{
		{c.templates, lake.TemplatesSchemaString, []string{}},
		{c.records, lake.RecordsSchemaString(), lake.CurrentLayout.PartitionColumns()},
		{c.progress, lake.ProgressSchemaString, []string{}},
	} {
		err := c.retry(ctx, "create table "+t.t.Root(), func(ctx context.Context) error {
			snap, err := t.t.Snapshot(ctx)
			if err != nil {
				return fmt.Errorf("snapshot %s: %w", t.t.Root(), err)
			}
			if snap.Version >= 0 {
				// A table created with an older quarry schema gets the current one
				// (records v3, templates kinds) before this term commits.
				update := lake.RecordsSchemaUpdate
				if t.t == c.templates {
					update = lake.TemplatesSchemaUpdate
				}
				if md, ok := update(snap.Metadata); ok {
					if err := t.t.Commit(ctx, snap.Version+1, []delta.Action{{MetaData: &md}}); err != nil {
						return fmt.Errorf("update the schema of %s: %w", t.t.Root(), err)
					}
					c.log.Info("table schema updated", "table", t.t.Root(), "version", snap.Version+1)
				}
				return nil
			}
			err = t.t.Create(ctx, delta.Metadata{
				Name: t.t.Root(), SchemaString: t.schema, PartitionColumns: t.parts, Configuration: c.newTableConfig(),
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
		return newTableState(name, t, snap), snap, nil
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
	arb.trackSeen = c.cfg.purgeReports()
	arb.layout = lake.LayoutOf(recSnap.Metadata)
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
	// Reports whose files compaction or retention removed. Not from the
	// templates table: its live files' reports are committed only once
	// records has them (the repair below), and a merged templates file's
	// reports all have records at or below the high-water, which marks them.
	loadRemoved(arb, recSnap)
	if tpl.txn > rec.txn {
		c.log.Warn("templates table is ahead of records: the last advance was cut between its commits, repairing",
			"templates_txn", tpl.txn, "records_txn", rec.txn)
	}
	ts.arb, ts.rec, ts.tpl = arb, rec, tpl
	if err := c.loadProgress(ctx, ts); err != nil {
		return err
	}
	c.hw.Store(hw)
	c.m.highWater.Set(float64(hw))
	c.log.Info("state rebuilt", "high_water", hw, "records_version", rec.version, "templates_version", tpl.version,
		"committed_files", len(recSnap.Files)+len(tplSnap.Files))
	return nil
}
