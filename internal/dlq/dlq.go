// Package dlq reads and acts on the dead-letter stream (streams.DeadLetterStream):
// list, show, replay and drop. Replay sends a dead letter back to the
// subject it was dead-lettered from, exactly once:
//
//  1. a marker key (streams.StateBucket, "dlq-replay.<seq>") records the
//     target stream's last sequence before the publish;
//  2. the payload is published to the original subject with Nats-Msg-Id
//     "dlq-replay-<seq>" and the header Quarry-Replay-Of: <seq>;
//  3. the dead letter is deleted, then the marker.
//
// A crash after 1 or 2 leaves the marker: the next replay scans the target
// stream after the recorded sequence for a message replaying <seq> and
// publishes only when there is none, so the duplicate window is not relied
// on. After 3 the dead letter is gone and a replay is a no-op. (On a
// work-queue stream a replayed message may be consumed and gone before the
// scan; the stages downstream are idempotent on it: the committer rejects a
// batch or report it has committed.)
package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/streams"
)

// HeaderReplayOf marks a replayed message with the dead-letter sequence it
// came from.
const HeaderReplayOf = "Quarry-Replay-Of"

// CrashAfterPublish is the crash point between a replay's publish and the
// dead letter's deletion.
const CrashAfterPublish = "dlq.replay.after-publish"

// Errors callers branch on.
var (
	// ErrNotFound: no dead letter has that sequence (never, or dropped or
	// replayed already).
	ErrNotFound = errors.New("no such dead letter")
	// ErrNotReplayable: the dead letter cannot go back into the pipeline
	// (a producer's dead letter holds a cut line, not a frame).
	ErrNotReplayable = errors.New("dead letter cannot be replayed")
)

// Entry is one dead letter.
type Entry struct {
	Seq         uint64            `json:"seq"`
	Time        time.Time         `json:"time"`
	Stage       string            `json:"stage"`
	Reason      string            `json:"reason"`
	OrigSubject string            `json:"orig_subject"`
	OrigSeq     uint64            `json:"orig_seq,omitempty"`
	Source      string            `json:"source,omitempty"`
	Offset      string            `json:"offset,omitempty"`
	Tenant      string            `json:"tenant,omitempty"`
	Size        int               `json:"size"`
	Headers     map[string]string `json:"headers,omitempty"`
	Payload     []byte            `json:"payload,omitempty"`
}

func entryOf(seq uint64, ts time.Time, subject string, h nats.Header, data []byte) Entry {
	e := Entry{Seq: seq, Time: ts.UTC(), Stage: h.Get(streams.HeaderStage), Reason: h.Get(streams.HeaderReason),
		OrigSubject: h.Get(streams.HeaderOrigSubject), Source: h.Get(streams.HeaderSource), Offset: h.Get(streams.HeaderOffset),
		Size: len(data), Headers: map[string]string{}, Payload: data}
	if e.Stage == "" {
		e.Stage = strings.TrimPrefix(subject, streams.DeadLetterSubject(""))
	}
	e.OrigSeq, _ = strconv.ParseUint(h.Get(streams.HeaderOrigSeq), 10, 64)
	e.Tenant = tenantOf(e.OrigSubject)
	for k := range h {
		e.Headers[k] = h.Get(k)
	}
	return e
}

// tenantOf reads the tenant from a line WAL or mined subject.
func tenantOf(subject string) string {
	for _, p := range []string{streams.LineSubject(""), streams.MinedSubject("")} {
		if t, ok := strings.CutPrefix(subject, p); ok {
			return t
		}
	}
	return ""
}

func filter(stage string) string {
	if stage == "" {
		return streams.DeadLetterSubjects
	}
	return streams.DeadLetterSubject(stage)
}

// List returns up to limit dead letters of stage ("" for every stage),
// oldest first.
func List(ctx context.Context, js jetstream.JetStream, stage string, limit int) ([]Entry, error) {
	s, err := js.Stream(ctx, streams.DeadLetterStream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", streams.DeadLetterStream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", streams.DeadLetterStream, err)
	}
	var out []Entry
	if info.State.Msgs == 0 {
		return out, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{MaxResetAttempts: streams.OrderedResetAttempts, FilterSubjects: []string{filter(stage)}})
	if err != nil {
		return nil, fmt.Errorf("dead-letter consumer: %w", err)
	}
	for len(out) < limit {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read dead letters: %w", err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return nil, err
		}
		out = append(out, entryOf(md.Sequence.Stream, md.Timestamp, msg.Subject(), msg.Headers(), msg.Data()))
		if md.NumPending == 0 {
			break
		}
	}
	return out, nil
}

// Get returns the dead letter at seq.
func Get(ctx context.Context, js jetstream.JetStream, seq uint64) (Entry, error) {
	s, err := js.Stream(ctx, streams.DeadLetterStream)
	if err != nil {
		return Entry{}, fmt.Errorf("stream %s: %w", streams.DeadLetterStream, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Entry{}, fmt.Errorf("dead letter %d: %w", seq, ErrNotFound)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("dead letter %d: %w", seq, err)
	}
	return entryOf(m.Sequence, m.Time, m.Subject, m.Header, m.Data), nil
}

// Drop deletes the dead letter at seq.
func Drop(ctx context.Context, js jetstream.JetStream, seq uint64) error {
	s, err := js.Stream(ctx, streams.DeadLetterStream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", streams.DeadLetterStream, err)
	}
	if err := s.DeleteMsg(ctx, seq); err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) || strings.Contains(err.Error(), "no message found") {
			return fmt.Errorf("dead letter %d: %w", seq, ErrNotFound)
		}
		return fmt.Errorf("drop dead letter %d: %w", seq, err)
	}
	return nil
}

// Size is the dead-letter stream's message count and bytes.
func Size(ctx context.Context, js jetstream.JetStream) (msgs, bytes uint64, err error) {
	s, err := js.Stream(ctx, streams.DeadLetterStream)
	if err != nil {
		return 0, 0, fmt.Errorf("stream %s: %w", streams.DeadLetterStream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("stream %s: %w", streams.DeadLetterStream, err)
	}
	return info.State.Msgs, info.State.Bytes, nil
}

// Result is what Replay did.
type Result struct {
	Seq         uint64 `json:"seq"`
	Subject     string `json:"subject"`
	Stream      string `json:"stream"`
	StreamSeq   uint64 `json:"stream_seq,omitempty"` // the replayed message's sequence
	Published   bool   `json:"published"`            // false: an earlier, interrupted replay had published it
	AlreadyDone bool   `json:"already_done"`         // the dead letter was gone: replayed or dropped before
}

func markerKey(seq uint64) string { return "dlq-replay." + strconv.FormatUint(seq, 10) }

// afterPublish, in tests, interrupts Replay between its publish and the
// dead letter's deletion.
var afterPublish = func() error { return nil }

// Replay sends the dead letter at seq back to its original subject exactly
// once (see the package doc).
func Replay(ctx context.Context, js jetstream.JetStream, seq uint64) (Result, error) {
	res := Result{Seq: seq}
	kv, err := js.KeyValue(ctx, streams.StateBucket)
	if err != nil {
		return res, fmt.Errorf("bucket %s: %w", streams.StateBucket, err)
	}
	e, err := Get(ctx, js, seq)
	if errors.Is(err, ErrNotFound) {
		_ = kv.Delete(ctx, markerKey(seq))
		res.AlreadyDone = true
		return res, nil
	}
	if err != nil {
		return res, err
	}
	format := map[string]string{"encoder": streams.FormatMined, "committer": streams.FormatReport}[e.Stage]
	if format == "" || e.OrigSubject == "" {
		return res, fmt.Errorf("dead letter %d of stage %q: %w (fix the source and let the producer read it again, then drop it)",
			seq, e.Stage, ErrNotReplayable)
	}
	res.Subject = e.OrigSubject
	stream, err := js.StreamNameBySubject(ctx, e.OrigSubject)
	if err != nil {
		return res, fmt.Errorf("stream of %s: %w", e.OrigSubject, err)
	}
	res.Stream = stream
	found, err := priorReplay(ctx, js, kv, stream, e.OrigSubject, seq)
	if err != nil {
		return res, err
	}
	if found > 0 {
		res.StreamSeq = found
	} else {
		msg := nats.NewMsg(e.OrigSubject)
		msg.Data = e.Payload
		msg.Header.Set(streams.HeaderFormat, format)
		msg.Header.Set(streams.HeaderMsgID, "dlq-replay-"+strconv.FormatUint(seq, 10))
		msg.Header.Set(HeaderReplayOf, strconv.FormatUint(seq, 10))
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			return res, fmt.Errorf("replay dead letter %d to %s: %w", seq, e.OrigSubject, err)
		}
		res.StreamSeq, res.Published = ack.Sequence, !ack.Duplicate
	}
	crashpoint.Hit(CrashAfterPublish)
	if err := afterPublish(); err != nil {
		return res, err
	}
	if err := Drop(ctx, js, seq); err != nil && !errors.Is(err, ErrNotFound) {
		return res, err
	}
	if err := kv.Delete(ctx, markerKey(seq)); err != nil {
		return res, fmt.Errorf("delete replay marker of %d: %w", seq, err)
	}
	return res, nil
}

// priorReplay returns the sequence of a message in stream that replays seq
// when an interrupted replay left its marker and published, else 0. Without
// a marker it writes one with the stream's last sequence.
func priorReplay(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, stream, subject string, seq uint64) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	ent, err := kv.Get(ctx, markerKey(seq))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		info, err := s.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("stream %s: %w", stream, err)
		}
		if _, err := kv.Put(ctx, markerKey(seq), []byte(strconv.FormatUint(info.State.LastSeq, 10))); err != nil {
			return 0, fmt.Errorf("replay marker of %d: %w", seq, err)
		}
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("replay marker of %d: %w", seq, err)
	}
	after, err := strconv.ParseUint(string(ent.Value()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("replay marker of %d: %q: %w", seq, ent.Value(), err)
	}
	// Direct gets, not a consumer: the target may be a work-queue stream.
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	want := strconv.FormatUint(seq, 10)
	for n := max(after+1, info.State.FirstSeq); n <= info.State.LastSeq; n++ {
		m, err := s.GetMsg(ctx, n)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("scan %s at %d: %w", stream, n, err)
		}
		if m.Subject == subject && m.Header.Get(HeaderReplayOf) == want {
			return n, nil
		}
	}
	return 0, nil
}
