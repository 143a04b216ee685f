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

// Commit notices: after each commit of the records or the templates table
// is durable, the committer publishes its notice (streams.Notice, built by
// lake.NoticeOf from the commit as the log holds it) on
// streams.NoticeSubject(table) with Nats-Msg-Id "<table>-<version>"; an
// advance's records notice first, then its templates notice. A failed
// publish is retried at the next advance; a committer that dies between a
// commit and its notice leaves the gap to the next term, which compares
// each table's last notice with the table's version and publishes the
// missing ones, in order. Subscribers do not depend on notices for
// correctness: the Delta log is the truth, and notices tell them when and
// where to read it.

// noticeUnknown: the term has not yet learnt the last notice's version.
const noticeUnknown = -2

// maxNoticeRebuild bounds how many past versions a term announces when the
// notice stream holds no notice of a table at all (a new stream on an old
// lake).
const maxNoticeRebuild = 1000

// catchUpNotices is called at term start: it learns each table's last
// notice's version and publishes the notices of the commits after it.
func (c *Committer) catchUpNotices(ctx context.Context, ts *termState) {
	ts.rec.noticed, ts.tpl.noticed = noticeUnknown, noticeUnknown
	c.notify(ctx, ts)
}

// notify publishes the notices of the records versions after
// ts.rec.noticed, up to the term's version, and then those of the
// templates table. Errors are logged and the next call retries; failing
// twice or more in a row for StallAfter shows in Ready (stall.go).
func (c *Committer) notify(ctx context.Context, ts *termState) {
	for _, st := range []*tableState{ts.rec, ts.tpl} {
		if !c.notifyTable(ctx, st) {
			return
		}
	}
}

// notifyTable publishes st's missing notices; it reports whether all are
// published.
func (c *Committer) notifyTable(ctx context.Context, st *tableState) bool {
	if st.noticed == noticeUnknown {
		last, err := c.lastNotice(ctx, st.name)
		if err != nil {
			c.bgFailed("commit notices "+st.name, err)
			c.log.Warn("last commit notice", "table", st.name, "err", err)
			return false
		}
		st.noticed = min(last, st.version)
		if last < 0 {
			st.noticed = max(-1, st.version-maxNoticeRebuild)
		}
		if st.noticed < st.version {
			c.log.Info("publishing missing commit notices", "table", st.name, "from_version", st.noticed+1, "to_version", st.version)
		}
	}
	for v := st.noticed + 1; v <= st.version; v++ {
		if err := c.publishNotice(ctx, st, v); err != nil {
			c.bgFailed("commit notices "+st.name, err)
			c.log.Warn("commit notice", "table", st.name, "version", v, "err", err)
			return false
		}
		st.noticed = v
	}
	c.bgSucceeded("commit notices " + st.name)
	return true
}

// publishNotice publishes the notice of st's version v, read back from the
// Delta log.
func (c *Committer) publishNotice(ctx context.Context, st *tableState, v int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	actions, err := lake.ReadCommit(ctx, st.t, v)
	if err != nil {
		return err
	}
	b, err := streams.EncodeNotice(lake.NoticeOf(st.name, v, actions))
	if err != nil {
		return fmt.Errorf("encode %s notice %d: %w", st.name, v, err)
	}
	if st.name == streams.TableRecords {
		crashpoint.Hit("committer.before-notice")
	}
	msg := nats.NewMsg(streams.NoticeSubject(st.name))
	msg.Header.Set(streams.HeaderMsgID, streams.NoticeMsgID(st.name, v))
	msg.Header.Set(streams.HeaderFormat, streams.FormatNotice)
	msg.Data = b
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish %s notice %d: %w", st.name, v, err)
	}
	return nil
}

// lastNotice is the version of table's last notice in the stream, -1 when
// it holds none.
func (c *Committer) lastNotice(ctx context.Context, table string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	s, err := c.js.Stream(ctx, streams.NoticeStream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", streams.NoticeStream, err)
	}
	subject := streams.NoticeSubject(table)
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last message of %s: %w", subject, err)
	}
	n, err := streams.DecodeNotice(m.Data)
	if err != nil {
		return 0, fmt.Errorf("last notice (stream sequence %d): %w", m.Sequence, err)
	}
	return n.Version, nil
}
