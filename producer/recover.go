package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/streams"
)

// span is the offset range [first, next) of one frame in the WAL.
type span struct{ first, next uint64 }

// walFrame is a frame of a source found in the WAL: its offsets and its
// WAL sequence.
type walFrame struct {
	span
	seq uint64
}

// scanWAL lists the frames of source among the WAL messages on subject
// stored at or after since. It reads headers only (Nats-Msg-Id and
// HeaderNextOffset), so it is cheap even over many large frames.
func scanWAL(ctx context.Context, js jetstream.JetStream, subject, source string, since time.Time) ([]walFrame, error) {
	st, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		return nil, fmt.Errorf("scan wal: %w", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return nil, fmt.Errorf("scan wal: stream info: %w", err)
	}
	if info.State.Subjects[subject] == 0 || info.State.LastTime.Before(since) {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		MaxResetAttempts: streams.OrderedResetAttempts,
		FilterSubjects:   []string{subject},
		DeliverPolicy:    jetstream.DeliverByStartTimePolicy,
		OptStartTime:     &since,
		HeadersOnly:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("scan wal: consumer: %w", err)
	}
	prefix := source + ":"
	var frames []walFrame
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("scan wal: %w", err)
		}
		batch, err := cons.Fetch(1024, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, fmt.Errorf("scan wal: fetch: %w", err)
		}
		n, caughtUp := 0, false
		for msg := range batch.Messages() {
			n++
			md, err := msg.Metadata()
			if err != nil {
				continue
			}
			if md.NumPending == 0 {
				caughtUp = true
			}
			id := msg.Headers().Get(streams.HeaderMsgID)
			if !strings.HasPrefix(id, prefix) {
				continue
			}
			first, err1 := strconv.ParseUint(id[len(prefix):], 10, 64)
			next, err2 := strconv.ParseUint(msg.Headers().Get(HeaderNextOffset), 10, 64)
			if err1 != nil || err2 != nil || next < first {
				continue // not a frame of ours, or one without the header
			}
			frames = append(frames, walFrame{span{first, next}, md.Sequence.Stream})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoHeartbeat) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("scan wal: fetch: %w", err)
		}
		if caughtUp || n == 0 {
			return frames, nil
		}
	}
}

// firstSeqAfter is the lowest WAL sequence among the frames that hold
// lines at or after pos (0 if none): until a position past them is saved,
// a restart must read them back, so they bound the source's WAL floor.
func firstSeqAfter(frames []walFrame, pos uint64) uint64 {
	var lo uint64
	for _, f := range frames {
		if f.next > pos && f.next > f.first && (lo == 0 || f.seq < lo) {
			lo = f.seq
		}
	}
	return lo
}

// coveredAfter returns the offset ranges at or after pos already held by
// frames in the WAL, sorted and merged, and the highest NextOffset among
// them (0 if none).
func coveredAfter(spans []span, pos uint64) ([]span, uint64) {
	var cov []span
	var hi uint64
	for _, s := range spans {
		if s.next <= pos || s.next == s.first {
			continue
		}
		s.first = max(s.first, pos)
		cov = append(cov, s)
		hi = max(hi, s.next)
	}
	slices.SortFunc(cov, func(a, b span) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	var out []span
	for _, s := range cov {
		if n := len(out); n > 0 && s.first <= out[n-1].next {
			out[n-1].next = max(out[n-1].next, s.next)
			continue
		}
		out = append(out, s)
	}
	return out, hi
}
