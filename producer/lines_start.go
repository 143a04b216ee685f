package producer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/producer/internal/walfloor"
	"github.com/quarrylake/quarry/streams"
)

// start loads the position, recovers the frames already in the WAL,
// starts the source and puts the WAL floor before the first frame, so that
// no frame of this run is ever unprotected from a WAL purge, whatever
// happens to the saves that follow.
func (l *Lines) start(ctx context.Context) error {
	pos, err := l.prepare(ctx)
	if err != nil {
		return err
	}
	l.acked.Store(pos)
	if l.src.resumable() {
		err := l.retryStart(ctx, "saving the wal floor", func(fctx context.Context) error {
			return l.wf.Start(fctx, l.floor())
		})
		if err != nil {
			return err
		}
	}
	l.pf = pendingFrame{first: pos, next: pos, recs: make([]streams.Record, 0, min(l.cfg.FrameMaxRecords, 4096))}
	l.pf.est = l.frameOverhead()
	l.log.Info("line source started", "kind", l.src.kind(), "position", pos, "recovered_spans", len(l.cov))
	return nil
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
