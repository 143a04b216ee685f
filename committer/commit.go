package committer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/streams"
)

// commit writes one advance, when the barrier allows one: templates first,
// then records, each with every accepted file it lacks and txn(AppID, W').
func (c *Committer) commit(ctx context.Context, ts *termState) error {
	c.pollProgress(ctx, ts)
	w := ts.arb.advance()
	if w <= ts.arb.hw {
		// No advance: progress facts the high-water already covers still
		// reach the progress table.
		ts.prog.advance(ts.arb.hw, ts.rec.version)
		return c.writeProgress(ctx, ts)
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
	prog := ts.prog.info(w)
	tplAdds := c.adds(reps, streams.TableTemplates, ts.tpl)
	if len(tplAdds) > 0 || ts.tpl.txn < int64(w) {
		if err := c.commitTable(ctx, ts, ts.tpl, tplAdds, w, ids, prog); err != nil {
			return err
		}
	}
	crashpoint.Hit("committer.between-tables")
	if err := c.commitTable(ctx, ts, ts.rec, c.adds(reps, streams.TableRecords, ts.rec), w, ids, prog); err != nil {
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
	c.notify(ctx, ts)
	c.m.commitTime.Observe(time.Since(start).Seconds())
	ts.prog.advance(w, ts.rec.version)
	if err := c.writeProgress(ctx, ts); err != nil {
		return err
	}
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

func (c *Committer) commitTable(ctx context.Context, ts *termState, st *tableState, adds []delta.Action, w uint64, ids []string, prog map[string]any) error {
	version := st.version + 1
	info := delta.CommitInfo{
		"operation":           "WRITE",
		"operationParameters": map[string]any{"mode": "Append"},
		"engineInfo":          "quarry-committer",
		"quarry": map[string]any{
			"high_water": w, "reports": ids, "committer": c.cfg.Name, "lease_revision": ts.l.revision(),
			"progress": prog,
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
	before := st.version
	st.version, st.txn = version, int64(w)
	for _, a := range adds {
		st.paths[a.Add.Path] = true
	}
	c.cp.committed(st, before)
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
