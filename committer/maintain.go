package committer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/recfile"
)

// Crash points of maintenance (internal/crashpoint).
const (
	// CrashCompactBeforeCommit: a compaction's new files are written, its
	// commit is not.
	CrashCompactBeforeCommit = "committer.compact-before-commit"
	// CrashCompactAfterCommit: the compaction's commit is written.
	CrashCompactAfterCommit = "committer.compact-after-commit"
	// CrashCompactTemplatesBeforeCommit: the templates compaction's new
	// file is written, its commit is not.
	CrashCompactTemplatesBeforeCommit = "committer.compact-templates-before-commit"
	// CrashCompactTemplatesAfterCommit: the templates compaction's commit
	// is written.
	CrashCompactTemplatesAfterCommit = "committer.compact-templates-after-commit"
	// CrashRetainBeforeCommit: retention's rewrites of the files that
	// straddle its cut are written, its commit is not.
	CrashRetainBeforeCommit = "committer.retain-before-commit"
	// CrashRetainAfterCommit: retention's commit is written.
	CrashRetainAfterCommit = "committer.retain-after-commit"
)

// ErrLeaseHeld: a manual compaction found the lease held by a running
// committer, which compacts in the background itself.
var ErrLeaseHeld = errors.New("the committer lease is held by a running committer")

// ErrNotActive: Maintain asked a committer that holds no active term (a
// standby, or one stopping); the active committer maintains the lake.
var ErrNotActive = errors.New("committer is not active")

// errStale: a maintenance commit would remove a file that is no longer
// live (a retention or compaction commit since it was planned).
var errStale = errors.New("maintenance plan is stale")

// newTableState is the state of table t (name) at snap: its version, txn
// and live paths.
func newTableState(name string, t *delta.Table, snap *delta.Snapshot) *tableState {
	st := &tableState{name: name, t: t, version: snap.Version, txn: -1, paths: map[string]bool{}}
	if v, ok := snap.Txns[AppID]; ok {
		st.txn = v
	}
	for _, f := range snap.Files {
		st.paths[f.Path] = true
	}
	return st
}

// submitTo commits each job to rec or tpl (job.target) under l: the
// commit path of a pass that holds the lease itself (Compact).
func submitTo(rec, tpl *tableState, l *lease, name string, timeout time.Duration) func(context.Context, *job) error {
	return func(ctx context.Context, j *job) error {
		return commitJob(ctx, j.target(rec, tpl), l, name, timeout, j)
	}
}

// target is the state of the table j commits to.
func (j *job) target(rec, tpl *tableState) *tableState {
	if j.table == lake.TemplatesTable {
		return tpl
	}
	return rec
}

// job is one maintenance commit of the records table or of the templates
// table (compactTemplates): removes and adds, no txn (the high-water stays).
type job struct {
	table   string         // lake.RecordsTable ("" too) or lake.TemplatesTable
	op      string         // commitInfo operation: "OPTIMIZE" or "DELETE"
	params  map[string]any // commitInfo operationParameters
	actions []delta.Action // removes, then adds
	done    chan error     // the term's answer
}

func (j *job) counts() (removes, adds int) {
	for _, a := range j.actions {
		if a.Remove != nil {
			removes++
		} else if a.Add != nil {
			adds++
		}
	}
	return removes, adds
}

// commitJob commits j as st's next version under lease l when every file
// it removes is still live in st, and updates st. It returns errStale when
// one is not (nothing written), errLeaseLost or errFenced like a high-water
// commit.
func commitJob(ctx context.Context, st *tableState, l *lease, name string, timeout time.Duration, j *job) error {
	for _, a := range j.actions {
		if a.Remove != nil && !st.paths[a.Remove.Path] {
			return fmt.Errorf("%w: %s is not live", errStale, a.Remove.Path)
		}
	}
	version := st.version + 1
	q := map[string]any{"committer": name, "lease_revision": l.revision()}
	if st.txn >= 0 {
		q["high_water"] = st.txn
	}
	actions := append([]delta.Action{{CommitInfo: delta.CommitInfo{
		"operation": j.op, "operationParameters": j.params, "engineInfo": "quarry-committer", "quarry": q,
	}}}, j.actions...)
	if !l.valid() {
		return fmt.Errorf("%w: before committing %s version %d (%s)", errLeaseLost, st.name, version, j.op)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	err := st.t.Commit(cctx, version, actions)
	cancel()
	if errors.Is(err, delta.ErrVersionExists) {
		return fmt.Errorf("%w: %s version %d (%s) written by another writer", errFenced, st.name, version, j.op)
	}
	if err != nil {
		return fmt.Errorf("commit %s version %d (%s): %w", st.name, version, j.op, err)
	}
	st.version = version
	for _, a := range j.actions {
		switch {
		case a.Remove != nil:
			delete(st.paths, a.Remove.Path)
		case a.Add != nil:
			st.paths[a.Add.Path] = true
		}
	}
	return nil
}

// maintainer plans and prepares the lake's maintenance: retention and
// compaction. It never commits itself: submit hands a job to the holder
// of the lease.
type maintainer struct {
	cfg       Config
	log       *slog.Logger
	records   *delta.Table
	templates *delta.Table
	rw        *rewriter
	now       func() time.Time
	jobs      chan *job // to the active term

	// passMu makes passes one at a time: the background loop's and
	// Maintain's would plan the same files (and share rw.texts).
	passMu sync.Mutex
	// termMu guards term: open while a term takes jobs (startMaintenance
	// to its stop), closed when it stops, nil before the first term.
	termMu sync.Mutex
	term   chan struct{}
}

func newMaintainer(cfg Config, store objstore.Store, log *slog.Logger, now func() time.Time) *maintainer {
	var b [4]byte
	_, _ = rand.Read(b[:])
	lk := lake.Open(store)
	return &maintainer{
		cfg: cfg, log: log, records: lk.Records(), templates: lk.TemplatesTable(), now: now, jobs: make(chan *job),
		rw: &rewriter{lake: lk, records: lk.Records(), token: hex.EncodeToString(b[:])},
	}
}

// PassResult is what one maintenance pass did.
type PassResult struct {
	Expired    int // files removed by retention
	Rewritten  int // files retention wrote with the kept rows of files it removed
	Compacted  int // files removed by compaction
	Written    int // files compaction wrote and committed
	Partitions int // partitions compacted
	Skipped    int // partitions whose rewrite failed (logged)
	// TemplateFiles are the templates table's files compaction merged
	// into one (compactTemplates); 0 when it merged none.
	TemplateFiles int
}

// passSpec is what one pass does.
type passSpec struct {
	only    Partition // the partitions it touches (empty fields match all)
	retain  bool      // retention (where cfg.Retention has one)
	compact bool      // compaction of the closed partitions
	// allClosed takes every partition as closed (MaintainOptions).
	allClosed bool
}

// pass runs retention and compaction once, as spec says.
func (m *maintainer) pass(ctx context.Context, spec passSpec, submit func(context.Context, *job) error) (PassResult, error) {
	only := spec.only
	m.passMu.Lock()
	defer m.passMu.Unlock()
	var res PassResult
	now := m.now()
	if spec.retain && m.cfg.Retention.Enabled() {
		snap, err := m.records.Snapshot(ctx)
		if err != nil {
			return res, fmt.Errorf("records snapshot: %w", err)
		}
		var acts, adds []delta.Action
		hw := int64(-1)
		if v, ok := snap.Txns[AppID]; ok {
			hw = v
		}
		removes, straddle := retentionPlan(snap, m.cfg.Retention, hw, now)
		for _, a := range removes {
			if only.match(partOf(a.Remove.PartitionValues)) {
				acts = append(acts, a)
			}
		}
		layout := lake.LayoutOf(snap.Metadata)
		m.rw.texts = map[string]recfile.Templates{}
		for i, f := range straddle {
			p := partOf(f.PartitionValues)
			if !only.match(p) {
				continue
			}
			cut, _ := m.cfg.Retention.expiredThrough(p.Tenant, now)
			keep := func(r *recfile.Row) bool { return lake.Date(r.TS) > cut }
			add, kept, err := m.rw.write(ctx, snap.Version, lake.RetainFileName(snap.Version, m.rw.token, i), p, layout, []delta.Add{f}, keep, now)
			if err != nil {
				if ctx.Err() != nil {
					return res, context.Cause(ctx)
				}
				m.log.Warn("retention skipped a file it could not rewrite", "path", f.Path, "err", err)
				res.Skipped++
				continue
			}
			acts = append(acts, retentionRemove(f, now.UnixMilli()))
			if kept > 0 {
				adds = append(adds, delta.Action{Add: &add})
			}
		}
		if len(acts) > 0 {
			j := &job{op: "DELETE", params: map[string]any{"predicate": "retention", "files": len(acts)}, actions: append(acts, adds...)}
			crashpoint.Hit(CrashRetainBeforeCommit)
			if err := submit(ctx, j); err != nil {
				return res, fmt.Errorf("retention commit: %w", err)
			}
			crashpoint.Hit(CrashRetainAfterCommit)
			res.Expired = len(acts)
			res.Rewritten = len(adds)
			m.log.Info("retention removed expired records", "files", len(acts), "files_rewritten", len(adds))
		}
	}
	if !spec.compact {
		return res, nil
	}
	snap, err := m.records.Snapshot(ctx)
	if err != nil {
		return res, fmt.Errorf("records snapshot: %w", err)
	}
	hw := int64(-1)
	if v, ok := snap.Txns[AppID]; ok {
		hw = v
	}
	m.rw.texts = map[string]recfile.Templates{} // templates change between passes
	for _, g := range compactionPlan(snap, hw, m.cfg.Compaction, only, spec.allClosed, now) {
		j, err := m.prepare(ctx, snap.Version, g, now)
		if err != nil {
			if ctx.Err() != nil {
				return res, context.Cause(ctx)
			}
			// One partition that cannot be rewritten (a template missing,
			// a damaged file) does not hold up the others.
			m.log.Warn("compaction skipped a partition", "partition", g.part.String(), "err", err)
			res.Skipped++
			continue
		}
		crashpoint.Hit(CrashCompactBeforeCommit)
		err = submit(ctx, j)
		if errors.Is(err, errStale) {
			m.log.Warn("compaction plan went stale, its files are left for vacuum", "partition", g.part.String(), "err", err)
			continue
		}
		if err != nil {
			return res, fmt.Errorf("compaction commit of %s: %w", g.part, err)
		}
		crashpoint.Hit(CrashCompactAfterCommit)
		removed, added := j.counts()
		res.Compacted += removed
		res.Written += added
		res.Partitions++
		m.log.Info("partition compacted", "partition", g.part.String(), "files_removed", removed, "files_written", added)
	}
	if spec.only == (Partition{}) { // the templates table has no partitions
		if err := m.compactTemplates(ctx, spec, hw, now, submit, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// compactTemplates merges the templates table's small files into one when
// templatesPlan says (idle, or templatesMergeFiles of them): the rows as they are, every file's
// in (wal_seq, template_id, version) order, at zstd's best level, one
// commit of remove + add with dataChange=false and no txn. The new file
// names the reports of the files it replaces (TagReports); a rebuild knows
// them as committed from the records table, where their files are at or
// below the high-water. A crash before the commit leaves the new file an
// orphan for vacuum; after it, the table is merged.
func (m *maintainer) compactTemplates(ctx context.Context, spec passSpec, hw int64, now time.Time, submit func(context.Context, *job) error, res *PassResult) error {
	snap, err := m.templates.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("templates snapshot: %w", err)
	}
	files := templatesPlan(snap, hw, m.cfg.Compaction, spec.allClosed, now)
	if len(files) == 0 {
		return nil
	}
	var rows []lake.TemplateRow
	var ids []string
	for _, f := range files {
		ids = append(ids, reportsOf(f)...)
		r, err := m.rw.lake.TemplateFileRows(ctx, f.Path)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			m.log.Warn("compaction skipped the templates table", "path", f.Path, "err", err)
			res.Skipped++
			return nil
		}
		rows = append(rows, r...)
	}
	lake.SortTemplateRows(rows)
	data, err := lake.EncodeTemplates(rows, true)
	if err != nil {
		return fmt.Errorf("encode the templates compaction: %w", err)
	}
	name := lake.CompactFileName(snap.Version, m.rw.token, 0)
	if err := m.templates.Store().Put(ctx, m.templates.FileKey(name), data); err != nil {
		return fmt.Errorf("upload %s: %w", name, err)
	}
	ms := now.UnixMilli()
	var acts []delta.Action
	for _, f := range files {
		acts = append(acts, compactRemove(f, ms))
	}
	acts = append(acts, delta.Action{Add: &delta.Add{
		Path: name, PartitionValues: map[string]string{}, Size: int64(len(data)), ModificationTime: ms, DataChange: false,
		Stats: lake.TemplateStats(rows), Tags: compactTags(snap.Version, ids),
	}})
	j := &job{table: lake.TemplatesTable, op: "OPTIMIZE", params: map[string]any{"predicate": "[]", "files": len(files)}, actions: acts}
	crashpoint.Hit(CrashCompactTemplatesBeforeCommit)
	err = submit(ctx, j)
	if errors.Is(err, errStale) {
		m.log.Warn("templates compaction plan went stale, its file is left for vacuum", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("templates compaction commit: %w", err)
	}
	crashpoint.Hit(CrashCompactTemplatesAfterCommit)
	res.TemplateFiles += len(files)
	m.log.Info("templates compacted", "files_removed", len(files), "rows", len(rows))
	return nil
}

// prepare writes a group's new files and returns its commit.
func (m *maintainer) prepare(ctx context.Context, base int64, g compactGroup, now time.Time) (*job, error) {
	var removes, adds []delta.Action
	ms := now.UnixMilli()
	for i, bin := range g.bins {
		add, err := m.rw.rewrite(ctx, base, i, g.part, g.layout, bin, now)
		if err != nil {
			return nil, err
		}
		adds = append(adds, delta.Action{Add: &add})
		for _, f := range bin {
			removes = append(removes, compactRemove(f, ms))
		}
	}
	pred := fmt.Sprintf("tenant = '%s'", g.part.Tenant)
	if g.part.Date != "" {
		pred += fmt.Sprintf(" AND date = '%s'", g.part.Date)
	}
	return &job{
		op:      "OPTIMIZE",
		params:  map[string]any{"predicate": pred, "targetSize": m.cfg.Compaction.TargetBytes},
		actions: append(removes, adds...),
	}, nil
}

// loop runs a pass every Compaction.Interval until ctx ends, handing its
// commits to the active term; done sees each finished pass.
func (m *maintainer) loop(ctx context.Context, done func(PassResult, error)) {
	for backoff.Sleep(ctx, m.cfg.Compaction.Interval) {
		res, err := m.pass(ctx, passSpec{retain: true, compact: m.cfg.Compaction.enabled()}, m.submit)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			m.log.Warn("maintenance pass", "err", err)
		}
		done(res, err)
	}
}

// activeTerm is the channel the active term closes when it stops taking
// jobs; nil or closed when there is none.
func (m *maintainer) activeTerm() chan struct{} {
	m.termMu.Lock()
	defer m.termMu.Unlock()
	return m.term
}

// submit hands j to the active term and waits for its commit. It returns
// ErrNotActive when no term takes it: the term's goroutine answers every
// job it took before it stops, so a job taken is always answered.
func (m *maintainer) submit(ctx context.Context, j *job) error {
	term := m.activeTerm()
	if term == nil {
		return ErrNotActive
	}
	j.done = make(chan error, 1)
	select {
	case m.jobs <- j:
	case <-term:
		return ErrNotActive
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// startMaintenance runs the maintainer for one term (its background loop
// when compaction or retention is enabled) and takes Maintain's jobs;
// stop ends it and waits.
func (c *Committer) startMaintenance(ctx context.Context) (stop func()) {
	term := make(chan struct{})
	c.maint.termMu.Lock()
	c.maint.term = term
	c.maint.termMu.Unlock()
	mctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if c.cfg.Compaction.enabled() || c.cfg.Retention.Enabled() {
		wg.Go(func() { c.maint.loop(mctx, c.passDone) })
	}
	return func() {
		c.maint.termMu.Lock()
		close(term)
		c.maint.termMu.Unlock()
		cancel()
		wg.Wait()
	}
}

// passDone counts a finished maintenance pass in the metrics and in the
// background jobs' health (stall.go).
func (c *Committer) passDone(res PassResult, err error) {
	written := res.Written
	if res.TemplateFiles > 0 {
		written++
	}
	c.m.maintFiles.WithLabelValues("compacted").Add(float64(res.Compacted + res.TemplateFiles))
	c.m.maintFiles.WithLabelValues("written").Add(float64(written))
	c.m.maintFiles.WithLabelValues("expired").Add(float64(res.Expired))
	c.m.maintFiles.WithLabelValues("retained").Add(float64(res.Rewritten))
	if err != nil {
		c.bgFailed("maintenance pass", err)
	} else {
		c.bgSucceeded("maintenance pass")
	}
	switch {
	case err != nil:
		c.m.maintPasses.WithLabelValues("error").Inc()
	case res.Skipped > 0:
		c.m.maintPasses.WithLabelValues("skipped").Inc()
	default:
		c.m.maintPasses.WithLabelValues("ok").Inc()
	}
}

// MaintainOptions say what Maintain does beyond the background pass.
type MaintainOptions struct {
	// AllClosed compacts every partition's small files, also those of
	// partitions not closed yet (today's, or one that got a file within
	// committer.compaction.idle), even when committer.compaction.enabled
	// is false: for a writer whose input has ended (quarry run --compact),
	// whose lake would otherwise wait for the partitions to close. A
	// partition that gets files later is compacted again once closed.
	AllClosed bool
}

// Maintain runs one maintenance pass now, as the background loop does
// every committer.compaction.interval: retention where configured and,
// when compaction is enabled (or o.AllClosed), the rewrite of the closed
// partitions' small files, its commits made by the active term between
// two high-water advances. It returns ErrNotActive on a committer that
// holds no active term (a standby: the active one maintains the lake), and
// a zero result when there is nothing to do.
func (c *Committer) Maintain(ctx context.Context, o MaintainOptions) (PassResult, error) {
	spec := passSpec{retain: true, compact: c.cfg.Compaction.enabled() || o.AllClosed, allClosed: o.AllClosed}
	if !spec.compact && !c.cfg.Retention.Enabled() {
		return PassResult{}, nil
	}
	if t := c.maint.activeTerm(); t == nil || isClosed(t) {
		return PassResult{}, ErrNotActive
	}
	res, err := c.maint.pass(ctx, spec, c.maint.submit)
	if ctx.Err() == nil && !errors.Is(err, ErrNotActive) {
		c.passDone(res, err)
	}
	return res, err
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// maintenanceCommits commits the maintenance jobs waiting, in the term's
// goroutine (the only writer of ts), between high-water advances.
func (c *Committer) maintenanceCommits(ctx context.Context, ts *termState) error {
	for {
		select {
		case j := <-c.maint.jobs:
			st := j.target(ts.rec, ts.tpl)
			before := st.version
			err := commitJob(ctx, st, ts.l, c.cfg.Name, 3*c.cfg.OpTimeout, j)
			j.done <- err
			if errors.Is(err, errLeaseLost) || errors.Is(err, errFenced) {
				return err
			}
			if err == nil {
				c.cp.committed(st, before)
			}
		default:
			return nil
		}
	}
}

// CompactOptions say what a manual run (Compact) does.
type CompactOptions struct {
	// Only limits the run to matching partitions (empty fields match all).
	Only Partition
	// Retention also removes the partitions past cfg.Retention.
	Retention bool
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Compact runs one maintenance pass by hand (quarry compact): it takes the
// committer lease when no committer holds it, so it never races a commit
// (a committer that starts meanwhile waits as a standby until it is
// done), and returns ErrLeaseHeld when one does: that committer compacts
// in the background (committer.compaction.enabled). The lease is renewed
// while the pass runs and released at the end.
func Compact(ctx context.Context, cfg Config, deps Deps, o CompactOptions) (PassResult, error) {
	c, err := New(cfg, deps)
	if err != nil {
		return PassResult{}, err
	}
	if o.Now != nil {
		c.maint.now = o.Now
	}
	kvs, err := c.buckets(ctx)
	if err != nil {
		return PassResult{}, err
	}
	l, err := c.tryAcquire(ctx, kvs.state, &standbyObs{})
	if err != nil {
		return PassResult{}, err
	}
	if l == nil {
		c.mu.Lock()
		status := c.status
		c.mu.Unlock()
		return PassResult{}, fmt.Errorf("%w (%s); it compacts in the background", ErrLeaseHeld, status)
	}
	workCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewCtx, stopRenew := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.renew(renewCtx, kvs.state, l, cancel) })
	defer func() {
		stopRenew()
		wg.Wait()
		c.release(kvs.state, l)
	}()
	snap, err := c.records.Snapshot(workCtx)
	if err != nil {
		return PassResult{}, fmt.Errorf("records snapshot: %w", err)
	}
	if snap.Version < 0 {
		return PassResult{}, fmt.Errorf("%w: %s", lake.ErrNoTable, c.records.LogDir())
	}
	if err := snap.Writable(); err != nil {
		return PassResult{}, fmt.Errorf("table %s: %w", lake.RecordsTable, err)
	}
	tsnap, err := c.templates.Snapshot(workCtx)
	if err != nil {
		return PassResult{}, fmt.Errorf("templates snapshot: %w", err)
	}
	if err := tsnap.Writable(); err != nil {
		return PassResult{}, fmt.Errorf("table %s: %w", lake.TemplatesTable, err)
	}
	submit := submitTo(newTableState(lake.RecordsTable, c.records, snap), newTableState(lake.TemplatesTable, c.templates, tsnap),
		l, c.cfg.Name, 3*c.cfg.OpTimeout)
	res, err := c.maint.pass(workCtx, passSpec{only: o.Only, retain: o.Retention, compact: true}, submit)
	if err != nil && context.Cause(workCtx) != nil && !errors.Is(context.Cause(workCtx), context.Canceled) {
		err = context.Cause(workCtx) // the lease was lost
	}
	return res, err
}
