package committer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/streams"
)

// A producer publishes a progress fact (streams.Progress, KV
// streams.ProgressBucket) only after JetStream acked every frame the fact
// speaks for. The committer reads the facts, then reads the WAL stream's last
// sequence: every such frame is at or below it. That sequence is the fact's
// WAL sequence, and the fact counts (goes into commitInfo and the progress
// table) only once the high-water reaches it. Reading the facts before the
// sequence is what makes the association safe; it errs late, never early.

// maxPendingFacts bounds the facts kept per source while the high-water
// stalls; beyond it the oldest is dropped (its source's progress then shows
// up with a later fact, never early).
const maxPendingFacts = 64

// factAt is a progress fact and the WAL sequence it speaks for.
type factAt struct {
	p      streams.Progress
	walSeq uint64
}

// progressState is a term's view of the sources' progress. The pure part
// (observe, covered, advance) is separate from the I/O.
type progressState struct {
	revs    map[string]uint64           // KV revision of the last fact read, per key
	pending map[string][]factAt         // facts not yet covered, oldest first
	done    map[string]lake.ProgressRow // the committed progress per source
	dirty   bool                        // done changed since the last progress table commit

	st       *tableState // the progress table (paths: its live files)
	lastPoll time.Time   // last poll of the progress bucket
	lastPut  time.Time   // last progress table commit
	kvLast   uint64      // the bucket's last sequence at the last complete poll
	kv       jetstream.KeyValue
}

func newProgressState() *progressState {
	return &progressState{revs: map[string]uint64{}, pending: map[string][]factAt{}, done: map[string]lake.ProgressRow{}}
}

// observe records fact p, published before WAL sequence walSeq was read.
func (ps *progressState) observe(p streams.Progress, walSeq uint64) {
	q := ps.pending[p.Source]
	if n := len(q); n > 0 && q[n-1].walSeq == walSeq {
		q[n-1] = factAt{p, walSeq} // the newer fact speaks for the same frames
	} else {
		q = append(q, factAt{p, walSeq})
	}
	if len(q) > maxPendingFacts {
		q = q[1:]
	}
	ps.pending[p.Source] = q
}

// covered is the fact of source with the latest finalized_until among those
// whose WAL sequence is at or below hw, without changing anything; false
// when there is none.
func (ps *progressState) covered(source string, hw uint64) (factAt, bool) {
	var best factAt
	ok := false
	for _, f := range ps.pending[source] {
		if f.walSeq <= hw && (!ok || !f.p.FinalizedUntil.Before(best.p.FinalizedUntil)) {
			best, ok = f, true
		}
	}
	return best, ok
}

// advance makes every fact covered by hw count, as of records version v.
// finalized_until never moves back. It reports whether anything changed.
func (ps *progressState) advance(hw uint64, v int64) bool {
	changed := false
	for src, q := range ps.pending {
		f, ok := ps.covered(src, hw)
		if !ok {
			continue
		}
		i := 0
		for i < len(q) && q[i].walSeq <= hw {
			i++
		}
		if i == len(q) {
			delete(ps.pending, src)
		} else {
			ps.pending[src] = q[i:]
		}
		cur, have := ps.done[src]
		if have && !f.p.FinalizedUntil.After(cur.FinalizedUntil) {
			continue
		}
		ps.done[src] = lake.ProgressRow{
			Source: src, Tenant: f.p.Tenant, FinalizedUntil: f.p.FinalizedUntil.UTC(),
			WALSeq: int64(f.walSeq), HighWater: int64(hw), Version: v,
		}
		changed = true
	}
	ps.dirty = ps.dirty || changed
	return changed
}

// info is the "progress" object of the commitInfo of a commit at hw: per
// source, the finalized_until it reaches with that commit.
func (ps *progressState) info(hw uint64) map[string]any {
	out := map[string]any{}
	entry := func(tenant string, until time.Time, walSeq int64) map[string]any {
		e := map[string]any{"finalized_until": until.UTC().Format(time.RFC3339Nano), "wal_seq": walSeq}
		if tenant != "" {
			e["tenant"] = tenant
		}
		return e
	}
	for src, r := range ps.done {
		out[src] = entry(r.Tenant, r.FinalizedUntil, r.WALSeq)
	}
	for src := range ps.pending {
		f, ok := ps.covered(src, hw)
		if !ok {
			continue
		}
		if r, have := ps.done[src]; have && !f.p.FinalizedUntil.After(r.FinalizedUntil) {
			continue
		}
		out[src] = entry(f.p.Tenant, f.p.FinalizedUntil, int64(f.walSeq))
	}
	return out
}

// pollProgress reads the progress facts that changed since the last poll
// (at most once per CommitInterval) and associates them with the WAL
// stream's last sequence. Progress is best effort: errors are logged and the
// next poll tries again.
func (c *Committer) pollProgress(ctx context.Context, ts *termState) {
	ps := ts.prog
	if time.Since(ps.lastPoll) < c.cfg.CommitInterval {
		return
	}
	ps.lastPoll = time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	if ps.kv == nil {
		kv, err := c.js.KeyValue(ctx, streams.ProgressBucket)
		if err != nil {
			c.log.Debug("progress bucket", "err", err)
			return
		}
		ps.kv = kv
	}
	// Nothing was put since the last poll: skip reading every key.
	kvs, err := c.js.Stream(ctx, "KV_"+streams.ProgressBucket)
	if err != nil {
		c.log.Warn("progress bucket stream", "err", err)
		return
	}
	kinfo, err := kvs.Info(ctx)
	if err != nil {
		c.log.Warn("progress bucket stream", "err", err)
		return
	}
	if kinfo.State.LastSeq == ps.kvLast {
		return
	}
	kvLast := kinfo.State.LastSeq
	lister, err := ps.kv.ListKeys(ctx)
	if err != nil {
		c.log.Warn("list progress facts", "err", err)
		return
	}
	type fresh struct {
		key string
		rev uint64
		p   *streams.Progress
	}
	var got []fresh
	for k := range lister.Keys() {
		ent, err := ps.kv.Get(ctx, k)
		if err != nil {
			if !errors.Is(err, jetstream.ErrKeyNotFound) {
				c.log.Warn("read progress fact", "key", k, "err", err)
			}
			continue
		}
		if ent.Revision() == ps.revs[k] {
			continue
		}
		p, err := streams.DecodeProgress(ent.Value())
		if err != nil {
			c.log.Warn("progress fact unreadable", "key", k, "err", err)
			ps.revs[k] = ent.Revision()
			continue
		}
		got = append(got, fresh{k, ent.Revision(), p})
	}
	if len(got) == 0 {
		ps.kvLast = kvLast
		return
	}
	// After the facts: every frame they speak for is at or below last.
	s, err := c.js.Stream(ctx, streams.WALStream)
	if err != nil {
		c.log.Warn("wal stream for progress", "err", err)
		return
	}
	info, err := s.Info(ctx)
	if err != nil {
		c.log.Warn("wal stream for progress", "err", err)
		return
	}
	for _, f := range got {
		ps.revs[f.key] = f.rev
		ps.observe(*f.p, info.State.LastSeq)
	}
	ps.kvLast = kvLast
}

// loadProgress reads the progress table into ts.prog at the start of a term.
func (c *Committer) loadProgress(ctx context.Context, ts *termState) error {
	ps := newProgressState()
	lk := lake.Open(c.store)
	ps.st = &tableState{name: lake.ProgressTable, t: c.progress, version: -1, txn: -1, paths: map[string]bool{}}
	err := c.retry(ctx, "snapshot "+lake.ProgressTable, func(ctx context.Context) error {
		snap, err := lk.ProgressTable().Snapshot(ctx)
		if err != nil {
			return err
		}
		ps.st.version = snap.Version
		clear(ps.st.paths)
		for _, f := range snap.Files {
			ps.st.paths[f.Path] = true
		}
		return nil
	})
	ts.prog = ps
	if err != nil {
		return err
	}
	// Unreadable rows must not keep the term from committing records: the
	// facts in KV rebuild them, and the next progress commit replaces the
	// file.
	rctx, cancel := context.WithTimeout(ctx, 3*c.cfg.OpTimeout)
	defer cancel()
	rows, _, err := lk.Progress(rctx)
	if err != nil {
		c.log.Error("progress table unreadable, rebuilding it from the progress facts", "err", err)
		ps.dirty = true
		return nil
	}
	for _, r := range rows {
		ps.done[r.Source] = r
	}
	return nil
}

// writeProgress commits the progress table when a source's progress moved,
// at most once per ProgressInterval:
// one new file with a row per source replaces the live one. A failure is
// logged and retried after the next advance; a version written by another
// committer means this one is fenced.
func (c *Committer) writeProgress(ctx context.Context, ts *termState) error {
	ps := ts.prog
	if !ps.dirty || ps.st.version < 0 || time.Since(ps.lastPut) < c.cfg.ProgressInterval {
		return nil
	}
	now := time.Now().UTC()
	rows := make([]lake.ProgressRow, 0, len(ps.done))
	for _, r := range ps.done {
		r.CommittedAt = now
		rows = append(rows, r)
	}
	data, err := lake.EncodeProgress(rows)
	if err != nil {
		c.progressFailed(err)
		return nil
	}
	pt := ps.st.t
	version := ps.st.version + 1
	path := lake.ProgressFilePath(ts.rec.version, version)
	cctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	err = c.store.Put(cctx, pt.FileKey(path), data)
	cancel()
	if err != nil {
		c.progressFailed(err)
		return nil
	}
	ms := now.UnixMilli()
	actions := []delta.Action{{CommitInfo: delta.CommitInfo{
		"operation": "WRITE", "operationParameters": map[string]any{"mode": "Overwrite"}, "engineInfo": "quarry-committer",
		"quarry": map[string]any{"high_water": ts.arb.hw, "records_version": ts.rec.version, "committer": c.cfg.Name, "lease_revision": ts.l.revision()},
	}}}
	for _, p := range slices.Sorted(maps.Keys(ps.st.paths)) {
		actions = append(actions, delta.Action{Remove: &delta.Remove{Path: p, DeletionTimestamp: ms, DataChange: true}})
	}
	actions = append(actions, delta.Action{Add: &delta.Add{
		Path: path, PartitionValues: map[string]string{}, Size: int64(len(data)), ModificationTime: ms, DataChange: true,
		Stats: fmt.Sprintf(`{"numRecords":%d}`, len(rows)),
	}})
	if !ts.l.valid() {
		return fmt.Errorf("%w: before committing %s version %d", errLeaseLost, lake.ProgressTable, version)
	}
	cctx, cancel = context.WithTimeout(ctx, 3*c.cfg.OpTimeout)
	err = pt.Commit(cctx, version, actions)
	cancel()
	if errors.Is(err, delta.ErrVersionExists) {
		return fmt.Errorf("%w: %s version %d exists", errFenced, lake.ProgressTable, version)
	}
	if err != nil {
		c.progressFailed(fmt.Errorf("commit %s version %d: %w", lake.ProgressTable, version, err))
		return nil
	}
	c.mu.Lock()
	c.progFailSince, c.progErr = time.Time{}, nil
	c.mu.Unlock()
	before := ps.st.version
	ps.st.version, ps.dirty, ps.lastPut = version, false, time.Now()
	ps.st.paths = map[string]bool{path: true}
	c.cp.committed(ps.st, before)
	c.log.Debug("progress committed", "version", version, "sources", len(rows), "high_water", ts.arb.hw)
	return nil
}

// progressFailed records a failed progress table write: the next commit
// tries again, and Ready reports it once it lasts StallAfter.
func (c *Committer) progressFailed(err error) {
	c.log.Warn("progress table", "err", err)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.progFailSince.IsZero() {
		c.progFailSince = time.Now()
	}
	c.progErr = err
}
