package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
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
	ts        int64  // read time, Unix nanos
	// req is set on the last line of a request (an ingest message with a
	// reply subject): answered once every line of it is durable.
	req *request
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
	ch   chan []line
	buf  []line
	pace *pacer // nil: as fast as the source reads
}

const emitBatch = 256

func (e *emitter) add(ctx context.Context, ln line) error {
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
		e.buf = make([]line, 0, emitBatch)
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
	wf        *walfloor.Floor
	walStart  uint64
	finalized atomic.Int64 // read time of the last acked line
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
	pf    pendingFrame
	cov   []span
	timer *time.Timer

	// test hooks
	hookNoSave bool
}

type pendingFrame struct {
	first, next uint64
	recs        []streams.Record
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
	log = log.With("source", source, "tenant", cfg.Tenant)
	m := newLinesMetrics(deps.Registerer)
	l := &Lines{
		cfg: cfg, js: deps.JS, log: log, m: m, src: src, source: source,
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
// saves the position and returns nil), or an error.
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

	pos, err := l.prepare(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // cancelled while starting: nothing read, nothing to drain
		}
		return err
	}
	l.acked.Store(pos)
	// Publish a floor before the first frame, so that no frame of this run
	// is ever unprotected from a WAL purge, whatever happens to the saves
	// that follow.
	if l.src.resumable() {
		err := l.retryStart(ctx, "saving the wal floor", func(fctx context.Context) error {
			return l.wf.Start(fctx, l.floor())
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil // cancelled while starting: nothing published
			}
			return err
		}
	}
	l.pf = pendingFrame{first: pos, next: pos, recs: make([]streams.Record, 0, min(l.cfg.FrameMaxRecords, 4096))}
	l.pf.est = l.frameOverhead()
	l.log.Info("line source started", "kind", l.src.kind(), "position", pos, "recovered_spans", len(l.cov))

	batches := make(chan []line, 4)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	type readResult struct {
		end uint64
		err error
	}
	readDone := make(chan readResult, 1)
	go func() {
		e := &emitter{ch: batches, buf: make([]line, 0, emitBatch)}
		if l.cfg.Rate > 0 {
			e.pace = &pacer{rate: l.cfg.Rate}
		}
		end, err := l.src.run(rctx, e)
		if err == nil {
			err = e.flush(rctx)
		}
		readDone <- readResult{end, err}
		close(batches)
	}()

	saverStop := make(chan struct{})
	saverDone := make(chan struct{})
	go func() { defer close(saverDone); l.saver(saverStop) }()

	l.setReady(nil)
	l.timer = time.NewTimer(time.Hour)
	l.timer.Stop()
	var lingerC <-chan time.Time
	var runErr error
	var grace <-chan time.Time
	done := ctx.Done()
	// Publishing and dead-lettering are bounded by the publisher's and
	// DeadLetter's own timeouts; a cancelled ctx must not lose what was read.
	octx := context.WithoutCancel(ctx)
loop:
	for {
		select {
		case b, ok := <-batches:
			if !ok {
				break loop
			}
			for i := range b {
				if err := l.add(octx, &b[i], &lingerC); err != nil {
					runErr = err
					break loop
				}
			}
		case <-lingerC:
			lingerC = nil
			if err := l.flush(octx, &lingerC); err != nil {
				runErr = err
				break loop
			}
		case <-l.failCh:
			break loop
		case <-done:
			// Keep taking what the reader already read until it returns;
			// a reader stuck in a blocking read (stdin) is abandoned after
			// a grace period.
			done = nil
			grace = time.After(2 * time.Second)
		case <-grace:
			l.log.Warn("reader did not stop; abandoning it")
			break loop
		}
	}
	rcancel()
	l.timer.Stop()

	// Drain: publish the pending frame, wait for the acks.
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.DrainTimeout)
	defer dcancel()
	if runErr == nil && !l.failed() {
		if err := l.flush(dctx, &lingerC); err != nil {
			runErr = err
		}
	}
	if err := l.pub.Flush(dctx); err != nil {
		l.log.Warn("drain incomplete", "err", err)
		l.pub.Close()
		if runErr == nil {
			runErr = err
		}
	}
	l.pub.Close()
	// Requests whose lines never left the framer are answered too: their
	// senders learn at once that they must send again.
	answerAll(l.js.Conn(), l.pf.reqs, fmt.Errorf("%w before the lines were written", ErrStopped))
	l.pf.reqs = nil
	var rr readResult
	select {
	case rr = <-readDone:
	default:
		rr.err = errors.New("reader still blocked")
	}
	if runErr == nil && l.failed() {
		runErr = l.failErr
	}
	if runErr == nil && rr.err != nil && ctx.Err() == nil {
		runErr = fmt.Errorf("read %s: %w", l.src.kind(), rr.err)
	}
	// At a clean EOF everything up to the end offset is written or
	// dead-lettered, including lines after the last frame.
	if runErr == nil && rr.err == nil && ctx.Err() == nil && rr.end > l.acked.Load() && len(l.pf.recs) == 0 {
		l.acked.Store(rr.end)
	}
	close(saverStop)
	<-saverDone
	if err := l.savePosition(dctx); err != nil && runErr == nil {
		runErr = err
	}
	l.publishProgress(dctx)
	st := l.Stats()
	l.log.Info("line source stopped", "position", st.Position, "lines", st.Lines, "frames", st.Frames,
		"dead_letters", st.DeadLetters, "recovered", st.Recovered, "err", runErr)
	return runErr
}

// prepare opens the buckets, loads the position, recovers frames already in
// the WAL and starts the source. It returns the start position.
func (l *Lines) prepare(ctx context.Context) (uint64, error) {
	var pos, recovered uint64
	err := l.retryStart(ctx, "loading the position", func(kctx context.Context) error {
		var err error
		pos, recovered, err = l.loadPosition(kctx)
		return err
	})
	if err != nil {
		return 0, err
	}
	l.setReady(errors.New("line source starting: opening " + l.src.kind()))
	start, err := l.src.start(ctx, l, pos, recovered)
	if err != nil {
		return 0, err
	}
	return start, nil
}

// permanentError marks a start error that retrying cannot mend.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// retryStart runs op until it succeeds, ctx ends, StartTimeout passes or
// op fails with a permanentError. A JetStream cluster that is electing
// leaders or has lost a node answers "temporarily unavailable" for a
// while; a source started then waits instead of failing, and says so in
// Ready.
func (l *Lines) retryStart(ctx context.Context, step string, op func(context.Context) error) error {
	deadline := time.Now().Add(l.cfg.StartTimeout)
	attempt := 0
	return backoff.Retry(ctx, backoff.Default, func(ctx context.Context) error {
		attempt++
		octx, cancel := backoff.WithTimeout(ctx, 30*time.Second)
		err := op(octx)
		cancel()
		var perm permanentError
		if err != nil && (errors.As(err, &perm) || time.Now().After(deadline)) {
			return backoff.Permanent(err)
		}
		return err
	}, func(err error, _ time.Duration) {
		l.setReady(fmt.Errorf("line source starting: %s: %w (attempt %d, retrying)", step, err, attempt))
		l.log.Warn("line source start retry", "step", step, "attempt", attempt, "err", err)
	})
}

// loadPosition opens the buckets, loads the saved position and scans the
// WAL for this source's frames beyond it.
func (l *Lines) loadPosition(kctx context.Context) (pos, recovered uint64, err error) {
	if l.positions, err = l.js.KeyValue(kctx, streams.PositionsBucket); err != nil {
		return 0, 0, fmt.Errorf("open bucket %s: %w", streams.PositionsBucket, err)
	}
	if l.progress, err = l.js.KeyValue(kctx, streams.ProgressBucket); err != nil {
		return 0, 0, fmt.Errorf("open bucket %s: %w", streams.ProgressBucket, err)
	}
	wal, err := l.js.Stream(kctx, streams.WALStream)
	if err != nil {
		return 0, 0, fmt.Errorf("wal stream: %w", err)
	}
	l.walStart = wal.CachedInfo().State.LastSeq
	if !l.src.resumable() {
		return 0, 0, nil
	}
	l.wf = walfloor.New(l.positions, l.source)
	since := time.Now().Add(-15 * time.Minute)
	e, err := l.positions.Get(kctx, PositionKey(l.source))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return 0, 0, fmt.Errorf("load position %s: %w", PositionKey(l.source), err)
	default:
		if pos, err = strconv.ParseUint(string(e.Value()), 10, 64); err != nil {
			return 0, 0, permanentError{fmt.Errorf("position %s: %q is not an offset", PositionKey(l.source), e.Value())}
		}
		// Frames beyond the position were published at most a few
		// ack timeouts before it was saved.
		since = e.Created().Add(-5*time.Minute - time.Duration(l.cfg.Publisher.MaxAttempts)*l.cfg.Publisher.AckTimeout)
	}
	l.setReady(errors.New("line source starting: scanning the WAL for frames beyond the position"))
	frames, err := scanWAL(kctx, l.js, l.subject, l.source, since)
	if err != nil {
		return 0, 0, err
	}
	spans := make([]span, len(frames))
	for i, f := range frames {
		spans[i] = f.span
	}
	l.cov, recovered = coveredAfter(spans, pos)
	l.recFloor, l.recEnd = firstSeqAfter(frames, pos), recovered
	l.savedPos.Store(pos)
	if len(l.cov) > 0 {
		l.log.Info("frames beyond the saved position are in the WAL; skipping them", "position", pos, "spans", len(l.cov), "up_to", recovered)
	}
	l.checkFloor(kctx, pos, wal.CachedInfo().State.FirstSeq)
	return pos, recovered, nil
}

func (l *Lines) frameOverhead() int { return 3 + 20 + len(l.source) + len(l.cfg.Tenant) + 30 }

// add frames one line and, on the last line of a request, arranges its
// answer: with the frame that holds the line, or, when the line went to
// no frame (dead-lettered, already in the WAL) and no frame is pending,
// once every frame published before it is acked.
func (l *Lines) add(ctx context.Context, ln *line, lingerC *<-chan time.Time) error {
	if err := l.addLine(ctx, ln, lingerC); err != nil {
		if ln.req != nil {
			ln.req.answer(l.js.Conn(), err)
		}
		return err
	}
	if ln.req == nil {
		return nil
	}
	if len(l.pf.recs) > 0 {
		l.pf.reqs = append(l.pf.reqs, ln.req)
		return nil
	}
	req := ln.req
	l.pub.AfterResolved(func() { req.answer(l.js.Conn(), l.failure()) })
	return nil
}

func (l *Lines) addLine(ctx context.Context, ln *line, lingerC *<-chan time.Time) error {
	for len(l.cov) > 0 && ln.off >= l.cov[0].next {
		l.cov = l.cov[1:]
	}
	if len(l.cov) > 0 && ln.off >= l.cov[0].first {
		// Already in the WAL: cut before it and continue after it.
		if err := l.flush(ctx, lingerC); err != nil {
			return err
		}
		l.pf.first, l.pf.next = l.cov[0].next, l.cov[0].next
		l.nSkipped.Add(1)
		l.m.skipped.Inc()
		return nil
	}
	if ln.long > 0 {
		if err := l.deadLetter(ctx, ln); err != nil {
			return err
		}
		// The frame that follows covers the line's range, so the position
		// passes it only after that frame (or the end) is acked.
		l.pf.next = ln.next
		return nil
	}
	rec := streams.Record{TS: ln.ts, Text: ln.text}
	sz := streams.EncodedRecordSize(&rec)
	if len(l.pf.recs) > 0 && l.pf.est+sz > l.cfg.FrameMaxBytes {
		if err := l.flush(ctx, lingerC); err != nil {
			return err
		}
	}
	l.pf.recs = append(l.pf.recs, rec)
	l.pf.est += sz
	l.pf.textBytes += len(ln.text)
	l.pf.next = ln.next
	if len(l.pf.recs) == 1 {
		l.timer.Reset(l.cfg.Linger)
		*lingerC = l.timer.C
	}
	if len(l.pf.recs) >= l.cfg.FrameMaxRecords {
		return l.flush(ctx, lingerC)
	}
	return nil
}

// flush publishes the pending frame, if it holds any line.
func (l *Lines) flush(ctx context.Context, lingerC *<-chan time.Time) error {
	l.timer.Stop()
	*lingerC = nil
	pf := &l.pf
	if len(pf.recs) == 0 {
		return nil
	}
	f := &streams.Frame{Source: l.source, Tenant: l.cfg.Tenant, FirstOffset: pf.first, NextOffset: pf.next, Records: pf.recs}
	next, n, nbytes, lastTS := pf.next, uint64(len(pf.recs)), uint64(pf.textBytes), pf.recs[len(pf.recs)-1].TS
	reqs := pf.reqs
	pf.reqs = nil
	// The frame will land above every sequence this publisher saw acked
	// before sending it: that is its floor until the position covers it.
	if l.wf != nil {
		if err := l.wf.Hold(ctx, max(l.pub.LastSeq(), l.walStart)+1); err != nil {
			return err
		}
	}
	err := l.pub.Publish(ctx, l.subject, streams.FrameMsgID(l.source, pf.first), f, func(_ uint64, err error) {
		// The frame leaves the floor only after the position counts it, so
		// that a save never finds the source idle with a frame acked
		// beyond the position it saves.
		if l.wf != nil {
			defer l.wf.Done()
		}
		if err == nil {
			err = l.failure()
		}
		if err != nil {
			l.fail(err)
			answerAll(l.js.Conn(), reqs, err)
			return // the position never passes a frame that failed
		}
		l.acked.Store(next)
		l.finalized.Store(lastTS)
		l.nLines.Add(n)
		l.nFrames.Add(1)
		l.nBytes.Add(nbytes)
		l.m.lines.Add(float64(n))
		l.m.frames.Inc()
		l.m.bytes.Add(float64(nbytes))
		answerAll(l.js.Conn(), reqs, nil)
		select {
		case l.kick <- struct{}{}:
		default:
		}
	})
	if err != nil {
		if l.wf != nil {
			l.wf.Drop() // not published
		}
		answerAll(l.js.Conn(), reqs, err)
		return err
	}
	clear(pf.recs)
	pf.recs = pf.recs[:0]
	pf.first = next
	pf.est = l.frameOverhead()
	pf.textBytes = 0
	return nil
}

func (l *Lines) deadLetter(ctx context.Context, ln *line) error {
	hdr := nats.Header{}
	off := strconv.FormatUint(ln.off, 10)
	hdr.Set(streams.HeaderSource, l.source)
	hdr.Set(streams.HeaderOffset, off)
	// Deterministic id: a restart that re-reads the line is de-duplicated.
	hdr.Set(streams.HeaderMsgID, "dlq-producer-"+streams.FrameMsgID(l.source, ln.off))
	reason := fmt.Sprintf("line of %d bytes at offset %s exceeds max_record_bytes %d; the payload is its first %d bytes",
		ln.long, off, l.cfg.MaxRecordBytes, len(ln.text))
	if err := streams.DeadLetter(ctx, l.js, "producer", l.subject, 0, []byte(ln.text), reason, hdr); err != nil {
		return err
	}
	l.log.Warn("line dead-lettered", "offset", ln.off, "bytes", ln.long)
	l.nDead.Add(1)
	l.m.deadLetters.Inc()
	return nil
}

// saver saves the position whenever it moved and publishes progress every
// ProgressInterval, until stop is closed.
func (l *Lines) saver(stop <-chan struct{}) {
	iv := l.cfg.ProgressInterval
	if iv <= 0 {
		iv = time.Second
	}
	tick := time.NewTicker(iv)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-l.kick:
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			l.publishProgress(ctx)
			cancel()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := l.savePosition(ctx); err != nil {
			l.log.Warn("save position", "err", err)
		}
		cancel()
	}
}

func (l *Lines) savePosition(ctx context.Context) error {
	if !l.src.resumable() || l.hookNoSave {
		return nil
	}
	// Read the floor before the position: a frame acked in between only
	// makes the floor lower than needed, never higher.
	floor := l.floor()
	pos := l.acked.Load()
	if _, err := l.positions.Put(ctx, PositionKey(l.source), []byte(strconv.FormatUint(pos, 10))); err != nil {
		return fmt.Errorf("save position %s=%d: %w", PositionKey(l.source), pos, err)
	}
	l.savedPos.Store(pos)
	// Idle: every frame published is acked and covered by the position
	// just saved, so a restart reads nothing back from the WAL and the
	// floor is released; the next frame puts it back first.
	return l.wf.Sync(ctx, floor, func() bool {
		return l.acked.Load() == pos && !l.failed() && (l.recFloor == 0 || pos >= l.recEnd)
	})
}

// checkFloor warns when the WAL was purged past the floor a crashed run
// left: frames that run published beyond its saved position may be gone,
// so they cannot be found and skipped, and their lines may be written a
// second time. It happens only after a crash followed by a stop longer than
// the committer's floor_max_age.
func (l *Lines) checkFloor(ctx context.Context, pos, walFirst uint64) {
	lost, ok := l.wf.Check(ctx, walFirst)
	if !ok {
		return
	}
	l.m.unverified.Inc()
	l.log.Warn("wal purged past this source's floor: lines after the saved position may be written twice",
		"position", pos, "floor", lost.Floor, "wal_first_seq", walFirst, "floor_saved_at", lost.SavedAt)
}

// floor is the lowest WAL sequence a restart of this source may need: the
// floor of the oldest frame not yet covered by the position, or, with none,
// the next sequence after everything this source saw acked.
func (l *Lines) floor() uint64 {
	f := l.wf.Lowest(max(l.pub.LastSeq(), l.walStart) + 1)
	// Frames an earlier run left beyond the saved position stay needed
	// until a position past them is saved.
	if l.recFloor > 0 && l.savedPos.Load() < l.recEnd {
		f = min(f, l.recFloor)
	}
	return f
}

func (l *Lines) publishProgress(ctx context.Context) {
	p := streams.Progress{
		Source: l.source, Kind: "lines", Offset: l.acked.Load(),
		Rows: l.nLines.Load(), Frames: l.nFrames.Load(), UpdatedAt: time.Now().UTC(),
	}
	if ts := l.finalized.Load(); ts > 0 {
		p.FinalizedUntil = time.Unix(0, ts).UTC()
	}
	b, err := json.Marshal(p)
	if err != nil {
		return
	}
	msg := nats.NewMsg(streams.ProgressSubject(l.source))
	msg.Header.Set(streams.HeaderFormat, streams.FormatProgress)
	msg.Data = b
	if _, err := l.js.PublishMsg(ctx, msg); err != nil {
		l.log.Warn("publish progress", "err", err)
	}
	if _, err := l.progress.Put(ctx, l.source, b); err != nil {
		l.log.Warn("store progress", "err", err)
	}
}
