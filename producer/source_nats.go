package producer

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// NewSubject returns a line source subscribed (core NATS) to
// IngestSubject(cfg.Tenant). Each message holds one or more lines
// separated by '\n'; one trailing '\n' is optional, so "a\nb", "a\nb\n"
// both hold two lines and an empty message holds one empty line. The
// source id defaults to "nats-<tenant>"; offsets count lines, and the
// counter resumes after the saved position and after every frame of the
// source already in the WAL, so ids never repeat.
//
// Delivery: core NATS is at most once up to this source. Messages received
// before a crash and not yet acked in the WAL are lost (nothing can replay
// them); on shutdown the source unsubscribes and frames what it received.
// Applications that need more publish to the WAL through a file or use
// request/reply on a stream of their own.
func NewSubject(cfg Config, deps Deps) (*Lines, error) {
	cfg = cfg.Defaults()
	source := cfg.Source
	if source == "" {
		source = "nats-" + cfg.Tenant
	}
	return newLines(cfg, deps, &natsSource{subject: IngestSubject(cfg.Tenant), maxRec: cfg.MaxRecordBytes}, source)
}

type natsSource struct {
	subject string
	maxRec  int
	nc      *nats.Conn
	sub     *nats.Subscription
	ch      chan *nats.Msg
	off     uint64
}

func (s *natsSource) kind() string    { return "subject " + s.subject }
func (s *natsSource) resumable() bool { return true }

func (s *natsSource) start(_ context.Context, l *Lines, pos, recovered uint64) (uint64, error) {
	s.nc = l.js.Conn()
	s.off = max(pos, recovered)
	s.ch = make(chan *nats.Msg, 64<<10)
	sub, err := s.nc.ChanSubscribe(s.subject, s.ch)
	if err != nil {
		return 0, fmt.Errorf("subscribe %s: %w", s.subject, err)
	}
	s.sub = sub
	// Make sure the server knows the subscription before Run reports ready.
	if err := s.nc.FlushTimeout(10 * time.Second); err != nil {
		sub.Unsubscribe()
		return 0, fmt.Errorf("subscribe %s: flush: %w", s.subject, err)
	}
	return s.off, nil
}

func (s *natsSource) run(ctx context.Context, e *emitter) (uint64, error) {
	for {
		select {
		case m := <-s.ch:
			if err := s.emit(ctx, e, m); err != nil {
				return 0, err
			}
			if len(s.ch) == 0 {
				if err := e.flush(ctx); err != nil {
					return 0, err
				}
			}
		case <-ctx.Done():
			// Frame what was received: the framer keeps draining until
			// this returns.
			s.sub.Unsubscribe()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			for {
				select {
				case m := <-s.ch:
					if err := s.emit(dctx, e, m); err != nil {
						return 0, err
					}
				default:
					return s.off, e.flush(dctx)
				}
			}
		}
	}
}

func (s *natsSource) emit(ctx context.Context, e *emitter, m *nats.Msg) error {
	data := m.Data
	if n := len(data); n > 0 && data[n-1] == '\n' {
		data = data[:n-1]
	}
	now := time.Now().UnixNano()
	for {
		i := bytes.IndexByte(data, '\n')
		text := data
		if i >= 0 {
			text = data[:i]
		}
		ln := line{off: s.off, next: s.off + 1, ts: now}
		if len(text) > s.maxRec {
			ln.long = len(text)
			text = text[:min(len(text), deadLetterPrefix)]
		}
		ln.text = string(text)
		s.off++
		if err := e.add(ctx, ln); err != nil {
			return err
		}
		if i < 0 {
			return nil
		}
		data = data[i+1:]
	}
}

func (s *natsSource) close() error {
	if s.sub != nil {
		return s.sub.Unsubscribe()
	}
	return nil
}
