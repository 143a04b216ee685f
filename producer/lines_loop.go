package producer

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/quarrylake/quarry/streams"
)

// reader is the goroutine that reads the source and hands its lines to
// the loop in batches.
type reader struct {
	batches chan []line
	free    chan []line     // batches the framer is done with, for the reader to reuse
	done    chan readResult // the read's end, sent before batches closes
	cancel  context.CancelFunc
}

type readResult struct {
	end uint64 // the offset after the last line read
	err error
}

func (l *Lines) startReader(ctx context.Context) *reader {
	rctx, cancel := context.WithCancel(ctx)
	rd := &reader{batches: make(chan []line, 4), free: make(chan []line, 8), done: make(chan readResult, 1), cancel: cancel}
	go func() {
		e := &emitter{ch: rd.batches, free: rd.free, buf: make([]line, 0, emitBatch), stamp: l.stamp}
		if l.cfg.Rate > 0 {
			e.pace = &pacer{rate: l.cfg.Rate}
		}
		end, err := l.src.run(rctx, e)
		if err == nil {
			err = e.flush(rctx)
		}
		rd.done <- readResult{end, err}
		close(rd.batches)
	}()
	return rd
}

// loop frames and publishes what the reader reads until it ends, a
// publish fails, the source fails or, after ctx's end, the reader stops (a
// reader stuck in a blocking read, stdin, is abandoned after a grace
// period). It returns the error that stopped it, nil at the reader's end.
func (l *Lines) loop(ctx context.Context, rd *reader) error {
	l.timer = time.NewTimer(time.Hour)
	l.timer.Stop()
	defer l.timer.Stop()
	var grace <-chan time.Time
	done := ctx.Done()
	// Publishing and dead-lettering are bounded by the publisher's and
	// DeadLetter's own timeouts; a cancelled ctx must not lose what was read.
	octx := context.WithoutCancel(ctx)
	for {
		select {
		case b, ok := <-rd.batches:
			if !ok {
				return nil
			}
			for i := range b {
				if err := l.add(octx, &b[i]); err != nil {
					return err
				}
			}
			// A batch that ends a request with nothing read behind it:
			// the request's client waits for this frame, and lingering
			// would only add to its wait (a receiver's clients, 1,000
			// lines a request, waited the 50 ms linger on every request).
			// It is cut at once when none of the source's frames is in
			// flight, else once they are resolved (group commit): the
			// requests that arrive meanwhile share its frame, and each
			// frame costs the WAL, the miner and the encoders their
			// per-message work (a frame per request cost JSON lines about
			// a microsecond a line). Its client waits at most for the
			// frames ahead of it, whose acks it would wait for anyway
			// (the answers go in publish order).
			if len(b) > 0 && b[len(b)-1].req != nil && len(rd.batches) == 0 && len(l.pf.recs) > 0 {
				if err := l.cutOrHold(octx); err != nil {
					return err
				}
			}
			// Hand the batch back: a reader that flushes before every
			// blocking read (a pipe, a follower) would otherwise allocate
			// a full batch for every few lines.
			clear(b)
			select {
			case rd.free <- b[:0]:
			default:
			}
		case <-l.holdC:
			if err := l.cutOrHold(octx); err != nil {
				return err
			}
		case <-l.lingerC:
			l.lingerC = nil
			if err := l.flush(octx); err != nil {
				return err
			}
		case <-l.failCh:
			return nil
		case <-done:
			// Keep taking what the reader already read until it returns.
			done = nil
			grace = time.After(2 * time.Second)
		case <-grace:
			l.log.Warn("reader did not stop; abandoning it")
			return nil
		}
	}
}

// cutOrHold publishes the pending frame if none of the source's frames is
// in flight, else holds it until the publisher resolves one (holdC) and
// asks again.
func (l *Lines) cutOrHold(ctx context.Context) error {
	if l.pub.InFlight() == 0 {
		return l.flush(ctx)
	}
	if l.holdC == nil && l.hookHold != nil {
		l.hookHold()
	}
	l.holdC = l.pub.Resolved()
	return nil
}

func (l *Lines) frameOverhead() int { return 3 + 20 + len(l.source) + len(l.cfg.Tenant) + 30 }

// add frames one line and, on the last line of a request, arranges its
// answer: with the frame that holds the line, or, when the line went to
// no frame (dead-lettered, already in the WAL) and no frame is pending,
// once every frame published before it is acked.
func (l *Lines) add(ctx context.Context, ln *line) error {
	if err := l.addLine(ctx, ln); err != nil {
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

func (l *Lines) addLine(ctx context.Context, ln *line) error {
	for len(l.cov) > 0 && ln.off >= l.cov[0].next {
		l.cov = l.cov[1:]
	}
	if len(l.cov) > 0 && ln.off >= l.cov[0].first {
		// Already in the WAL: cut before it and continue after it.
		if err := l.flush(ctx); err != nil {
			return err
		}
		if next := l.cov[0].next; l.pf.next != next {
			l.pf.first, l.pf.next = next, next
			// The span's frames were acked before the crash: once every
			// frame before them is resolved, the position passes them, so
			// a quiet source saves past them and releases its floor
			// without waiting for a new line.
			l.pub.AfterResolved(func() {
				if !l.failed() && l.acked.Load() < next {
					l.acked.Store(next)
				}
			})
		}
		l.nSkipped.Add(1)
		l.m.skipped.Inc()
		return nil
	}
	if ln.long > 0 || ln.bad != "" {
		if err := l.deadLetter(ctx, ln); err != nil {
			return err
		}
		// The frame that follows covers the line's range, so the position
		// passes it only after that frame (or the end) is acked.
		l.pf.next = ln.next
		return nil
	}
	rec := streams.Record{TS: ln.ts, TSSource: ln.tsSrc, Text: ln.text, Attrs: ln.attrs}
	sz := streams.EncodedRecordSize(&rec)
	if len(l.pf.recs) > 0 && l.pf.est+sz > l.cfg.FrameMaxBytes {
		if err := l.flush(ctx); err != nil {
			return err
		}
	}
	l.pf.recs = append(l.pf.recs, rec)
	l.pf.est += sz
	l.pf.textBytes += len(ln.text)
	l.pf.lastRead = ln.read
	l.pf.next = ln.next
	if len(l.pf.recs) == 1 {
		l.timer.Reset(l.cfg.Linger)
		l.lingerC = l.timer.C
	}
	if len(l.pf.recs) >= l.cfg.FrameMaxRecords {
		return l.flush(ctx)
	}
	return nil
}

// flush publishes the pending frame, if it holds any line.
func (l *Lines) flush(ctx context.Context) error {
	l.timer.Stop()
	l.lingerC = nil
	l.holdC = nil
	pf := &l.pf
	if len(pf.recs) == 0 {
		return nil
	}
	f := &streams.Frame{Source: l.source, Tenant: l.cfg.Tenant, FirstOffset: pf.first, NextOffset: pf.next, Records: pf.recs}
	next, n, nbytes, lastRead := pf.next, uint64(len(pf.recs)), uint64(pf.textBytes), pf.lastRead
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
		l.finalized.Store(lastRead) // read time, not event time: see Lines.finalized
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
	if ln.bad != "" {
		reason = fmt.Sprintf("line at offset %s: %s", off, ln.bad)
	}
	if err := streams.DeadLetter(ctx, l.js, "producer", l.subject, 0, []byte(ln.text), reason, hdr); err != nil {
		return err
	}
	l.log.Warn("line dead-lettered", "offset", ln.off, "bytes", max(ln.long, len(ln.text)), "reason", reason)
	l.nDead.Add(1)
	l.m.deadLetters.Inc()
	return nil
}
