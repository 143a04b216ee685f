package producer

import (
	"bytes"
	"context"
	"encoding/json"
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
// Delivery: a message published without a reply subject is at most once
// up to this source: received before a crash and not yet acked in the WAL,
// it is lost (core NATS keeps nothing to replay). A request (a message with
// a reply subject, nats.Conn.Request) is answered only once every line of
// it is durable: in an acked WAL frame or, if too long, in the dead-letter
// stream. The answer (Ingested, JSON) carries the lines' offsets; a failed
// source answers with a HeaderIngestError header instead. A requester that
// retries until it is answered gets at least once: a retry after a lost
// answer writes its lines again. On shutdown the source unsubscribes and
// frames what it received.
func NewSubject(cfg Config, deps Deps) (*Lines, error) {
	cfg = cfg.Defaults()
	source := cfg.Source
	if source == "" {
		source = "nats-" + cfg.Tenant
	}
	return newLines(cfg, deps, &natsSource{source: source, subject: IngestSubject(cfg.Tenant), maxRec: cfg.MaxRecordBytes}, source)
}

type natsSource struct {
	source  string
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

// HeaderIngestError is set on the answer to an ingest request that was not
// written; its value says why. The body is then empty.
const HeaderIngestError = "Quarry-Error"

// Ingested is the answer to an ingest request whose lines are durable:
// offsets FirstOffset to NextOffset-1 of source Source.
type Ingested struct {
	Source      string `json:"source"`
	FirstOffset uint64 `json:"first_offset"`
	NextOffset  uint64 `json:"next_offset"`
}

// request is an ingest message awaiting its answer.
type request struct {
	reply       string
	source      string
	first, next uint64
	// done, when set, gets the outcome instead of a reply (push sources).
	done func(Ingested, error)
}

// answer publishes the outcome to the requester (core NATS: a requester
// that does not hear it sends again).
func (r *request) answer(nc *nats.Conn, err error) {
	if r.done != nil {
		r.done(Ingested{Source: r.source, FirstOffset: r.first, NextOffset: r.next}, err)
		return
	}
	m := nats.NewMsg(r.reply)
	if err != nil {
		m.Header.Set(HeaderIngestError, err.Error())
	} else {
		m.Data, _ = json.Marshal(Ingested{Source: r.source, FirstOffset: r.first, NextOffset: r.next})
	}
	_ = nc.PublishMsg(m)
}

func answerAll(nc *nats.Conn, reqs []*request, err error) {
	for _, r := range reqs {
		r.answer(nc, err)
	}
}

func (s *natsSource) emit(ctx context.Context, e *emitter, m *nats.Msg) error {
	var req *request
	if m.Reply != "" {
		req = &request{reply: m.Reply, source: s.source, first: s.off}
	}
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
		ln := line{off: s.off, next: s.off + 1, read: now}
		if len(text) > s.maxRec {
			ln.long = len(text)
			text = text[:min(len(text), deadLetterPrefix)]
		}
		ln.text = string(text)
		s.off++
		if i < 0 && req != nil {
			req.next = s.off
			ln.req = req
		}
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
