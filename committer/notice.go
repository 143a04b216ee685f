package committer

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/streams"
)

// Commit notices: after each commit of the records table is durable, the
// committer publishes its notice (streams.Notice, built by lake.NoticeOf
// from the commit as the log holds it) on streams.NoticeSubject("records")
// with Nats-Msg-Id "records-<version>". A failed publish is retried at the
// next advance; a committer that dies between a commit and its notice
// leaves the gap to the next term, which compares the last notice's
// version with the table's and publishes the missing ones, in order.
// Subscribers do not depend on notices for correctness: the Delta log is
// the truth, and notices tell them when and where to read it.

// noticeUnknown: the term has not yet learnt the last notice's version.
const noticeUnknown = -2

// maxNoticeRebuild bounds how many past versions a term announces when the
// notice stream holds no notice at all (a new stream on an old lake).
const maxNoticeRebuild = 1000

// catchUpNotices is called at term start: it learns the last notice's
// version and publishes the notices of the commits after it.
func (c *Committer) catchUpNotices(ctx context.Context, ts *termState) {
	ts.noticed = noticeUnknown
	c.notify(ctx, ts)
}

// notify publishes the notices of the records versions after ts.noticed,
// up to the term's version. Errors are logged: the next call retries.
func (c *Committer) notify(ctx context.Context, ts *termState) {
	if ts.noticed == noticeUnknown {
		last, err := c.lastNotice(ctx)
		if err != nil {
			c.log.Warn("last commit notice", "err", err)
			return
		}
		ts.noticed = min(last, ts.rec.version)
		if last < 0 {
			ts.noticed = max(-1, ts.rec.version-maxNoticeRebuild)
		}
		if ts.noticed < ts.rec.version {
			c.log.Info("publishing missing commit notices", "from_version", ts.noticed+1, "to_version", ts.rec.version)
		}
	}
	for v := ts.noticed + 1; v <= ts.rec.version; v++ {
		if err := c.publishNotice(ctx, ts, v); err != nil {
			c.log.Warn("commit notice", "version", v, "err", err)
			return
		}
		ts.noticed = v
	}
}

// publishNotice publishes the notice of records version v, read back from
// the Delta log.
func (c *Committer) publishNotice(ctx context.Context, ts *termState, v int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	actions, err := lake.ReadCommit(ctx, ts.rec.t, v)
	if err != nil {
		return err
	}
	b, err := streams.EncodeNotice(lake.NoticeOf(streams.TableRecords, v, actions))
	if err != nil {
		return fmt.Errorf("encode notice %d: %w", v, err)
	}
	crashpoint.Hit("committer.before-notice")
	msg := nats.NewMsg(streams.NoticeSubject(streams.TableRecords))
	msg.Header.Set(streams.HeaderMsgID, streams.NoticeMsgID(streams.TableRecords, v))
	msg.Header.Set(streams.HeaderFormat, streams.FormatNotice)
	msg.Data = b
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish notice %d: %w", v, err)
	}
	return nil
}

// lastNotice is the version of the last records notice in the stream, -1
// when it holds none.
func (c *Committer) lastNotice(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	s, err := c.js.Stream(ctx, streams.NoticeStream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", streams.NoticeStream, err)
	}
	m, err := s.GetLastMsgForSubject(ctx, streams.NoticeSubject(streams.TableRecords))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last message of %s: %w", streams.NoticeSubject(streams.TableRecords), err)
	}
	n, err := streams.DecodeNotice(m.Data)
	if err != nil {
		return 0, fmt.Errorf("last notice (stream sequence %d): %w", m.Sequence, err)
	}
	return n.Version, nil
}
