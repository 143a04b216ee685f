package miner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

// item is one WAL message, decoded and tokenized off the mining goroutine.
type item struct {
	seq     uint64
	pending uint64
	subject string
	data    []byte
	frame   *streams.Frame // nil when the message does not decode
	err     error          // why it does not decode
	prep    []mining.Prepared
	bad     []string // per record: why it is quarantined ("" = fine); nil when none is
	// preparer cut prep's tokens; process tells it when they are done.
	preparer *mining.Preparer
}

// readLoop feeds WAL messages from sequence next on, decoded and tokenized,
// to out. It recreates the ordered consumer after errors and closes out when
// ctx ends.
func (r *runner) readLoop(ctx context.Context, next uint64, out chan<- *item) {
	defer close(out)
	b := backoff.New(r.cfg.retryPolicy())
	prep := &mining.Preparer{}
	for ctx.Err() == nil {
		cons, err := r.js.OrderedConsumer(ctx, streams.WALStream, jetstream.OrderedConsumerConfig{
			MaxResetAttempts: streams.OrderedResetAttempts,
			DeliverPolicy:    jetstream.DeliverByStartSequencePolicy, OptStartSeq: next,
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.setWaiting(fmt.Sprintf("waiting for WAL stream %s: %v", streams.WALStream, err))
			r.log.Warn("create ordered consumer", "start_seq", next, "err", err)
			backoff.Sleep(ctx, b.Next())
			continue
		}
		fetchBytes := r.cfg.FetchBytes
		if lim := r.maxFrame + 4096; fetchBytes < lim {
			fetchBytes = lim
		}
		it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(r.cfg.FetchMessages, fetchBytes))
		if err != nil {
			r.setWaiting(fmt.Sprintf("waiting for WAL stream %s: %v", streams.WALStream, err))
			r.log.Warn("consume WAL", "start_seq", next, "err", err)
			backoff.Sleep(ctx, b.Next())
			continue
		}
		r.setWaiting("")
		b.Reset()
		first := true
		for {
			msg, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				it.Stop()
				if ctx.Err() == nil {
					r.log.Warn("read WAL, recreating the consumer", "next_seq", next, "err", err)
					backoff.Sleep(ctx, b.Peek())
				}
				break
			}
			md, err := msg.Metadata()
			if err != nil {
				r.log.Warn("WAL message without metadata", "subject", msg.Subject(), "err", err)
				continue
			}
			seq := md.Sequence.Stream
			if seq < next {
				continue // redelivered after a consumer reset
			}
			if seq > next && first {
				// Deleted or purged messages. Harmless for the PrevSeq chain;
				// after a restore it means the WAL was purged above the
				// snapshot and the model misses what those messages taught.
				r.log.Warn("WAL resumes after a gap", "want_seq", next, "got_seq", seq)
			}
			first = false
			in := r.prepare(prep, msg.Subject(), seq, md.NumPending, msg.Data())
			select {
			case out <- in:
				next = seq + 1
			case <-ctx.Done():
				it.Stop()
				return
			}
		}
	}
}

// prepare decodes a WAL message, finds the records to quarantine and
// tokenizes the rest with prep. It is pure, so it runs off the mining
// goroutine.
func (r *runner) prepare(prep *mining.Preparer, subject string, seq, pendingMsgs uint64, data []byte) *item {
	in := &item{seq: seq, pending: pendingMsgs, subject: subject, data: data}
	// Strings alias data, which nothing changes: the model copies what
	// it keeps (template texts, tenant names), and so does finish.
	f, err := streams.DecodeFrameShared(data)
	if err != nil {
		in.err = err
		return in
	}
	in.frame = f
	in.preparer = prep
	prep.Begin(seq)
	in.prep = make([]mining.Prepared, len(f.Records))
	for i := range f.Records {
		rec := &f.Records[i]
		if why := checkRecord(rec); why != "" {
			if in.bad == nil {
				in.bad = make([]string, len(f.Records))
			}
			in.bad[i] = why
			continue
		}
		in.prep[i] = prep.Prepare(rec.Text)
	}
	return in
}

// checkRecord says why a record cannot go to the lake, or "".
//
// Text may hold any bytes: the mining engine makes bytes that are not UTF-8
// parameters (never template text) and the lake stores such parameters as
// binary. Attribute keys and values are the lake's map<string,string>, so
// they must be UTF-8.
func checkRecord(rec *streams.Record) string {
	for j, a := range rec.Attrs {
		if !utf8.ValidString(a.Key) {
			return fmt.Sprintf("attr %d key is not valid UTF-8", j)
		}
		if !utf8.ValidString(a.Value) {
			return fmt.Sprintf("attr %d (%s) value is not valid UTF-8", j, a.Key)
		}
	}
	return ""
}

// mineLoop mines items in WAL order until ctx ends or items closes; it
// returns a fatal error.
func (r *runner) mineLoop(ctx context.Context, items <-chan *item) error {
	tick := time.NewTicker(min(time.Second, r.cfg.SnapshotInterval))
	defer tick.Stop()
	r.metrics.setModel(r.model.Stats())
	defer func() { r.metrics.setModel(r.model.Stats()) }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case in, ok := <-items:
			if !ok {
				return nil
			}
			if err := r.process(ctx, in); err != nil {
				if ctx.Err() != nil && !errors.Is(err, ErrBatchTooLarge) {
					// Stopped mid-message: it is replayed next time (and
					// with r.dirty set no final snapshot is written).
					return nil
				}
				return err
			}
			if in.preparer != nil {
				// Mined: its tokens may hold later lines' (Preparer.Done).
				in.preparer.Done(in.seq)
			}
			r.sinceSnap++
			if r.sinceSnap >= r.cfg.SnapshotEvery || time.Since(r.snapAt) >= r.cfg.SnapshotInterval {
				r.requestSnapshot()
			}
		case <-tick.C:
			r.metrics.setModel(r.model.Stats())
			if r.sinceSnap > 0 && time.Since(r.snapAt) >= r.cfg.SnapshotInterval {
				r.requestSnapshot()
			}
		}
	}
}

// tenantOf picks the tenant of a WAL message that does not decode: the
// line subject's last token, else InvalidTenant.
func tenantOf(subject string) string {
	if t, ok := strings.CutPrefix(subject, "quarry.wal.lines."); ok && streams.CheckToken(t) == nil {
		return t
	}
	return InvalidTenant
}

// maxKeptRecords bounds the records array the runner keeps for the next
// batch (process); a frame rarely holds more than a few thousand lines.
const maxKeptRecords = 1 << 16

// process mines one WAL message and publishes its batch and events.
func (r *runner) process(ctx context.Context, in *item) error {
	b := streams.MinedBatch{WALSeq: in.seq, PrevSeq: r.st.PrevSeq, Subject: in.subject}
	if in.frame == nil {
		// Dead-letter first: until it is acked nothing has changed.
		reason := fmt.Sprintf("WAL message %d does not decode: %v", in.seq, in.err)
		if err := r.deadLetter(ctx, func(ctx context.Context) error {
			return streams.DeadLetter(ctx, r.js, Stage, in.subject, in.seq, in.data, reason, nil)
		}); err != nil {
			return err
		}
		r.log.Warn("dead-lettered malformed WAL message", "wal_seq", in.seq, "subject", in.subject, "err", in.err)
		b.Tenant = tenantOf(in.subject)
		b.Quarantined = 1
		return r.finish(ctx, in, &b)
	}
	f := in.frame
	b.Tenant, b.Source, b.FirstOffset, b.NextOffset = f.Tenant, f.Source, f.FirstOffset, f.NextOffset
	for i, why := range in.bad {
		if why == "" {
			continue
		}
		if err := r.deadLetterRecord(ctx, in, i, why); err != nil {
			return err
		}
		b.Quarantined++
	}

	// Mine every record; from here on the model has changed.
	r.dirty = true
	evs := r.events[:0]
	// The batch is encoded before process returns, so its records array
	// is the runner's, for every batch.
	b.Records = slices.Grow(r.records[:0], len(f.Records)-int(b.Quarantined))
	defer func() {
		clear(b.Records)
		if cap(b.Records) <= maxKeptRecords {
			r.records = b.Records[:0]
		}
	}()
	for i := range f.Records {
		if in.bad != nil && in.bad[i] != "" {
			continue
		}
		rec := &f.Records[i]
		var res mining.Result
		res, evs = r.model.MinePrepared(f.Tenant, in.prep[i], evs)
		b.Records = append(b.Records, streams.MinedRecord{
			Index: uint32(i), TS: rec.TS, TSSource: rec.TSSource, TemplateID: res.ID, TemplateVersion: res.Version,
			Params: res.Params, Attrs: rec.Attrs,
		})
	}
	for _, e := range evs {
		var kind streams.TemplateKind
		switch e.Kind {
		case mining.EventCreated:
			kind = streams.TemplateCreated
		case mining.EventChanged:
			kind = streams.TemplateChanged
		case mining.EventMerged:
			// A merge creates no version: lines already mined keep
			// rendering with theirs. It retires e.ID into e.Into.
			kind = streams.TemplateMerged
		default:
			return fmt.Errorf("WAL seq %d: template event of unknown kind %d", in.seq, e.Kind)
		}
		var kinds []string // a merge adds no version, so no kinds
		if kind != streams.TemplateMerged {
			kinds = e.Kinds
		}
		b.Templates = append(b.Templates, streams.TemplateDef{
			Kind: kind, ID: e.ID, Tenant: e.Tenant, Version: e.Version, Text: e.Template, Previous: e.Previous, Into: e.Into,
			Kinds: kinds,
		})
	}
	clear(evs)
	r.events = evs[:0]
	if err := r.finish(ctx, in, &b); err != nil {
		return err
	}
	r.dirty = false
	return nil
}
