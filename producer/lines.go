package producer

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
	"github.com/quarrylake/quarry/producer/internal/walfloor"
	"github.com/quarrylake/quarry/streams"
)

// line is one line read from a source.
type line struct {
	off, next uint64 // source offsets of the line and just after it
	text      string // without the '\n'; the first 64 KiB when long > 0
	long      int    // > 0: the line's real length, above MaxRecordBytes
	read      int64  // read time, Unix nanos
	// arrived is when the read that completed the line returned (Unix
	// nanos; 0: not known, read stands for it). Lines of one read share
	// it; it is the record time of a line without an event time.
	arrived int64
	// ts is the record time (Unix nanos) and tsSrc what it is; the
	// reader's stamper sets them.
	ts    int64
	tsSrc streams.TSSource
	// req is set on the last line of a request (an ingest message with a
	// reply subject): answered once every line of it is durable.
	req *request
	// attrs become the record's Attrs (push sources).
	attrs []streams.Attr
	// bad, when set, dead-letters the line with this reason (a push
	// source's malformed input).
	bad string
	// stamped: ts and tsSrc are set by the source; the stamper skips it.
	stamped bool
}

// lineSource is where a Lines stage reads from.
type lineSource interface {
	kind() string
	// resumable sources load and save positions and scan the WAL for their
	// frames on start.
	resumable() bool
	// start positions the source at pos (the saved position, 0 if none);
	// it returns the offset it actually starts at. recovered is the highest
	// NextOffset of this source's frames found in the WAL.
	start(ctx context.Context, l *Lines, pos, recovered uint64) (uint64, error)
	// run reads until EOF (returning the offset after the last line), an
	// error, or ctx's end.
	run(ctx context.Context, e *emitter) (uint64, error)
	close() error
}

// emitter hands lines from the reader goroutine to the framer in batches.
type emitter struct {
	ch    chan []line
	free  chan []line // batches to reuse (nil: always allocate)
	buf   []line
	stamp *stamper
	pace  *pacer // nil: as fast as the source reads
}

const emitBatch = 256

func (e *emitter) add(ctx context.Context, ln line) error {
	if !ln.stamped {
		e.stamp.stamp(&ln)
	}
	e.buf = append(e.buf, ln)
	if e.pace != nil {
		if d := e.pace.delay(time.Now()); d > 0 {
			// Hand over what was read before holding the reader back, so a
			// paced line is framed when it is read, not a batch later.
			if err := e.flush(ctx); err != nil {
				return err
			}
			if !backoff.Sleep(ctx, d) {
				return ctx.Err()
			}
		}
	}
	if len(e.buf) >= emitBatch {
		return e.flush(ctx)
	}
	return nil
}

// pacer spaces lines at a rate: line n (from 1) is due n/rate seconds after
// the first. Lines read late are not made up by bursts beyond the schedule
// already missed, and delays under minPause are folded into later ones.
type pacer struct {
	rate  float64 // lines per second, > 0
	start time.Time
	n     float64
}

const minPause = 2 * time.Millisecond

// delay counts one more line read at now and returns how long the reader
// should wait before the next one (0: go on).
func (p *pacer) delay(now time.Time) time.Duration {
	if p.start.IsZero() {
		p.start = now
	}
	p.n++
	due := p.start.Add(time.Duration(p.n / p.rate * float64(time.Second)))
	if d := due.Sub(now); d >= minPause {
		return d
	}
	return 0
}

// flush sends the buffered lines; sources call it before they may block.
func (e *emitter) flush(ctx context.Context) error {
	if len(e.buf) == 0 {
		return nil
	}
	select {
	case e.ch <- e.buf:
		select {
		case b := <-e.free:
			e.buf = b
		default:
			e.buf = make([]line, 0, emitBatch)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats are a line source's counters.
type Stats struct {
	Source string
	// Lines, Frames and Bytes (line text) are written to the WAL: acked.
	Lines, Frames, Bytes uint64
	DeadLetters          uint64
	// Recovered counts lines skipped on start because the WAL already held
	// them (a restart after a crash between publish and position save).
	Recovered uint64
	// Position is the offset after the last contiguous acked frame.
	Position uint64
	// LastSeq is the highest WAL sequence acked.
	LastSeq uint64
}

// Add folds o's counters into s, for a sum over several sources: the
// counts add up and LastSeq is the highest. Source and Position stay s's
// (a position is an offset in one source's input, not a count).
func (s *Stats) Add(o Stats) {
	s.Lines += o.Lines
	s.Frames += o.Frames
	s.Bytes += o.Bytes
	s.DeadLetters += o.DeadLetters
	s.Recovered += o.Recovered
	s.LastSeq = max(s.LastSeq, o.LastSeq)
}

// ErrStopped is what Ready reports after Run returned.
var ErrStopped = errors.New("line source stopped")

// Lines reads lines from one source, frames them and publishes the frames
// to the WAL. See the package doc for the delivery contract.
type Lines struct {
	cfg     Config
	js      jetstream.JetStream
	log     *slog.Logger
	m       *linesMetrics
	src     lineSource
	stamp   *stamper
	source  string
	subject string
	pub     *Publisher

	positions jetstream.KeyValue
	progress  jetstream.KeyValue

	acked    atomic.Uint64 // position
	savedPos atomic.Uint64 // position last saved
	// recFloor is the lowest WAL sequence of the frames found beyond the
	// loaded position on start (0: none), needed until a saved position
	// reaches recEnd.
	recFloor, recEnd uint64

	// wf is the WAL floor (nil for a source that does not resume);
	// walStart is the WAL's last sequence before this run published.
	wf       *walfloor.Floor
	walStart uint64
	// finalized is the read time of the last acked line. Not its event
	// time: lines may carry times out of order (several writers, clock
	// skew, a backfill), so an event time says nothing about which lines
	// are still to come, while every line read later is read later.
	finalized atomic.Int64
	nLines    atomic.Uint64
	nFrames   atomic.Uint64
	nBytes    atomic.Uint64
	nDead     atomic.Uint64
	nSkipped  atomic.Uint64
	kick      chan struct{}

	failOnce sync.Once
	failCh   chan struct{}
	failErr  error

	readyMu  sync.Mutex
	readyErr error
	running  atomic.Bool

	// framer state, owned by Run
	pf      pendingFrame
	cov     []span
	timer   *time.Timer      // the linger timer of the pending frame
	lingerC <-chan time.Time // timer.C while it runs for a pending frame
	holdC   <-chan struct{}  // pub.Resolved() while a frame ending a request waits

	// test hooks
	hookNoSave bool
	hookHold   func() // called by the loop when it starts holding a frame
}

type pendingFrame struct {
	first, next uint64
	recs        []streams.Record
	lastRead    int64 // read time of the last line
	est         int
	textBytes   int
	reqs        []*request // answered when this frame is acked
}

func newLines(cfg Config, deps Deps, src lineSource, source string) (*Lines, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := streams.CheckToken(source); err != nil {
		return nil, fmt.Errorf("producer source id: %w", err)
	}
	if deps.JS == nil {
		return nil, errors.New("producer: Deps.JS is required")
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stamp, err := newStamper(cfg.EventTime)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	log = log.With("source", source, "tenant", cfg.Tenant)
	m := newLinesMetrics(deps.Registerer)
	l := &Lines{
		cfg: cfg, js: deps.JS, log: log, m: m, src: src, stamp: stamp, source: source,
		subject: streams.LineSubject(cfg.Tenant),
		pub:     NewPublisher(deps.JS, cfg.Publisher, log, m.pub),
		kick:    make(chan struct{}, 1),
		failCh:  make(chan struct{}),
	}
	l.readyErr = errors.New("line source not started")
	return l, nil
}

// Source is the source id (the position key is PositionKey(Source())).
func (l *Lines) Source() string { return l.source }

// Publisher is the frame publisher of this source.
func (l *Lines) Publisher() *Publisher { return l.pub }

// AckLatencies is the publish→ack latency of every frame acked so far:
// AckLatencies().Quantile(0.99) is the p99.
func (l *Lines) AckLatencies() *LatencyHistogram { return l.pub.AckLatency() }

// Stats returns the counters so far.
func (l *Lines) Stats() Stats {
	return Stats{
		Source: l.source, Lines: l.nLines.Load(), Frames: l.nFrames.Load(), Bytes: l.nBytes.Load(),
		DeadLetters: l.nDead.Load(), Recovered: l.nSkipped.Load(), Position: l.acked.Load(), LastSeq: l.pub.LastSeq(),
	}
}

// Ready is nil while Run reads and publishes, else says why not.
func (l *Lines) Ready() error {
	l.readyMu.Lock()
	defer l.readyMu.Unlock()
	return l.readyErr
}

func (l *Lines) setReady(err error) {
	l.readyMu.Lock()
	l.readyErr = err
	l.readyMu.Unlock()
}

func (l *Lines) fail(err error) {
	l.failOnce.Do(func() {
		l.failErr = err
		close(l.failCh)
	})
}

// failure is the error that failed the source, nil while it has not.
func (l *Lines) failure() error {
	if l.failed() {
		return l.failErr
	}
	return nil
}

func (l *Lines) failed() bool {
	select {
	case <-l.failCh:
		return true
	default:
		return false
	}
}

// Run reads, frames and publishes until EOF (not following: it then
// flushes, saves the final position and returns nil), ctx's end (it stops
// reading, publishes what it read, waits up to DrainTimeout for the acks,
// saves the position and returns nil), or an error. Its steps are start
// (lines_start.go), loop (lines_loop.go) and drain (lines_drain.go).
func (l *Lines) Run(ctx context.Context) (err error) {
	if !l.running.CompareAndSwap(false, true) {
		return errors.New("producer: Run called twice")
	}
	defer func() {
		if err != nil {
			l.setReady(fmt.Errorf("%w: %v", ErrStopped, err))
		} else {
			l.setReady(ErrStopped)
		}
	}()
	l.setReady(errors.New("line source starting: loading position"))
	defer l.src.close()

	if err := l.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // cancelled while starting: nothing published, nothing to drain
		}
		return err
	}
	rd := l.startReader(ctx)
	defer rd.cancel()
	stopSaver := l.startSaver()
	l.setReady(nil)
	runErr := l.loop(ctx, rd)
	rd.cancel()
	return l.drain(ctx, rd, runErr, stopSaver)
}
