package committer

import (
	"context"
	"sync"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
)

// checkpointer writes Delta checkpoints in the background, one at a time,
// after the commit they cover. The commit path only marks a table as due
// (never waits); a failed checkpoint is logged, counted and tried again at
// the table's next interval.
type checkpointer struct {
	c    *Committer
	kick chan struct{} // capacity 1: kicks while busy coalesce

	mu  sync.Mutex
	due map[*delta.Table]bool
}

func newCheckpointer(c *Committer) *checkpointer {
	return &checkpointer{c: c, kick: make(chan struct{}, 1), due: map[*delta.Table]bool{}}
}

// committed is called after st moved from version before to st.version: it
// marks st's table due when the commit crossed a multiple of the table's
// checkpoint interval (tableprops.go).
func (cp *checkpointer) committed(st *tableState, before int64) {
	lc, _ := cp.c.lifecycle(st.t) // an unreadable property is logged by write
	n := int64(lc.checkpointInterval)
	if st.version/n <= before/n {
		return
	}
	cp.mu.Lock()
	cp.due[st.t] = true
	cp.mu.Unlock()
	select {
	case cp.kick <- struct{}{}:
	default:
	}
}

// run writes due checkpoints until ctx ends.
func (cp *checkpointer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-cp.kick:
		}
		cp.writeDue(ctx)
	}
}

// writeDue writes the checkpoints of the tables due now.
func (cp *checkpointer) writeDue(ctx context.Context) {
	cp.mu.Lock()
	tables := make([]*delta.Table, 0, len(cp.due))
	for t := range cp.due {
		tables = append(tables, t)
	}
	clear(cp.due)
	cp.mu.Unlock()
	for _, t := range tables {
		cp.write(ctx, t)
	}
}

func (cp *checkpointer) write(ctx context.Context, t *delta.Table) {
	c := cp.c
	start := time.Now()
	lc, perr := c.lifecycle(t)
	if perr != nil {
		c.log.Warn("table property ignored", "table", t.Root(), "err", perr)
	}
	// A checkpoint replays and rewrites the whole table state: allow it
	// more than one operation's time.
	cctx, cancel := context.WithTimeout(ctx, 6*c.cfg.OpTimeout)
	v, err := t.CheckpointExpiring(cctx, c.tombstoneExpiry(lc.tombstoneRetention))
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		c.m.checkpoints.WithLabelValues(t.Root(), "error").Inc()
		c.bgFailed("checkpoint "+t.Root(), err)
		c.log.Warn("checkpoint failed, retrying at the next interval", "table", t.Root(), "err", err)
		return
	}
	c.bgSucceeded("checkpoint " + t.Root())
	c.m.checkpoints.WithLabelValues(t.Root(), "ok").Inc()
	c.m.checkpointVersion.WithLabelValues(t.Root()).Set(float64(v))
	c.m.checkpointTime.Observe(time.Since(start).Seconds())
	c.log.Info("checkpoint written", "table", t.Root(), "version", v, "took", time.Since(start).Round(time.Millisecond))
	cp.cleanup(ctx, t, lc.logRetention)
}

// cleanup deletes the log entries of t older than the log retention that
// its checkpoints cover. A failure is logged and counted; the next
// checkpoint tries again.
func (cp *checkpointer) cleanup(ctx context.Context, t *delta.Table, retention time.Duration) {
	c := cp.c
	cctx, cancel := context.WithTimeout(ctx, 6*c.cfg.OpTimeout)
	res, err := t.CleanupLog(cctx, c.now().Add(-retention))
	cancel()
	c.m.logVersions.WithLabelValues(t.Root()).Add(float64(res.Versions))
	if err != nil {
		if ctx.Err() == nil {
			c.m.logCleanupErrors.WithLabelValues(t.Root()).Inc()
			c.bgFailed("log cleanup "+t.Root(), err)
			c.log.Warn("log cleanup failed, retrying after the next checkpoint", "table", t.Root(), "err", err)
		}
		return
	}
	c.bgSucceeded("log cleanup " + t.Root())
	if res.Versions > 0 {
		c.log.Info("log cleaned up", "table", t.Root(), "versions_deleted", res.Versions, "log_start", res.Start)
	}
}

// tombstoneExpiry leaves out of a checkpoint the tombstones removed longer
// than retention (the table's TombstoneRetention, tableprops.go) ago, except those naming a WAL batch above the
// high-water (tag quarry.seqs). Dropping one is safe for every reader of
// tombstones:
//
//   - vacuum (lake.Vacuum) never deletes a live file, whatever the
//     tombstones; the file of a dropped tombstone was removed at least
//     retention ago, which is at least vacuum's default grace for the
//     table (configured: at least lake.DefaultGrace; from the table's
//     delta.deletedFileRetentionDuration: the grace vacuum reads too), so
//     the default grace has passed, and while a retained log entry names it vacuum keeps it
//     as referenced; after that it is an old orphan and deleted;
//   - a rebuild marks committed the reports of tombstones (loadRemoved) so
//     a replayed report is not committed again: a report whose batches
//     are all at or below the high-water is rejected (or, with a stored
//     accepted verdict, kept out as a conflict) without that mark, so only
//     tombstones naming a batch above the high-water are needed, and kept;
//     compacted files carry their reports in their own tags;
//   - subscribers find a vacuumed file's rows through the commit that
//     removed it (its JSON entry, kept LogRetention), never through the
//     snapshot's tombstones.
func (c *Committer) tombstoneExpiry(retention time.Duration) delta.Expiry {
	hw := c.hw.Load()
	return delta.Expiry{
		Before: c.now().Add(-retention),
		Keep: func(r delta.Remove) bool {
			top, err := lastSeq(r.Tags[TagSeqs])
			return err != nil || top > hw // unreadable: keep it
		},
	}
}
