package miner

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/streams"
)

// deadLetter retries fn until it succeeds or ctx ends.
func (r *runner) deadLetter(ctx context.Context, fn func(context.Context) error) error {
	blocked := false
	err := backoff.Retry(ctx, r.cfg.retryPolicy(), func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
		defer cancel()
		return fn(cctx)
	}, func(err error, wait time.Duration) {
		if !blocked {
			blocked = true
			r.setWaiting(fmt.Sprintf("dead-lettering blocked since %s: %v", time.Now().UTC().Format(time.RFC3339), err))
		}
		r.log.Warn("dead-letter, retrying", "err", err, "backoff", wait)
	})
	if blocked {
		r.setWaiting("")
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// deadLetterRecord sends record i of in's frame to the dead-letter stream as
// a one-record frame (streams.FormatFrame; source, tenant, offsets, ts and
// its source, text and attrs kept).
func (r *runner) deadLetterRecord(ctx context.Context, in *item, i int, why string) error {
	f := in.frame
	one := streams.Frame{Source: f.Source, Tenant: f.Tenant, FirstOffset: f.FirstOffset, NextOffset: f.NextOffset,
		Records: f.Records[i : i+1]}
	payload := streams.AppendFrame(nil, &one)
	hdr := nats.Header{}
	hdr.Set(streams.HeaderFormat, streams.FormatFrame)
	hdr.Set(streams.HeaderSource, f.Source)
	hdr.Set(streams.HeaderOrigSeq, strconv.FormatUint(in.seq, 10))
	hdr.Set(HeaderRecordIndex, strconv.Itoa(i))
	// streams.DeadLetter derives the Nats-Msg-Id from the WAL sequence
	// only when it is given one; records of one frame need their own.
	hdr.Set(streams.HeaderMsgID, fmt.Sprintf("dlq-%s-%d-%d", Stage, in.seq, i))
	reason := fmt.Sprintf("WAL seq %d record %d: %s", in.seq, i, why)
	if err := r.deadLetter(ctx, func(ctx context.Context) error {
		return streams.DeadLetter(ctx, r.js, Stage, in.subject, 0, payload, reason, hdr)
	}); err != nil {
		return err
	}
	r.log.Warn("dead-lettered record", "wal_seq", in.seq, "index", i, "tenant", f.Tenant, "source", f.Source, "reason", why)
	return nil
}
