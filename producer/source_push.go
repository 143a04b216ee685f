package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/streams"
)

// Entry is one line handed to a push source (Push.Submit).
type Entry struct {
	// Text is the line as mined; it must not contain '\n' to be one line
	// (the push source does not split it).
	Text string
	// Attrs become the record's attributes, unchanged.
	Attrs []streams.Attr
	// TS, when not zero, is the line's event time (TSSource event); zero
	// leaves it to the stamper (Config.EventTime), like a line read from a
	// file.
	TS time.Time
	// Bad, when set, dead-letters Text with this reason instead of
	// writing it: malformed input is kept, never dropped.
	Bad string
}

// ErrPushStopped is what Submit returns, and done gets, once the push
// source no longer takes or cannot write lines.
var ErrPushStopped = errors.New("push source stopped")

// Push hands lines from in-process receivers (syslog, HTTP) to a line
// source; see NewPush.
type Push struct {
	source string
	maxRec int
	in     chan pushBatch
	stop   chan struct{}
	once   sync.Once
	// mu orders Submit's send against close's drain.
	mu sync.RWMutex
}

type pushBatch struct {
	entries []Entry
	read    int64
	done    func(Ingested, error)
}

// NewPush returns a line source fed by Push.Submit, for receivers running
// in this process. The source id defaults to "push-<tenant>"; offsets
// count lines and resume after the saved position and after every frame
// of the source already in the WAL, so ids never repeat (as NewSubject).
//
// Delivery: Submit's done is called once, when every line of the batch is
// durable (in an acked WAL frame or, when too long or Bad, in the
// dead-letter stream), or with the error that stopped the source. A
// receiver acknowledges its client only in done, so a client that resends
// until acknowledged gets at least once; lines submitted and not yet
// durable when the process dies are lost to this source but never
// acknowledged.
func NewPush(cfg Config, deps Deps) (*Lines, *Push, error) {
	cfg = cfg.Defaults()
	source := cfg.Source
	if source == "" {
		source = "push-" + cfg.Tenant
	}
	p := &Push{source: source, maxRec: cfg.MaxRecordBytes, in: make(chan pushBatch, 16), stop: make(chan struct{})}
	l, err := newLines(cfg, deps, &pushSource{p: p}, source)
	if err != nil {
		return nil, nil, err
	}
	return l, p, nil
}

// Submit queues entries as one request; done (not nil) gets the outcome
// once, on another goroutine. Submit blocks while the source's queue is
// full (the WAL is slower than the clients: the caller stops reading) and
// returns an error, without calling done, when ctx ends first or the
// source stopped. An empty batch is answered at once.
func (p *Push) Submit(ctx context.Context, entries []Entry, done func(Ingested, error)) error {
	var once sync.Once
	d := func(in Ingested, err error) { once.Do(func() { done(in, err) }) }
	if len(entries) == 0 {
		go d(Ingested{Source: p.source}, nil)
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	select {
	case <-p.stop:
		return ErrPushStopped
	default:
	}
	select {
	case p.in <- pushBatch{entries: entries, read: time.Now().UnixNano(), done: d}:
		return nil
	case <-p.stop:
		return ErrPushStopped
	case <-ctx.Done():
		return fmt.Errorf("submit to %s: %w", p.source, ctx.Err())
	}
}

// closeInput stops Submit and answers the batches still queued.
func (p *Push) closeInput() {
	p.once.Do(func() { close(p.stop) })
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		select {
		case b := <-p.in:
			b.done(Ingested{Source: p.source}, fmt.Errorf("%w before the lines were written", ErrPushStopped))
		default:
			return
		}
	}
}

type pushSource struct {
	p   *Push
	off uint64
}

func (s *pushSource) kind() string    { return "push " + s.p.source }
func (s *pushSource) resumable() bool { return true }

func (s *pushSource) start(_ context.Context, _ *Lines, pos, recovered uint64) (uint64, error) {
	s.off = max(pos, recovered)
	return s.off, nil
}

func (s *pushSource) run(ctx context.Context, e *emitter) (uint64, error) {
	for {
		select {
		case b := <-s.p.in:
			if err := s.emit(ctx, e, b); err != nil {
				return 0, err
			}
			if len(s.p.in) == 0 {
				if err := e.flush(ctx); err != nil {
					return 0, err
				}
			}
		case <-ctx.Done():
			// Stop taking batches, answer the queued ones (their senders
			// resend) and hand over what was emitted.
			s.p.closeInput()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			return s.off, e.flush(dctx)
		}
	}
}

func (s *pushSource) emit(ctx context.Context, e *emitter, b pushBatch) error {
	req := &request{source: s.p.source, first: s.off, done: b.done}
	for i := range b.entries {
		en := &b.entries[i]
		ln := line{off: s.off, next: s.off + 1, read: b.read, text: en.Text, attrs: en.Attrs, bad: en.Bad}
		if len(ln.text) > s.p.maxRec {
			ln.long = len(ln.text)
			ln.text = ln.text[:min(len(ln.text), deadLetterPrefix)]
		}
		if !en.TS.IsZero() && eventtime.InNanos(en.TS) {
			ln.ts, ln.tsSrc, ln.stamped = en.TS.UnixNano(), streams.TSEvent, true
		}
		s.off++
		if i == len(b.entries)-1 {
			req.next = s.off
			ln.req = req
		}
		if err := e.add(ctx, ln); err != nil {
			// The batch was not handed over whole: its sender resends.
			b.done(Ingested{Source: s.p.source}, err)
			return err
		}
	}
	return nil
}

func (s *pushSource) close() error {
	s.p.closeInput()
	return nil
}
