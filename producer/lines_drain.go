package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/quarrylake/quarry/streams"
)

// drain ends a run: it publishes the pending frame, waits up to
// DrainTimeout for the acks, answers the requests left, stops the saver,
// saves the final position and progress, and returns the run's error.
func (l *Lines) drain(ctx context.Context, rd *reader, runErr error, stopSaver func()) error {
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.DrainTimeout)
	defer dcancel()
	if runErr == nil && !l.failed() {
		if err := l.flush(dctx); err != nil {
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
	case rr = <-rd.done:
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
	stopSaver()
	if err := l.savePosition(dctx); err != nil && runErr == nil {
		runErr = err
	}
	l.publishProgress(dctx)
	st := l.Stats()
	l.log.Info("line source stopped", "position", st.Position, "lines", st.Lines, "frames", st.Frames,
		"dead_letters", st.DeadLetters, "recovered", st.Recovered, "err", runErr)
	return runErr
}

// startSaver runs saver until the returned func is called; that func
// waits for it to return.
func (l *Lines) startSaver() (stop func()) {
	stopc := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); l.saver(stopc) }()
	return func() {
		close(stopc)
		<-done
	}
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

// floor is the lowest WAL sequence a restart of this source may need: the
// floor of the oldest frame not yet covered by the position, or, with none,
// the next sequence after everything this source saw acked.
func (l *Lines) floor() uint64 {
	f := max(l.pub.LastSeq(), l.walStart) + 1
	if l.wf != nil {
		f = l.wf.Lowest(f)
	}
	// Frames an earlier run left beyond the saved position stay needed
	// until a position past them is saved.
	if l.recFloor > 0 && l.savedPos.Load() < l.recEnd {
		f = min(f, l.recFloor)
	}
	return f
}

func (l *Lines) publishProgress(ctx context.Context) {
	p := streams.Progress{
		Source: l.source, Tenant: l.cfg.Tenant, Kind: "lines", Offset: l.acked.Load(),
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
