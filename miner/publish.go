package miner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/streams"
)

// pending is one WAL message's publishes, acked in WAL order.
type pending struct {
	seq  uint64
	at   time.Time
	msgs []*nats.Msg
	futs []jetstream.PubAckFuture // nil entry: publish synchronously
}

// finish encodes and publishes the batch and its template events and
// advances the state.
func (r *runner) finish(ctx context.Context, in *item, b *streams.MinedBatch) error {
	// About the frame's size: the parameters are parts of its lines. One
	// allocation instead of a growing buffer.
	data := streams.AppendMinedBatch(make([]byte, 0, len(in.data)+16*len(b.Records)+1024), b)
	if len(data) > r.maxBatch {
		return fmt.Errorf("%w: WAL seq %d (%s, %d records) mines to %d bytes, the work queue takes %d: raise streams.max_msg_size or lower the producer's frame size",
			ErrBatchTooLarge, in.seq, in.subject, len(b.Records), len(data), r.maxBatch)
	}
	p := &pending{seq: in.seq, at: time.Now()}
	for i := range b.Templates {
		t := &b.Templates[i]
		ev := streams.TemplateEvent{Kind: t.Kind.String(), ID: t.ID, Tenant: t.Tenant, Version: t.Version,
			Template: t.Text, Previous: t.Previous, Into: t.Into, WALSeq: in.seq}
		js, err := json.Marshal(&ev)
		if err != nil {
			return fmt.Errorf("encode template event %d/%d: %w", t.ID, t.Version, err)
		}
		msg := nats.NewMsg(streams.TemplateSubject(t.Tenant))
		id := streams.TemplateMsgID(t.ID, t.Version)
		if t.Kind == streams.TemplateMerged {
			id = streams.TemplateMergeMsgID(t.ID, t.Into)
		}
		msg.Header.Set(streams.HeaderMsgID, id)
		msg.Header.Set(streams.HeaderFormat, streams.FormatTemplate)
		msg.Data = js
		p.msgs = append(p.msgs, msg)
	}
	msg := nats.NewMsg(streams.MinedSubject(b.Tenant))
	msg.Header.Set(streams.HeaderMsgID, streams.MinedMsgID(in.seq))
	msg.Header.Set(streams.HeaderFormat, streams.FormatMined)
	msg.Data = data
	p.msgs = append(p.msgs, msg)
	p.futs = make([]jetstream.PubAckFuture, len(p.msgs))
	for i, msg := range p.msgs {
		fut, err := r.js.PublishMsgAsync(msg)
		if err != nil {
			r.log.Debug("async publish refused, the acker publishes it", "subject", msg.Subject, "err", err)
			continue
		}
		p.futs[i] = fut
	}
	r.inFlight.Add(1)
	r.metrics.inFlight.Inc()
	select {
	case r.inflight <- p:
	case <-r.ackerDone:
		return fmt.Errorf("publish WAL seq %d: acker stopped", in.seq)
	}

	// Advance the state.
	st := &r.st
	st.WALSeq, st.PrevSeq = in.seq, in.seq
	st.Frames++
	st.Records += uint64(len(b.Records))
	st.Quarantined += uint64(b.Quarantined)
	tc := st.Tenants[b.Tenant]
	if tc == nil {
		tc = &TenantCounters{}
		// The frame's strings alias its WAL message (DecodeFrameShared):
		// a key kept for good gets its own copy.
		st.Tenants[strings.Clone(b.Tenant)] = tc
	}
	tc.Frames++
	tc.Records += uint64(len(b.Records))
	tc.Quarantined += uint64(b.Quarantined)
	m := r.metrics
	m.frames.Inc()
	m.records.Add(float64(len(b.Records)))
	m.quarantined.Add(float64(b.Quarantined))
	m.walLag.Set(float64(in.pending))
	for i := range b.Templates {
		m.templateEvents.WithLabelValues(b.Templates[i].Kind.String()).Inc()
	}
	return nil
}

// ackLoop waits for the acks of the in-flight publishes in WAL order,
// retrying what fails, and advances the acked position.
func (r *runner) ackLoop(ctx context.Context) {
	tick := time.NewTicker(r.cfg.PositionInterval)
	defer tick.Stop()
	saved := r.acked.Load()
	savePos := func() {
		if seq := r.acked.Load(); seq != saved {
			r.savePosition(ctx, seq)
			saved = seq
		}
	}
	defer func() {
		r.oldestPending.Store(0)
		if ctx.Err() == nil {
			savePos()
		}
	}()
	for {
		var p *pending
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			savePos()
			continue
		case p = <-r.inflight:
			if p == nil {
				return // closed: every publish is acked
			}
		}
		r.oldestPending.Store(p.at.UnixNano())
		for i, msg := range p.msgs {
			if !r.await(ctx, msg, p.futs[i]) {
				return
			}
		}
		if r.blockedSince.Load() != 0 {
			r.log.Info("publishing resumed", "wal_seq", p.seq,
				"blocked_for", time.Since(time.Unix(0, r.blockedSince.Load())).Round(time.Millisecond))
			r.blockedSince.Store(0)
			r.blockedErr.Store(nil)
		}
		r.acked.Store(p.seq)
		r.inFlight.Add(-1)
		r.metrics.inFlight.Dec()
		r.metrics.position.Set(float64(p.seq))
		select {
		case r.ackedCh <- struct{}{}:
		default:
		}
		if len(r.inflight) == 0 {
			r.oldestPending.Store(0)
		}
	}
}

// await returns once msg is acked, or false when ctx ends. A publish that
// failed or stays unanswered is republished at once with the same
// Nats-Msg-Id (JetStream drops it if the first one was stored after all),
// then with backoff while it keeps failing.
func (r *runner) await(ctx context.Context, msg *nats.Msg, fut jetstream.PubAckFuture) bool {
	var err error
	if fut != nil {
		t := time.NewTimer(r.cfg.PublishTimeout)
		select {
		case <-fut.Ok():
			t.Stop()
			return true
		case err = <-fut.Err():
		case <-t.C:
			err = fmt.Errorf("no ack after %s", r.cfg.PublishTimeout)
		case <-ctx.Done():
			t.Stop()
			return false
		}
		t.Stop()
	} else {
		err = errors.New("async publish refused")
	}
	id := msg.Header.Get(streams.HeaderMsgID)
	r.log.Debug("publish not acked, republishing", "subject", msg.Subject, "msg_id", id, "err", err)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			// The backoff carries over from one message to the next while
			// publishing fails, so an outage costs one backoff per attempt,
			// not one per message.
			if r.blockedSince.Load() == 0 {
				r.blockedSince.Store(time.Now().UnixNano())
			}
			s := fmt.Sprintf("publish %s %s: %v", msg.Subject, id, err)
			r.blockedErr.Store(&s)
			if time.Since(r.pubWarned) >= 5*time.Second {
				r.pubWarned = time.Now()
				r.log.Warn("publish failed, retrying", "subject", msg.Subject, "msg_id", id, "err", err, "backoff", r.pubBackoff.Peek())
			}
			if r.pubBackoff.Wait(ctx) != nil {
				return false
			}
		}
		r.metrics.publishRetries.Inc()
		cctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
		_, err = r.js.PublishMsg(cctx, msg)
		cancel()
		if err == nil {
			r.pubBackoff.Reset()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
}

// savePosition writes the acked WAL sequence to KV (informational).
func (r *runner) savePosition(ctx context.Context, seq uint64) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := r.kv.Put(ctx, streams.KeyMiner, []byte(strconv.FormatUint(seq, 10))); err != nil {
		r.log.Warn("save position", "key", streams.KeyMiner, "wal_seq", seq, "err", err)
	}
}
