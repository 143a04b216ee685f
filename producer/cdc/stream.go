package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/internal/walfloor"
	"github.com/quarrylake/quarry/producer/sqlserver"
	"github.com/quarrylake/quarry/streams"
)

// ErrPurgedRange reports a saved position older than the capture
// instance's minimum LSN: changes the stream never read were purged by the
// cleanup job. The error names the capture instance, the saved LSN and the
// minimum.
var ErrPurgedRange = errors.New("cdc position is in a purged range")

// ErrColumn reports a configured column the capture instance does not
// capture.
var ErrColumn = errors.New("column not captured")

// ErrConflict reports two configured capture instances of one table.
var ErrConflict = errors.New("capture instances of the same table")

// Deps are what the CDC streams use.
type Deps struct {
	JS jetstream.JetStream
	// Source is SQL Server (sqlserver.DB) or an in-memory source; shared by
	// every stream.
	Source     sqlserver.Source
	Log        *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nil: not registered
}

// Stats are a stream's counters.
type Stats struct {
	CaptureInstance string // current (after a takeover, the successor)
	Position        sqlserver.Position
	Rows            uint64 // records acked
	Frames          uint64 // frames acked
	FinalizedUntil  time.Time
	Snapshotting    bool
}

// Stream streams one capture instance into the WAL. Create it with
// NewStream (or Start), run it with Run.
type Stream struct {
	cfg  Config
	tcfg TableConfig
	name string // configured capture instance
	deps Deps
	log  *slog.Logger
	m    *metrics
	pub  *producer.Publisher

	positions jetstream.KeyValue
	progress  jetstream.KeyValue

	started   chan struct{}
	startOnce sync.Once

	// main goroutine only
	plan     columnPlan
	read     state // read position (ahead of acked)
	frame    []streams.Record
	fbytes   int
	fFirst   string // first position text of the open frame
	fLast    string
	succ     *sqlserver.CaptureInstance
	lastScan time.Time
	lastTo   sqlserver.LSN
	snap     sqlserver.Snapshot // open during a snapshot
	snapAt   time.Time          // commit time of the snapshot LSN

	mu        sync.Mutex
	acked     state
	finalized time.Time
	pubErr    error
	ready     error
	dirty     bool
	notify    chan struct{}
	saveMu    sync.Mutex
	lastProg  time.Time
	progAcked uint64

	// floor is the WAL floor (streams.FloorKey(progressSource())): held
	// while frames may be in the WAL beyond the saved state, released when
	// idle. Its lock comes before mu. floorBase is the WAL sequence of the
	// saved state: later frames are above it.
	floor     *walfloor.Floor
	floorBase atomic.Uint64
}

// NewStream checks cfg (after Defaults) and returns the stream of
// capture instance ci (its settings from cfg.TableConfig(ci)).
func NewStream(cfg Config, ci string, deps Deps) (*Stream, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newStream(cfg, ci, deps)
}

// newStream is NewStream for a cfg already completed and validated.
func newStream(cfg Config, ci string, deps Deps) (*Stream, error) {
	var errs []error
	if err := streams.CheckToken(ci); err != nil {
		errs = append(errs, fmt.Errorf("capture instance: %w", err))
	}
	if deps.JS == nil {
		errs = append(errs, errors.New("cdc: deps.JS is nil"))
	}
	if deps.Source == nil {
		errs = append(errs, errors.New("cdc: deps.Source is nil"))
	}
	tc := cfg.TableConfig(ci)
	if err := streams.CheckToken(tc.Tenant); err != nil {
		errs = append(errs, fmt.Errorf("capture instance %s: tenant: %w", ci, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("db", cfg.Database, "capture_instance", ci)
	s := &Stream{
		cfg: cfg, tcfg: tc, name: ci, deps: deps, log: log,
		m:       newMetrics(deps.Registerer),
		started: make(chan struct{}),
		notify:  make(chan struct{}, 1),
		ready:   errors.New("starting"),
	}
	s.pub = producer.NewPublisher(deps.JS, cfg.Publisher, log, producer.NewPublisherMetrics(deps.Registerer))
	return s, nil
}

// CaptureInstance is the configured capture instance name.
func (s *Stream) CaptureInstance() string { return s.name }

// Started is closed once the stream has started reading (its position is
// loaded and the first read is under way).
func (s *Stream) Started() <-chan struct{} { return s.started }

// Ready is nil while the stream reads and publishes normally; otherwise it
// says what the stream waits for or why it failed.
func (s *Stream) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

func (s *Stream) setReady(err error) {
	s.mu.Lock()
	s.ready = err
	s.mu.Unlock()
}

// Stats returns the acked counters.
func (s *Stream) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		CaptureInstance: s.acked.CaptureInstance, Position: s.acked.Pos, Rows: s.acked.Rows,
		Frames: s.acked.Frames, FinalizedUntil: s.finalized, Snapshotting: s.acked.Snapshot != nil,
	}
}

func (s *Stream) source(ci string) string { return PositionKey(s.cfg.Database, ci) }

func (s *Stream) progressSource() string { return PositionKey(s.cfg.Database, s.name) }

func (s *Stream) subject(ci string) string { return streams.CDCSubject(s.cfg.Database, ci) }

// fatalError marks errors that stop a stream instead of being retried.
type fatalError struct{ err error }

func (f fatalError) Error() string { return f.err.Error() }

func (f fatalError) Unwrap() error { return f.err }

func fatal(err error) error {
	if err == nil {
		return nil
	}
	return fatalError{err}
}

func isFatal(err error) bool {
	var f fatalError
	return errors.As(err, &f) || errors.Is(err, ErrPurgedRange) || errors.Is(err, ErrColumn) ||
		errors.Is(err, sqlserver.ErrNoCaptureInstance) || errors.Is(err, sqlserver.ErrNoKey) ||
		errors.Is(err, sqlserver.ErrSnapshotIsolation)
}

// Run streams until ctx ends (then it drains: waits up to DrainTimeout for
// in-flight acks, saves the position and returns nil) or a fatal error
// (a purged range, a missing capture instance or column), which it
// returns after draining.
func (s *Stream) Run(ctx context.Context) (err error) {
	defer s.pub.Close()
	defer s.closeSnap()
	defer func() {
		if err != nil {
			s.setReady(fmt.Errorf("stopped: %w", err))
			s.m.errors.WithLabelValues(s.name, "fatal").Inc()
			s.log.Error("cdc stream stopped", "err", err)
		} else {
			s.setReady(errors.New("stopped"))
		}
	}()
	if err := s.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	s.startOnce.Do(func() { close(s.started) })

	saverStop := make(chan struct{})
	saverDone := make(chan struct{})
	go func() { defer close(saverDone); s.saver(saverStop) }()
	defer func() {
		close(saverStop)
		<-saverDone
	}()

	b := backoff.New(backoff.Policy{Min: s.cfg.RetryBackoff, Max: s.cfg.MaxRetryBackoff})
	for {
		err := s.cycle(ctx)
		if ctx.Err() != nil {
			return s.drainQuiet()
		}
		if err != nil {
			if isFatal(err) {
				if derr := s.drain(); derr != nil {
					s.log.Warn("cdc drain after failure", "err", derr)
				}
				return unwrapFatal(err)
			}
			wait := b.Next()
			s.m.errors.WithLabelValues(s.name, "transient").Inc()
			s.log.Warn("cdc stream retry", "err", err, "backoff", wait)
			s.setReady(fmt.Errorf("retrying after error: %w", err))
			if rerr := s.rewind(ctx); rerr != nil && ctx.Err() == nil {
				s.log.Warn("cdc rewind", "err", rerr)
			}
			if !backoff.Sleep(ctx, wait) {
				return s.drainQuiet()
			}
			continue
		}
		b.Reset()
		s.setReady(nil)
		if !backoff.Sleep(ctx, s.cfg.PollInterval) {
			return s.drainQuiet()
		}
	}
}

func unwrapFatal(err error) error {
	if f, ok := err.(fatalError); ok {
		return f.err
	}
	return err
}

// drainQuiet drains after ctx ended; Run then returns nil.
func (s *Stream) drainQuiet() error {
	if err := s.drain(); err != nil {
		s.log.Warn("cdc drain", "err", err)
	}
	return nil
}

// start loads the position (following successors), finds the capture
// instance, compiles the column plan and recovers frames written after
// the saved position.
func (s *Stream) start(ctx context.Context) error {
	s.setReady(errors.New("starting: loading position"))
	var err error
	sctx, cancel := backoff.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if s.positions, err = s.deps.JS.KeyValue(sctx, streams.PositionsBucket); err != nil {
		return fmt.Errorf("cdc %s: bucket %s: %w", s.name, streams.PositionsBucket, err)
	}
	if s.progress, err = s.deps.JS.KeyValue(sctx, streams.ProgressBucket); err != nil {
		return fmt.Errorf("cdc %s: bucket %s: %w", s.name, streams.ProgressBucket, err)
	}
	cur := s.name
	st, found, err := s.loadState(sctx, cur)
	if err != nil {
		return err
	}
	for hops := 0; found && st.Successor != "" && hops < 16; hops++ {
		next := st.Successor
		nst, nfound, err := s.loadState(sctx, next)
		if err != nil {
			return err
		}
		if !nfound {
			return fmt.Errorf("cdc %s: position names successor %s, which has no position", cur, next)
		}
		s.log.Info("cdc following successor", "from", cur, "to", next)
		cur, st = next, nst
	}
	cis, err := s.deps.Source.CaptureInstances(sctx)
	if err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	var ci *sqlserver.CaptureInstance
	for i := range cis {
		if strings.EqualFold(cis[i].Name, cur) {
			ci = &cis[i]
		}
	}
	if ci == nil {
		return fmt.Errorf("cdc %s: %w: %s in database %s", s.name, sqlserver.ErrNoCaptureInstance, cur, s.cfg.Database)
	}
	if err := streams.CheckToken(ci.Name); err != nil {
		return fmt.Errorf("cdc %s: capture instance name: %w", s.name, err)
	}
	if s.plan, err = newColumnPlan(*ci, s.tcfg); err != nil {
		return err
	}
	if !found {
		st = state{V: 1, CaptureInstance: ci.Name}
	}
	st.CaptureInstance = ci.Name
	if err := s.startFloor(sctx, st.WALSeq); err != nil {
		return err
	}
	if err := s.recoverFromWAL(sctx, &st); err != nil {
		return err
	}
	s.read = st.clone()
	s.mu.Lock()
	s.acked = st.clone()
	if !st.LastCommit.IsZero() {
		s.finalized = st.LastCommit.Add(-time.Nanosecond)
	}
	s.mu.Unlock()
	// Bootstrap decision.
	switch {
	case st.Snapshot != nil:
		s.log.Info("cdc snapshot in progress at the last stop", "lsn", st.Snapshot.LSN, "rows", st.Snapshot.Rows, "isolation", s.cfg.SnapshotIsolation)
	case !found && s.tcfg.Bootstrap != BootstrapNever:
		if err := s.beginSnapshot(sctx); err != nil {
			return err
		}
		// A rewind before the first ack must come back to the snapshot,
		// not to an empty position (that would skip the bootstrap).
		s.mu.Lock()
		s.acked = s.read.clone()
		s.mu.Unlock()
	}
	s.log.Info("cdc stream starting", "position", s.read.Pos.String(), "rows", s.read.Rows, "bootstrap", s.tcfg.Bootstrap, "found", found)
	s.setReady(errors.New("starting: first read"))
	return nil
}

// cycle does one read: the snapshot if one is due, then the changes up to
// the max LSN, then the heartbeat.
func (s *Stream) cycle(ctx context.Context) error {
	if err := s.takePubErr(); err != nil {
		return err
	}
	if s.read.Snapshot == nil {
		s.closeSnap()
	} else {
		if err := s.snapshot(ctx); err != nil {
			return err
		}
	}
	s.startOnce.Do(func() { close(s.started) })
	if err := s.checkSuccessor(ctx); err != nil {
		return err
	}
	src := s.deps.Source
	ci := s.plan.ci
	to, err := src.MaxLSN(ctx)
	if err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	if s.succ == nil && to == s.lastTo && s.read.Pos == sqlserver.Through(to) {
		s.kick() // nothing new in the database: only the heartbeat is due
		return nil
	}
	handoff := false
	if s.succ != nil {
		if h := s.succ.StartLSN.Prev(); h.Compare(to) <= 0 {
			to, handoff = h, true
		}
	}
	if err := s.checkPurged(ctx); err != nil || s.read.Snapshot != nil {
		return err // nil when a re-snapshot was started: next cycle
	}
	for s.read.Pos.Compare(sqlserver.Through(to)) < 0 {
		page, err := src.Changes(ctx, ci, s.read.Pos, to, s.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("cdc %s: %w", s.name, err)
		}
		if err := s.checkPurged(ctx); err != nil || s.read.Snapshot != nil {
			return err
		}
		for i := range page {
			c := &page[i]
			if c.Pos.Op != sqlserver.OpUpdateBefore || !s.tcfg.SkipUpdateBefore {
				rec := s.plan.record(s.tcfg, c.CommitTime, c.Pos.Op, c.Pos, c.Values)
				// add may first cut the open frame, whose end state is the
				// read state before this change.
				if err := s.add(ctx, rec, c.Pos.String()); err != nil {
					return err
				}
			}
			s.read.Pos = c.Pos
			if !c.CommitTime.IsZero() {
				s.read.LastCommit = c.CommitTime
			}
		}
		if len(page) < s.cfg.PageSize {
			break
		}
		if err := s.takePubErr(); err != nil {
			return err
		}
	}
	if err := s.flushFrame(ctx); err != nil {
		return err
	}
	if s.read.Pos.Compare(sqlserver.Through(to)) < 0 {
		s.read.Pos = sqlserver.Through(to)
	}
	// Wait for the acks, then install the caught-up state (heartbeat).
	fctx, cancel := backoff.WithTimeout(ctx, s.cfg.Publisher.AckTimeout*time.Duration(s.cfg.Publisher.MaxAttempts+1))
	err = s.pub.Flush(fctx)
	cancel()
	if err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	if err := s.takePubErr(); err != nil {
		return err
	}
	at, err := src.CommitTime(ctx, to)
	if err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	if !at.IsZero() && at.After(s.read.LastCommit) {
		s.read.LastCommit = at
	}
	s.mu.Lock()
	ws := s.acked.WALSeq
	s.acked = s.read.clone()
	s.acked.WALSeq = ws
	if !s.read.LastCommit.IsZero() {
		s.finalized = s.read.LastCommit.Add(-time.Nanosecond)
	}
	s.dirty = true
	s.mu.Unlock()
	s.kick()
	s.lastTo = to
	if handoff && s.read.Pos.Compare(sqlserver.Through(to)) >= 0 {
		return s.takeover(ctx)
	}
	return nil
}

// checkPurged compares the read position with the minimum LSN.
func (s *Stream) checkPurged(ctx context.Context) error {
	if s.read.Pos.IsZero() {
		return nil
	}
	minLSN, err := s.deps.Source.MinLSN(ctx, s.plan.ci.Name)
	if err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	// Changes are missing when the low-water mark is past the next change
	// the stream needs: one at the position's LSN (mid-transaction) or
	// after it (TxEnd).
	need := minLSN
	if s.read.Pos.TxEnd {
		need = minLSN.Prev()
	}
	if need.Compare(s.read.Pos.LSN) <= 0 {
		return nil
	}
	perr := fmt.Errorf("%w: capture instance %s: saved LSN %s is below the minimum LSN %s (the cleanup job removed changes not yet read)",
		ErrPurgedRange, s.plan.ci.Name, s.read.Pos.LSN, minLSN)
	if s.tcfg.Bootstrap != BootstrapWhenNeeded {
		return fatal(perr)
	}
	s.log.Warn("cdc purged range: snapshotting again", "err", perr)
	s.frame, s.fbytes = s.frame[:0], 0
	// Continue from what is acked: frames in flight stay valid.
	return s.beginSnapshot(ctx)
}

// add appends rec to the open frame, cutting the frame first when it is
// full. posText is the record's position text for the frame id.
func (s *Stream) add(ctx context.Context, rec streams.Record, posText string) error {
	size := streams.EncodedRecordSize(&rec)
	if size+256 > s.cfg.FrameBytes {
		return s.deadLetter(ctx, rec, posText, size)
	}
	if len(s.frame) > 0 && (len(s.frame) >= s.cfg.FrameRecords || s.fbytes+size > s.cfg.FrameBytes-256) {
		if err := s.flushFrame(ctx); err != nil {
			return err
		}
	}
	if len(s.frame) == 0 {
		s.fFirst = posText
	}
	s.fLast = posText
	s.frame = append(s.frame, rec)
	s.fbytes += size
	return nil
}

func (s *Stream) deadLetter(ctx context.Context, rec streams.Record, posText string, size int) error {
	payload := []byte(rec.Text)
	if len(payload) > 64<<10 {
		payload = payload[:64<<10]
	}
	hdr := nats.Header{}
	hdr.Set(streams.HeaderSource, s.source(s.plan.ci.Name))
	hdr.Set(streams.HeaderOffset, posText)
	hdr.Set(streams.HeaderMsgID, "dlq-"+s.source(s.plan.ci.Name)+":"+posText)
	reason := fmt.Sprintf("cdc record of %d bytes exceeds frame_bytes %d", size, s.cfg.FrameBytes)
	if err := streams.DeadLetter(ctx, s.deps.JS, "producer", s.subject(s.plan.ci.Name), 0, payload, reason, hdr); err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	s.m.errors.WithLabelValues(s.name, "dead_letter").Inc()
	s.log.Warn("cdc record dead-lettered", "position", posText, "bytes", size)
	return nil
}

// flushFrame publishes the open frame; its done callback installs the
// read state as of the frame's end.
func (s *Stream) flushFrame(ctx context.Context) error {
	if len(s.frame) == 0 {
		return nil
	}
	src := s.source(s.plan.ci.Name)
	var id string
	if s.read.Snapshot != nil {
		id = src + ":snap:" + s.read.Snapshot.LSN.String() + ":" + s.fFirst + ":" + s.fLast
	} else {
		id = src + ":" + s.fFirst + "/" + s.fLast
	}
	n := uint64(len(s.frame))
	if err := s.holdFloor(ctx); err != nil {
		return err
	}
	f := &streams.Frame{Source: src, Tenant: s.tcfg.Tenant, FirstOffset: s.read.Rows, NextOffset: s.read.Rows + n, Records: s.frame}
	s.read.Rows += n
	s.read.Frames++
	end := s.read.clone()
	ciName := s.plan.ci.Name
	err := s.pub.Publish(ctx, s.subject(ciName), id, f, func(seq uint64, err error) {
		s.onAck(end, n, seq, err)
		s.floor.Done()
	})
	s.frame = s.frame[:0]
	s.fbytes = 0
	if err != nil {
		s.floor.Drop() // not published
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	return nil
}

func (s *Stream) kick() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *Stream) takePubErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pubErr != nil {
		return fmt.Errorf("cdc %s: %w", s.name, s.pubErr)
	}
	return nil
}
