package committer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/streams"
)

// process judges one report message and returns how many messages the
// stream holds after it.
func (c *Committer) process(ctx context.Context, ts *termState, msg jetstream.Msg) (uint64, error) {
	md, err := msg.Metadata()
	if err != nil {
		return 1, fmt.Errorf("report metadata: %w", err)
	}
	seq := md.Sequence.Stream
	r, derr := streams.DecodeReport(msg.Data())
	if derr == nil && !validKey(streams.VerdictKey(r.ID)) {
		derr = fmt.Errorf("%w: report id %q cannot be a verdict key", streams.ErrMalformed, r.ID)
	}
	if derr != nil {
		ts.arb.track(seq, 0)
		return md.NumPending, c.malformed(ctx, ts, msg, seq, derr)
	}
	var maxSeq uint64
	for _, b := range r.Batches {
		maxSeq = max(maxSeq, b.Seq)
	}
	defer ts.arb.track(seq, maxSeq)
	if d := ts.arb.decide(r); d.known {
		c.m.reports.WithLabelValues(verdictLabel(d.verdict)).Inc()
		return md.NumPending, nil
	}
	v, found, err := c.getVerdict(ctx, ts, r.ID)
	if err != nil {
		return 0, err
	}
	if !found {
		d := ts.arb.decide(r)
		v = d.verdict
		if !d.final {
			if v, err = c.checkFiles(ctx, r); err != nil {
				return 0, err
			}
		}
		if v, err = c.putVerdict(ctx, ts, v); err != nil {
			return 0, err
		}
	}
	if err := ts.arb.apply(r, seq, v); err != nil {
		c.log.Error("report kept out of the lake", "report", r.ID, "err", err)
		c.m.reports.WithLabelValues("conflict").Inc()
		return md.NumPending, c.deadLetter(ctx, msg, seq, err.Error())
	}
	c.m.reports.WithLabelValues(verdictLabel(v)).Inc()
	if !v.Accepted {
		c.log.Info("report rejected", "report", r.ID, "reason", v.Reason, "duplicates", len(v.Duplicates))
	}
	return md.NumPending, nil
}

func verdictLabel(v streams.Verdict) string {
	if v.Accepted {
		return "accepted"
	}
	return "rejected"
}

func (c *Committer) getVerdict(ctx context.Context, ts *termState, id string) (streams.Verdict, bool, error) {
	var v streams.Verdict
	var found bool
	err := c.retry(ctx, "read verdict", func(ctx context.Context) error {
		ent, err := ts.kvs.verdicts.Get(ctx, streams.VerdictKey(id))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read verdict %s: %w", id, err)
		}
		got, err := streams.DecodeVerdict(ent.Value())
		if err != nil {
			// An unreadable stored verdict cannot be reused; decide anew
			// and overwrite it below.
			c.log.Error("stored verdict unreadable", "report", id, "err", err)
			return nil
		}
		v, found = *got, true
		return nil
	})
	return v, found, err
}

// putVerdict stores v create-only; when a verdict is already stored (written
// concurrently by a fenced committer) that one wins and is returned.
func (c *Committer) putVerdict(ctx context.Context, ts *termState, v streams.Verdict) (streams.Verdict, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return v, fmt.Errorf("marshal verdict: %w", err)
	}
	out := v
	err = c.retry(ctx, "store verdict", func(ctx context.Context) error {
		key := streams.VerdictKey(v.ReportID)
		_, err := ts.kvs.verdicts.Create(ctx, key, b)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("store verdict %s: %w", v.ReportID, err)
		}
		ent, err := ts.kvs.verdicts.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("read verdict %s: %w", v.ReportID, err)
		}
		if got, err := streams.DecodeVerdict(ent.Value()); err == nil {
			out = *got
			return nil
		}
		_, err = ts.kvs.verdicts.Update(ctx, key, b, ent.Revision())
		return err
	})
	return out, err
}

// checkFiles Stat-checks every file of r: present with the reported size.
func (c *Committer) checkFiles(ctx context.Context, r *streams.Report) (streams.Verdict, error) {
	var reasons []string
	for _, f := range r.Files {
		key := c.table(f.Table).FileKey(f.Path)
		err := c.retry(ctx, "stat "+key, func(ctx context.Context) error {
			info, err := c.store.Stat(ctx, key)
			switch {
			case errors.Is(err, objstore.ErrNotFound):
				reasons = append(reasons, fmt.Sprintf("file %s is missing", key))
			case err != nil:
				return fmt.Errorf("stat %s: %w", key, err)
			case info.Size != f.Size:
				reasons = append(reasons, fmt.Sprintf("file %s has %d bytes, the report says %d", key, info.Size, f.Size))
			}
			return nil
		})
		if err != nil {
			return streams.Verdict{}, err
		}
	}
	if len(reasons) > 0 {
		return streams.Verdict{ReportID: r.ID, Reason: strings.Join(reasons, "; ")}, nil
	}
	return streams.Verdict{ReportID: r.ID, Accepted: true}, nil
}

func (c *Committer) table(name string) *delta.Table {
	if name == streams.TableTemplates {
		return c.templates
	}
	return c.records
}

// malformed rejects a report that does not decode (when it has an id an
// encoder waits on) and dead-letters it.
func (c *Committer) malformed(ctx context.Context, ts *termState, msg jetstream.Msg, seq uint64, derr error) error {
	c.m.reports.WithLabelValues("malformed").Inc()
	var probe struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(msg.Data(), &probe)
	if probe.ID != "" && validKey(streams.VerdictKey(probe.ID)) {
		if _, found, err := c.getVerdict(ctx, ts, probe.ID); err != nil || found {
			return err // decided in an earlier term: dead-lettered then
		}
		if _, err := c.putVerdict(ctx, ts, streams.Verdict{ReportID: probe.ID, Reason: derr.Error()}); err != nil {
			return err
		}
	}
	c.log.Warn("malformed report", "stream_seq", seq, "report", probe.ID, "err", derr)
	return c.deadLetter(ctx, msg, seq, derr.Error())
}

// validKey is the KV key rule of nats.go (unexported there): a verdict
// cannot be stored under any other key, so such a report is malformed.
func validKey(k string) bool {
	if k == "" || k[0] == '.' || k[len(k)-1] == '.' || strings.Contains(k, "..") {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-/_=.", c) >= 0) {
			return false
		}
	}
	return true
}

func (c *Committer) deadLetter(ctx context.Context, msg jetstream.Msg, seq uint64, reason string) error {
	c.m.deadLetters.Inc()
	return c.retry(ctx, "dead-letter", func(ctx context.Context) error {
		return streams.DeadLetter(ctx, c.js, "committer", msg.Subject(), seq, msg.Data(), reason, nil)
	})
}
