package producer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/promutil"
	"github.com/quarrylake/quarry/producer/internal/walfloor"
	"github.com/quarrylake/quarry/producer/sqlserver"
	"github.com/quarrylake/quarry/streams"
)

// SQL Server change data capture streams.
//
// Delivery contract of a CDC stream (one per capture instance):
//
//   - It reads the change table cdc.<ci>_CT in (start LSN, command id,
//     seqval, operation) order, in pages of at most PageSize rows, up to
//     sys.fn_cdc_get_max_lsn(), and publishes frames on
//     streams.CDCSubject(database, ci). A frame's records are consecutive
//     changes; FirstOffset/NextOffset count the records this capture
//     instance has published (snapshot included), so frames chain.
//   - Nats-Msg-Id is "cdc.<db>.<ci>:<first change position>/<last change
//     position>" (snapshot frames: "cdc.<db>.<ci>:snap:<lsn>:<hash of the
//     first and last key>"): the same changes cut into the same frame get
//     the same id, and JetStream drops the copy inside its window.
//   - The position (KV quarry_positions "cdc.<db>.<ci>", JSON: the key of
//     the last change consumed, or "through LSN" when caught up, record and
//     frame counts, the WAL sequence of the last acked frame, snapshot
//     progress) is saved only after JetStream acked every frame before it.
//   - Crash after a publish and before the position save: on restart the
//     stream first reads its own subject in the WAL after the saved WAL
//     sequence; frames that continue the saved record count are already
//     written and the position moves past them. So a restart republishes
//     nothing, even for a frame cut differently the second time (a frame
//     at the head of the log ends where the max LSN was). Where the WAL
//     was purged in between, it relies on the message ids.
//   - Caught up, the stream saves "through the max LSN" and publishes a
//     progress fact (streams.Progress, KV quarry_progress and
//     quarry.progress.cdc.<db>.<ci>) whose FinalizedUntil is just before
//     the commit time of that LSN: every change committed earlier is in the
//     WAL. A quiet table's progress advances with the max LSN.
//   - Purged range: a saved position below sys.fn_cdc_get_min_lsn(ci) (the
//     cleanup job removed changes the stream has not read), found before or
//     after any page, stops the stream with ErrPurgedRange, unless its
//     bootstrap mode is when_needed: then it snapshots again.
//   - Schema change: when a newer capture instance of the same table
//     exists, the stream reads the old one up to the new one's start LSN,
//     then continues in the new one (its own subject and position key),
//     marking the old position with the successor so a restart follows.
//   - Transient errors (SQL, NATS) rewind the stream to the last acked
//     position and retry with backoff; Ready reports the error meanwhile.
//   - A record larger than FrameBytes is dead-lettered (stage "producer",
//     Quarry-Source "cdc.<db>.<ci>", Quarry-Offset its position) and
//     skipped.
//   - Bootstrap (no saved position, or a purged one with when_needed): a
//     snapshot of the table through one sqlserver.Snapshot, by default one
//     transaction at SNAPSHOT isolation whose first statement reads the
//     max LSN L, so the image is the table as of L; it is read in key
//     order in chunks of SnapshotChunk rows (keyset pagination inside the
//     transaction), published as records with operation "snapshot", then
//     the stream continues with the changes after L. Every change at or
//     before L is in the image, every change after it comes as a change;
//     only a transaction committed before the snapshot began but not yet
//     harvested by the capture job (its lag) is in both. A snapshot
//     transaction cannot be resumed: a restart (or a SQL error) in the
//     middle of a snapshot starts a new one at a new L, after the records
//     already published (they stay in the WAL, tagged with the old _lsn).
//     With SnapshotIsolation read_committed each chunk is its own query and
//     a restart resumes after the last acked key at the old L.

// ErrPurgedRange reports a saved position older than the capture
// instance's minimum LSN: changes the stream never read were purged by the
// cleanup job. The error names the capture instance, the saved LSN and the
// minimum.
var ErrPurgedRange = errors.New("cdc position is in a purged range")

// ErrCDCColumn reports a configured column the capture instance does not
// capture.
var ErrCDCColumn = errors.New("column not captured")

// ErrCDCConflict reports two configured capture instances of one table.
var ErrCDCConflict = errors.New("capture instances of the same table")

// CDCDeps are what the CDC streams use.
type CDCDeps struct {
	JS jetstream.JetStream
	// Source is SQL Server (sqlserver.DB) or an in-memory source; shared by
	// every stream.
	Source     sqlserver.Source
	Log        *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nil: not registered
}

// CDCPositionKey is the KV key of a capture instance's position.
func CDCPositionKey(database, ci string) string { return "cdc." + database + "." + ci }

// cdcSnapshot is the progress of a snapshot in a saved state.
type cdcSnapshot struct {
	LSN   sqlserver.LSN       `json:"lsn"`
	After []sqlserver.KeyPart `json:"after,omitempty"`
	Rows  uint64              `json:"rows"`
}

// cdcState is the saved position of a capture instance (KV value, JSON).
type cdcState struct {
	V               int                `json:"v"`
	CaptureInstance string             `json:"capture_instance"`
	Pos             sqlserver.Position `json:"position"`
	Rows            uint64             `json:"rows"`
	Frames          uint64             `json:"frames"`
	WALSeq          uint64             `json:"wal_seq"`
	LastCommit      time.Time          `json:"last_commit,omitzero"`
	Snapshot        *cdcSnapshot       `json:"snapshot,omitempty"`
	Successor       string             `json:"successor,omitempty"`
	UpdatedAt       time.Time          `json:"updated_at"`
}

func (st cdcState) clone() cdcState {
	if st.Snapshot != nil {
		sn := *st.Snapshot
		sn.After = append([]sqlserver.KeyPart(nil), sn.After...)
		st.Snapshot = &sn
	}
	return st
}

// CDCStats are a stream's counters.
type CDCStats struct {
	CaptureInstance string // current (after a takeover, the successor)
	Position        sqlserver.Position
	Rows            uint64 // records acked
	Frames          uint64 // frames acked
	FinalizedUntil  time.Time
	Snapshotting    bool
}

type cdcMetrics struct {
	records   *prometheus.CounterVec
	frames    *prometheus.CounterVec
	errors    *prometheus.CounterVec
	lag       *prometheus.GaugeVec
	snapshots *prometheus.CounterVec
	// unverified counts restarts that found the WAL purged past the
	// stream's floor.
	unverified *prometheus.CounterVec
}

func newCDCMetrics(reg prometheus.Registerer) *cdcMetrics {
	lbl := []string{"capture_instance"}
	return &cdcMetrics{
		records: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_cdc_records_total", Help: "CDC records (changes and snapshot rows) acked in the WAL."}, lbl)),
		frames: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_cdc_frames_total", Help: "CDC frames acked in the WAL."}, lbl)),
		errors: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_cdc_errors_total", Help: "CDC stream errors by kind (transient, fatal, dead_letter)."}, []string{"capture_instance", "kind"})),
		lag: promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "quarry_producer_cdc_finalized_lag_seconds", Help: "Now minus the commit time up to which the capture instance is complete in the WAL."}, lbl)),
		snapshots: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_cdc_snapshot_rows_total", Help: "Rows read by bootstrap snapshots."}, lbl)),
		unverified: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_cdc_unverified_restarts_total", Help: "Restarts after a crash whose frames beyond the saved position may have been purged from the WAL (their changes may be written twice)."}, lbl)),
	}
}

// cdcPlan maps a capture instance's columns to a record.
type cdcPlan struct {
	ci    sqlserver.CaptureInstance
	text  []int // column indexes; nil: whole row
	keys  []int
	attrs []int
	rest  []int // whole-row text columns
}

func newCDCPlan(ci sqlserver.CaptureInstance, t CDCTableConfig) (cdcPlan, error) {
	p := cdcPlan{ci: ci}
	var errs []error
	idx := func(what, name string) int {
		i := ci.ColumnIndex(name)
		if i < 0 {
			var have []string
			for _, c := range ci.Columns {
				have = append(have, c.Name)
			}
			errs = append(errs, fmt.Errorf("%w: %s column %q is not captured by %s (captured: %s)", ErrCDCColumn, what, name, ci.Name, strings.Join(have, ", ")))
		}
		return i
	}
	for _, n := range t.Text {
		p.text = append(p.text, idx("text", n))
	}
	for _, n := range t.Attrs {
		p.attrs = append(p.attrs, idx("attribute", n))
	}
	used := map[int]bool{}
	for _, k := range ci.KeyColumns {
		if i := ci.ColumnIndex(k); i >= 0 {
			p.keys = append(p.keys, i)
			used[i] = true
		}
	}
	for _, i := range p.attrs {
		used[i] = true
	}
	if len(t.Text) == 0 {
		for i := range ci.Columns {
			if !used[i] {
				p.rest = append(p.rest, i)
			}
		}
	}
	return p, errors.Join(errs...)
}

// record builds the record of a change or snapshot row.
func (p *cdcPlan) record(t CDCTableConfig, ts time.Time, op sqlserver.Operation, pos sqlserver.Position, vals []sqlserver.Value) streams.Record {
	r := streams.Record{}
	if !ts.IsZero() {
		r.TS = ts.UnixNano()
	}
	switch {
	case len(p.text) == 1:
		r.Text = vals[p.text[0]].Str
	case len(p.text) > 1:
		var b strings.Builder
		for j, i := range p.text {
			if j > 0 {
				b.WriteString(t.TextSeparator)
			}
			b.WriteString(vals[i].Str)
		}
		r.Text = b.String()
	default:
		var b strings.Builder
		for _, i := range p.rest {
			if vals[i].Null {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p.ci.Columns[i].Name)
			b.WriteByte('=')
			b.WriteString(vals[i].Str)
		}
		r.Text = b.String()
	}
	attrs := make([]streams.Attr, 0, 4+len(p.keys)+len(p.attrs))
	attrs = append(attrs, streams.Attr{Key: "_op", Value: op.String()}, streams.Attr{Key: "_lsn", Value: pos.LSN.String()})
	if op != sqlserver.OpSnapshot {
		attrs = append(attrs, streams.Attr{Key: "_seqval", Value: pos.SeqVal.String()}, streams.Attr{Key: "_cmd", Value: strconv.FormatInt(pos.CommandID, 10)})
	}
	for _, i := range p.keys {
		if !vals[i].Null {
			attrs = append(attrs, streams.Attr{Key: p.ci.Columns[i].Name, Value: vals[i].Str})
		}
	}
	for _, i := range p.attrs {
		if !vals[i].Null {
			attrs = append(attrs, streams.Attr{Key: p.ci.Columns[i].Name, Value: vals[i].Str})
		}
	}
	r.Attrs = attrs
	return r
}

// positionOfRecord recovers a change position from a record's attributes
// (ok false for snapshot records or foreign records).
func positionOfRecord(r *streams.Record) (sqlserver.Position, bool) {
	var p sqlserver.Position
	var haveLSN, haveSeq, haveCmd, haveOp bool
	for _, a := range r.Attrs {
		var err error
		switch a.Key {
		case "_lsn":
			p.LSN, err = sqlserver.ParseLSN(a.Value)
			haveLSN = err == nil
		case "_seqval":
			p.SeqVal, err = sqlserver.ParseLSN(a.Value)
			haveSeq = err == nil
		case "_cmd":
			p.CommandID, err = strconv.ParseInt(a.Value, 10, 64)
			haveCmd = err == nil
		case "_op":
			for o := sqlserver.OpDelete; o <= sqlserver.OpUpdateAfter; o++ {
				if o.String() == a.Value {
					p.Op, haveOp = o, true
				}
			}
		}
	}
	return p, haveLSN && haveSeq && haveCmd && haveOp
}

// CDCStream streams one capture instance into the WAL. Create it with
// NewCDCStream (or StartMany), run it with Run.
type CDCStream struct {
	cfg  CDCConfig
	tcfg CDCTableConfig
	name string // configured capture instance
	deps CDCDeps
	log  *slog.Logger
	m    *cdcMetrics
	pub  *Publisher

	positions jetstream.KeyValue
	progress  jetstream.KeyValue

	started   chan struct{}
	startOnce sync.Once

	// main goroutine only
	plan     cdcPlan
	read     cdcState // read position (ahead of acked)
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
	acked     cdcState
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

// NewCDCStream checks cfg (after Defaults) and returns the stream of
// capture instance ci (its settings from cfg.TableConfig(ci)).
func NewCDCStream(cfg CDCConfig, ci string, deps CDCDeps) (*CDCStream, error) {
	cfg = cfg.Defaults()
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
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
	s := &CDCStream{
		cfg: cfg, tcfg: tc, name: ci, deps: deps, log: log,
		m:       newCDCMetrics(deps.Registerer),
		started: make(chan struct{}),
		notify:  make(chan struct{}, 1),
		ready:   errors.New("starting"),
	}
	s.pub = NewPublisher(deps.JS, cfg.Publisher, log, NewPublisherMetrics(deps.Registerer))
	return s, nil
}

// CaptureInstance is the configured capture instance name.
func (s *CDCStream) CaptureInstance() string { return s.name }

// Started is closed once the stream has started reading (its position is
// loaded and the first read is under way).
func (s *CDCStream) Started() <-chan struct{} { return s.started }

// Ready is nil while the stream reads and publishes normally; otherwise it
// says what the stream waits for or why it failed.
func (s *CDCStream) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

func (s *CDCStream) setReady(err error) {
	s.mu.Lock()
	s.ready = err
	s.mu.Unlock()
}

// Stats returns the acked counters.
func (s *CDCStream) Stats() CDCStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return CDCStats{
		CaptureInstance: s.acked.CaptureInstance, Position: s.acked.Pos, Rows: s.acked.Rows,
		Frames: s.acked.Frames, FinalizedUntil: s.finalized, Snapshotting: s.acked.Snapshot != nil,
	}
}

func (s *CDCStream) source(ci string) string  { return CDCPositionKey(s.cfg.Database, ci) }
func (s *CDCStream) progressSource() string   { return CDCPositionKey(s.cfg.Database, s.name) }
func (s *CDCStream) subject(ci string) string { return streams.CDCSubject(s.cfg.Database, ci) }

// cdcFatal marks errors that stop a stream instead of being retried.
type cdcFatal struct{ err error }

func (f cdcFatal) Error() string { return f.err.Error() }
func (f cdcFatal) Unwrap() error { return f.err }

func fatal(err error) error {
	if err == nil {
		return nil
	}
	return cdcFatal{err}
}

func isFatal(err error) bool {
	var f cdcFatal
	return errors.As(err, &f) || errors.Is(err, ErrPurgedRange) || errors.Is(err, ErrCDCColumn) ||
		errors.Is(err, sqlserver.ErrNoCaptureInstance) || errors.Is(err, sqlserver.ErrNoKey) ||
		errors.Is(err, sqlserver.ErrSnapshotIsolation)
}

// Run streams until ctx ends (then it drains: waits up to DrainTimeout for
// in-flight acks, saves the position and returns nil) or a fatal error
// (a purged range, a missing capture instance or column), which it
// returns after draining.
func (s *CDCStream) Run(ctx context.Context) (err error) {
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
	if f, ok := err.(cdcFatal); ok {
		return f.err
	}
	return err
}

// drainQuiet drains after ctx ended; Run then returns nil.
func (s *CDCStream) drainQuiet() error {
	if err := s.drain(); err != nil {
		s.log.Warn("cdc drain", "err", err)
	}
	return nil
}

// start loads the position (following successors), finds the capture
// instance, compiles the column plan and recovers frames written after
// the saved position.
func (s *CDCStream) start(ctx context.Context) error {
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
	if s.plan, err = newCDCPlan(*ci, s.tcfg); err != nil {
		return err
	}
	if !found {
		st = cdcState{V: 1, CaptureInstance: ci.Name}
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
	case !found && s.tcfg.Bootstrap != CDCBootstrapNever:
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

func (s *CDCStream) loadState(ctx context.Context, ci string) (cdcState, bool, error) {
	e, err := s.positions.Get(ctx, s.source(ci))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return cdcState{}, false, nil
	}
	if err != nil {
		return cdcState{}, false, fmt.Errorf("cdc %s: load position %s: %w", s.name, s.source(ci), err)
	}
	var st cdcState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return cdcState{}, false, fatal(fmt.Errorf("cdc %s: position %s does not decode: %w", s.name, s.source(ci), err))
	}
	return st, true, nil
}

// recoverFromWAL advances st past frames of its subject that are in the
// WAL after st.WALSeq and continue st's record count (published and
// stored, but the crash came before the position was saved). Snapshot
// frames: at snapshot isolation the snapshot starts again anyway, so st
// counts them and goes on (a later change frame means the snapshot was
// done); at read committed it stops there, to resume after the saved key
// (the message ids drop the frames published again).
func (s *CDCStream) recoverFromWAL(ctx context.Context, st *cdcState) error {
	wal, err := s.deps.JS.Stream(ctx, streams.WALStream)
	if err != nil {
		return fmt.Errorf("cdc %s: stream %s: %w", s.name, streams.WALStream, err)
	}
	subj := s.subject(st.CaptureInstance)
	seq := st.WALSeq + 1
	for i := 0; i < 4*s.cfg.Publisher.MaxInFlight+16; i++ {
		msg, err := wal.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cdc %s: read back %s after %d: %w", s.name, subj, seq-1, err)
		}
		seq = msg.Sequence + 1
		f, err := streams.DecodeFrame(msg.Data)
		if err != nil || f.Source != s.source(st.CaptureInstance) {
			continue
		}
		if f.FirstOffset != st.Rows || len(f.Records) == 0 {
			continue // not the continuation (an older copy, or after a gap)
		}
		last := &f.Records[len(f.Records)-1]
		pos, ok := positionOfRecord(last)
		if !ok {
			if st.Snapshot == nil || s.isolation() != sqlserver.IsolationSnapshot {
				return nil // resumed by key from the saved state
			}
			s.log.Info("cdc recovered snapshot frame written before the position save", "wal_seq", msg.Sequence, "records", len(f.Records))
			st.Rows = f.NextOffset
			st.Frames++
			st.WALSeq = msg.Sequence
			continue
		}
		s.log.Info("cdc recovered frame written before the position save", "wal_seq", msg.Sequence, "records", len(f.Records), "position", pos.String())
		st.Snapshot = nil // a change frame comes after a finished snapshot
		st.Pos = pos
		st.Rows = f.NextOffset
		st.Frames++
		st.WALSeq = msg.Sequence
		if r := last.TS; r != 0 {
			st.LastCommit = time.Unix(0, r)
		}
	}
	return nil
}

func (s *CDCStream) isolation() sqlserver.SnapshotIsolation {
	return sqlserver.SnapshotIsolation(s.cfg.SnapshotIsolation)
}

// beginSnapshot marks a snapshot as due; snapshot opens it (and takes its
// LSN) at the next cycle.
func (s *CDCStream) beginSnapshot(context.Context) error {
	if len(s.plan.ci.KeyColumns) == 0 {
		return fatal(fmt.Errorf("cdc %s: bootstrap %s: %w (set bootstrap: never)", s.name, s.tcfg.Bootstrap, sqlserver.ErrNoKey))
	}
	s.closeSnap()
	s.read.Snapshot = &cdcSnapshot{}
	s.read.Pos = sqlserver.Position{}
	return nil
}

func (s *CDCStream) closeSnap() {
	if s.snap == nil {
		return
	}
	if err := s.snap.Close(); err != nil {
		s.log.Warn("cdc snapshot close", "err", err)
	}
	s.snap = nil
}

// openSnapshot opens the snapshot handle for s.read.Snapshot. At snapshot
// isolation a snapshot begun before (by an earlier process or before a
// SQL error) cannot be continued: it starts again at the new LSN, after
// the records already published. At read committed a saved snapshot
// resumes after its last key at its LSN.
func (s *CDCStream) openSnapshot(ctx context.Context) error {
	iso := s.isolation()
	h, err := s.deps.Source.BeginSnapshot(ctx, s.plan.ci, iso)
	if err != nil {
		if errors.Is(err, sqlserver.ErrSnapshotIsolation) {
			return fatal(fmt.Errorf("cdc %s: %w", s.name, err))
		}
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	sn := s.read.Snapshot
	if iso == sqlserver.IsolationReadCommitted && !sn.LSN.IsZero() {
		at, err := s.deps.Source.CommitTime(ctx, sn.LSN)
		if err != nil {
			h.Close()
			return fmt.Errorf("cdc %s: %w", s.name, err)
		}
		s.snap, s.snapAt = h, at
		s.log.Info("cdc snapshot resuming", "lsn", sn.LSN, "rows", sn.Rows, "isolation", iso)
		return nil
	}
	if !sn.LSN.IsZero() {
		s.log.Warn("cdc snapshot starting again at a new lsn (a snapshot transaction cannot be resumed)",
			"old_lsn", sn.LSN, "rows_published", sn.Rows, "lsn", h.LSN())
	} else {
		s.log.Info("cdc snapshot starting", "lsn", h.LSN(), "isolation", iso)
	}
	s.snap, s.snapAt = h, h.CommitTime()
	s.read.Snapshot = &cdcSnapshot{LSN: h.LSN()}
	return nil
}

// cycle does one read: the snapshot if one is due, then the changes up to
// the max LSN, then the heartbeat.
func (s *CDCStream) cycle(ctx context.Context) error {
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
func (s *CDCStream) checkPurged(ctx context.Context) error {
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
	if s.tcfg.Bootstrap != CDCBootstrapWhenNeeded {
		return fatal(perr)
	}
	s.log.Warn("cdc purged range: snapshotting again", "err", perr)
	s.frame, s.fbytes = s.frame[:0], 0
	// Continue from what is acked: frames in flight stay valid.
	return s.beginSnapshot(ctx)
}

// add appends rec to the open frame, cutting the frame first when it is
// full. posText is the record's position text for the frame id.
func (s *CDCStream) add(ctx context.Context, rec streams.Record, posText string) error {
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

func (s *CDCStream) deadLetter(ctx context.Context, rec streams.Record, posText string, size int) error {
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
func (s *CDCStream) flushFrame(ctx context.Context) error {
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

// startFloor warns when the WAL was purged past the floor a crashed run
// left (its frames beyond the saved state may be gone: recoverFromWAL
// cannot find them and their changes may be written twice), then puts the
// floor at the saved state, so that frames recovered or published from
// now on are covered until a later state is saved.
func (s *CDCStream) startFloor(ctx context.Context, savedSeq uint64) error {
	s.floor = walfloor.New(s.positions, s.progressSource())
	if wal, err := s.deps.JS.Stream(ctx, streams.WALStream); err == nil {
		first := wal.CachedInfo().State.FirstSeq
		if lost, ok := s.floor.Check(ctx, first); ok {
			s.m.unverified.WithLabelValues(s.name).Inc()
			s.log.Warn("wal purged past this stream's floor: changes after the saved position may be written twice",
				"floor", lost.Floor, "wal_first_seq", first, "floor_saved_at", lost.SavedAt)
		}
	}
	s.floorBase.Store(savedSeq)
	if err := s.floor.Start(ctx, savedSeq+1); err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	return nil
}

// holdFloor puts the floor back, if an idle save released it, before a
// frame is published: every frame lands above the saved state.
func (s *CDCStream) holdFloor(ctx context.Context) error {
	if err := s.floor.Hold(ctx, s.floorBase.Load()+1); err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	return nil
}

// syncFloor runs after a save. Idle (no frame in flight, no acked frame
// beyond the saved state, no failed publish): the floor is released, as
// a restart reads nothing back and a quiet table must not hold the WAL
// purge. Otherwise it is refreshed at the saved state.
func (s *CDCStream) syncFloor(ctx context.Context, saved *cdcState) error {
	if saved != nil {
		for {
			b := s.floorBase.Load()
			if saved.WALSeq <= b || s.floorBase.CompareAndSwap(b, saved.WALSeq) {
				break
			}
		}
	}
	base := s.floorBase.Load()
	err := s.floor.Sync(ctx, base+1, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		// A state change without frames (a heartbeat moving the position
		// of a quiet table) puts nothing in the WAL beyond the saved WAL
		// sequence, so it does not hold the floor.
		return s.pubErr == nil && s.acked.WALSeq <= base
	})
	if err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	return nil
}

func (s *CDCStream) onAck(end cdcState, n, seq uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pubErr != nil {
		return // an earlier frame failed: nothing after it counts until the rewind
	}
	if err != nil {
		s.pubErr = err
		return
	}
	if end.CaptureInstance != s.acked.CaptureInstance {
		return
	}
	end.WALSeq = seq
	s.acked = end
	if !end.LastCommit.IsZero() && end.Snapshot == nil {
		s.finalized = end.LastCommit.Add(-time.Nanosecond)
	}
	s.dirty = true
	s.m.records.WithLabelValues(s.name).Add(float64(n))
	s.m.frames.WithLabelValues(s.name).Inc()
	if end.Snapshot != nil {
		s.m.snapshots.WithLabelValues(s.name).Add(float64(n))
	}
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *CDCStream) kick() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *CDCStream) takePubErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pubErr != nil {
		return fmt.Errorf("cdc %s: %w", s.name, s.pubErr)
	}
	return nil
}

// rewind waits for frames in flight and resets the read state to the
// acked state, so a retry republishes from there.
func (s *CDCStream) rewind(ctx context.Context) error {
	fctx, cancel := backoff.WithTimeout(ctx, s.cfg.DrainTimeout)
	defer cancel()
	err := s.pub.Flush(fctx)
	s.mu.Lock()
	s.pubErr = nil
	st := s.acked.clone()
	s.mu.Unlock()
	s.read = st
	s.frame, s.fbytes = s.frame[:0], 0
	if err != nil {
		return err
	}
	if rerr := s.recoverFromWAL(fctx, &st); rerr == nil && st.Rows != s.read.Rows {
		// The snapshot key of the acked state is behind the recovered
		// frames: the snapshot (if any) starts again.
		s.closeSnap()
		s.read = st.clone()
		s.mu.Lock()
		s.acked = st.clone()
		s.dirty = true
		s.mu.Unlock()
	}
	return nil
}

// snapshot reads the table in key-ordered chunks until done, through the
// snapshot handle (opened here if needed, closed when done or on a SQL
// error).
func (s *CDCStream) snapshot(ctx context.Context) error {
	s.setReady(errors.New("snapshotting"))
	s.startOnce.Do(func() { close(s.started) })
	if s.snap != nil && s.isolation() == sqlserver.IsolationSnapshot {
		switch sn := s.read.Snapshot; {
		case sn.LSN.IsZero() && sn.After == nil:
			// Rewound to before the first acked frame: same handle, from
			// the start.
			sn.LSN = s.snap.LSN()
		case sn.LSN != s.snap.LSN():
			s.closeSnap()
		}
	}
	if s.snap == nil {
		if err := s.openSnapshot(ctx); err != nil {
			return err
		}
	}
	sn := s.read.Snapshot
	after, err := sqlserver.DecodeKey(sn.After)
	if err != nil {
		return fatal(fmt.Errorf("cdc %s: saved snapshot key: %w", s.name, err))
	}
	if sn.After == nil {
		after = nil
	}
	at := s.snapAt
	pos := sqlserver.Position{LSN: sn.LSN, Op: sqlserver.OpSnapshot}
	for {
		if err := s.takePubErr(); err != nil {
			return err
		}
		rows, err := s.snap.Chunk(ctx, after, s.cfg.SnapshotChunk)
		if err != nil {
			s.closeSnap()
			return fmt.Errorf("cdc %s: %w", s.name, err)
		}
		for i := range rows {
			r := &rows[i]
			kp, err := sqlserver.EncodeKey(r.Key)
			if err != nil {
				return fatal(fmt.Errorf("cdc %s: snapshot key: %w", s.name, err))
			}
			rec := s.plan.record(s.tcfg, at, sqlserver.OpSnapshot, pos, r.Values)
			kt := snapKeyText(kp)
			// The frame cut happens inside add, before this row: the state
			// it installs is the one of the previous row.
			if err := s.add(ctx, rec, kt); err != nil {
				return err
			}
			s.read.Snapshot.After = kp
			s.read.Snapshot.Rows++
			after = r.Key
		}
		if len(rows) < s.cfg.SnapshotChunk {
			break
		}
	}
	s.closeSnap()
	if err := s.flushFrame(ctx); err != nil {
		return err
	}
	// Done: stream from the snapshot LSN. The state goes with the next ack
	// or the next heartbeat.
	s.log.Info("cdc snapshot done", "lsn", sn.LSN, "rows", s.read.Snapshot.Rows)
	s.read.Snapshot = nil
	s.read.Pos = sqlserver.Through(sn.LSN)
	if !at.IsZero() {
		s.read.LastCommit = at
	}
	return nil
}

func snapKeyText(kp []sqlserver.KeyPart) string {
	b, _ := json.Marshal(kp)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// checkSuccessor looks for a newer capture instance of the same table,
// at most every SchemaCheckInterval.
func (s *CDCStream) checkSuccessor(ctx context.Context) error {
	if s.succ != nil || time.Since(s.lastScan) < s.cfg.SchemaCheckInterval {
		return nil
	}
	cis, err := s.deps.Source.CaptureInstances(ctx)
	if err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	s.lastScan = time.Now()
	cur := s.plan.ci
	present := false
	for i := range cis {
		c := cis[i]
		if strings.EqualFold(c.Name, cur.Name) {
			present = true
			continue
		}
		if c.SameTable(cur) && (c.CreateDate.After(cur.CreateDate) || (c.CreateDate.Equal(cur.CreateDate) && c.StartLSN.Compare(cur.StartLSN) > 0)) {
			if s.succ == nil || c.CreateDate.Before(s.succ.CreateDate) {
				s.succ = &c
			}
		}
	}
	if s.succ != nil {
		s.log.Info("cdc newer capture instance found", "successor", s.succ.Name, "takeover_lsn", s.succ.StartLSN)
		if !present && s.read.Pos.Compare(sqlserver.Through(s.succ.StartLSN.Prev())) < 0 {
			return fatal(fmt.Errorf("%w: capture instance %s was dropped at saved LSN %s, before its successor %s starts at %s",
				ErrPurgedRange, cur.Name, s.read.Pos.LSN, s.succ.Name, s.succ.StartLSN))
		}
		return nil
	}
	if !present {
		return fatal(fmt.Errorf("cdc %s: %w: %s was dropped", s.name, sqlserver.ErrNoCaptureInstance, cur.Name))
	}
	return nil
}

// takeover switches to the successor capture instance at the current
// position (everything before it is acked).
func (s *CDCStream) takeover(ctx context.Context) error {
	next := *s.succ
	plan, err := newCDCPlan(next, s.tcfg)
	if err != nil {
		return fatal(err)
	}
	st, found, err := s.loadState(ctx, next.Name)
	if err != nil {
		return err
	}
	if !found {
		st = cdcState{V: 1, CaptureInstance: next.Name, Pos: s.read.Pos, LastCommit: s.read.LastCommit}
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	st.UpdatedAt = time.Now().UTC()
	if err := s.put(ctx, st); err != nil {
		return err
	}
	s.mu.Lock()
	old := s.acked.clone()
	s.mu.Unlock()
	old.Successor = next.Name
	old.UpdatedAt = time.Now().UTC()
	if err := s.put(ctx, old); err != nil {
		return err
	}
	s.log.Info("cdc takeover by newer capture instance", "from", old.CaptureInstance, "to", next.Name, "position", st.Pos.String())
	s.plan = plan
	s.succ = nil
	s.lastScan = time.Time{}
	s.read = st.clone()
	s.mu.Lock()
	s.acked = st.clone()
	s.dirty = false
	s.mu.Unlock()
	return nil
}

func (s *CDCStream) put(ctx context.Context, st cdcState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("cdc %s: encode position: %w", s.name, err)
	}
	pctx, cancel := backoff.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.positions.Put(pctx, s.source(st.CaptureInstance), b); err != nil {
		return fmt.Errorf("cdc %s: save position: %w", s.name, err)
	}
	return nil
}

// save writes the acked state if it changed, and the progress fact when
// due (force: now).
func (s *CDCStream) save(ctx context.Context, force bool) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	dirty := s.dirty
	st := s.acked.clone()
	fin := s.finalized
	s.dirty = false
	s.mu.Unlock()
	var saved *cdcState
	if dirty {
		st.UpdatedAt = time.Now().UTC()
		if err := s.put(ctx, st); err != nil {
			s.mu.Lock()
			s.dirty = true
			s.mu.Unlock()
			return err
		}
		saved = &st
	}
	if err := s.syncFloor(ctx, saved); err != nil {
		return err
	}
	if force || (dirty && st.Rows != s.progAcked && time.Since(s.lastProg) >= time.Second) || time.Since(s.lastProg) >= s.cfg.HeartbeatInterval {
		return s.publishProgress(ctx, st, fin)
	}
	return nil
}

func (s *CDCStream) publishProgress(ctx context.Context, st cdcState, fin time.Time) error {
	now := time.Now().UTC()
	p := streams.Progress{
		Source: s.progressSource(), Kind: "mssql", CaptureInstance: st.CaptureInstance,
		LastLSN: st.Pos.LSN.String(), Rows: st.Rows, Frames: st.Frames, FinalizedUntil: fin.UTC(), UpdatedAt: now,
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	pctx, cancel := backoff.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.progress.Put(pctx, p.Source, b); err != nil {
		return fmt.Errorf("cdc %s: progress: %w", s.name, err)
	}
	msg := nats.NewMsg(streams.ProgressSubject(p.Source))
	msg.Header.Set(streams.HeaderFormat, streams.FormatProgress)
	msg.Data = b
	if _, err := s.deps.JS.PublishMsg(pctx, msg); err != nil {
		return fmt.Errorf("cdc %s: progress: %w", s.name, err)
	}
	s.lastProg = time.Now()
	s.progAcked = st.Rows
	if !fin.IsZero() {
		s.m.lag.WithLabelValues(s.name).Set(time.Since(fin).Seconds())
	}
	return nil
}

func (s *CDCStream) saver(stop <-chan struct{}) {
	tick := time.NewTicker(min(time.Second, s.cfg.HeartbeatInterval))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.notify:
		case <-tick.C:
		}
		if err := s.save(context.Background(), false); err != nil {
			s.log.Warn("cdc save", "err", err)
		}
	}
}

// drain waits for frames in flight, then saves the position and progress.
func (s *CDCStream) drain() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	ferr := s.pub.Flush(ctx)
	s.mu.Lock()
	if ferr == nil && s.pubErr == nil && len(s.frame) == 0 && s.read.CaptureInstance == s.acked.CaptureInstance {
		// Everything read is acked (no open frame): save the read state, so
		// a finished snapshot or a heartbeat is not redone.
		ws := s.acked.WALSeq
		s.acked = s.read.clone()
		s.acked.WALSeq = ws
		s.dirty = true
	}
	s.mu.Unlock()
	serr := s.save(ctx, true)
	if ferr != nil {
		return fmt.Errorf("cdc %s: drain: %w", s.name, ferr)
	}
	return serr
}
