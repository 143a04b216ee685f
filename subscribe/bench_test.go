package subscribe_test

import (
	"context"
	"fmt"
	"github.com/quarrylake/quarry/committer"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/pipeline"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
	"github.com/quarrylake/quarry/subscribe"
)

// BenchmarkAckToDelivery measures, on the in-process pipeline (embedded
// NATS with sync-always, miner, two encoders, committer, local lake, the
// stages' default settings), the time from the producer's publish-ack of a
// line's frame to the line's delivery by a subscriber that follows commit
// notices, at 80% of the pipeline's throughput measured in the same run:
//
//  1. throughput: QUARRY_BENCH_SUB_LINES generated lines (default
//     1,000,000) are published as fast as the producer goes (the WAL holds
//     a backlog, so every stage runs flat out); the pipeline's rate is the
//     lines over the time from the start to the last delivery, a slight
//     underestimate (it includes the last lines' latency: a delivery rate
//     over a part of the run is no better, commits arrive in bursts);
//  2. latency: lines are published at 80% of that rate
//     (QUARRY_BENCH_SUB_FRACTION, default 0.8; producer.Config.Rate) for
//     QUARRY_BENCH_SUB_SECONDS (default 30); every delivered line's latency
//     is its delivery time minus the time its frame's ack reached the
//     producer.
//
// Reports lines/s (1), paced-lines/s (the rate asked of the producer in
// 2), delivered-lines/s (the lines of 2 over the time from its start to
// their last delivery: below paced-lines/s when the pipeline fell behind),
// p50-ms, p99-ms and max-ms over every line of 2, and its split at two
// points: ack-report-p50-ms (miner and encoder: to the time the encoder's
// report covering the line's batch is stored in QUARRY_REPORTS),
// report-commit-p50-ms (committer: to commitInfo.timestamp, taken as the
// commit is built, of the commit that released the line: for a line held
// above the high-water, the later commit whose high-water covered it) and
// commit-delivery-p50-ms (the two table commits, the notice, the
// subscriber's read of the file and of the lines before it); held-% is
// the share of lines whose file was committed above the high-water (the
// two encoders reported out of WAL order) and so released by a later
// commit, held-p50-ms and held-max-ms the time between the two commits.
//
//	go test -run '^$' -bench AckToDelivery -benchtime 1x ./subscribe/
func BenchmarkAckToDelivery(b *testing.B) {
	lines := envInt(b, "QUARRY_BENCH_SUB_LINES", 1000000)
	seconds := envInt(b, "QUARRY_BENCH_SUB_SECONDS", 30)
	fraction := 0.8
	if s := os.Getenv("QUARRY_BENCH_SUB_FRACTION"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 || f > 1 {
			b.Fatalf("QUARRY_BENCH_SUB_FRACTION=%q: want a fraction in (0, 1]", s)
		}
		fraction = f
	}
	for range b.N {
		ackToDelivery(b, lines, seconds, fraction)
	}
}

func envInt(b *testing.B, key string, def int) int {
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", key, s)
	}
	return n
}

func ackToDelivery(b *testing.B, n, seconds int, fraction float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// The split below reads each report's stream time from QUARRY_REPORTS
	// after the run, so the committer must not purge the reports it
	// committed (purge_reports is on by default).
	keepReports := false
	p, err := pipeline.Start(ctx, pipeline.Config{Server: pipeline.ServerConfig{DataDir: filepath.Join(b.TempDir(), "data"), Encoders: 2},
		Committer: committer.Config{PurgeReports: &keepReports}}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	sub, err := subscribe.Subscribe(ctx, subscribe.Config{Store: p.Store, JS: p.JS, From: subscribe.Now()})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	acks := &ackClock{JetStream: p.JS, at: map[uint64]time.Time{}}
	gen := producer.NewGenerator(1, []string{"acme"})
	publish := func(rate float64, lines int) <-chan error {
		done := make(chan error, 1)
		go func() {
			l, err := producer.NewReader(producer.Config{Tenant: "acme", Rate: rate}, producer.Deps{JS: acks}, gen.Reader("acme", lines))
			if err == nil {
				err = l.Run(ctx)
			}
			done <- err
		}()
		return done
	}

	// 1: throughput, from a backlog.
	b.ResetTimer()
	t0 := time.Now()
	pubDone := publish(0, n)
	for i := range n {
		if _, err := sub.Next(ctx); err != nil {
			b.Fatalf("Next after %d of %d lines: %v", i, n, err)
		}
	}
	rate := float64(n) / time.Since(t0).Seconds()
	if err := <-pubDone; err != nil {
		b.Fatal(err)
	}

	// 2: latency at 80% (fraction) of that rate.
	paced := fraction * rate
	m := int(paced * float64(seconds))
	start := time.Now()
	pubDone = publish(paced, m)
	type delivery struct {
		seq       uint64
		version   int64
		acked, at time.Time
	}
	got := make([]delivery, 0, m)
	for i := range m {
		r, err := sub.Next(ctx)
		if err != nil {
			b.Fatalf("Next after %d of %d paced lines: %v", i, m, err)
		}
		got = append(got, delivery{seq: r.WALSeq, version: r.Version, at: time.Now()})
	}
	elapsed := time.Since(start)
	published := <-pubDone
	b.StopTimer()
	if published != nil {
		b.Fatal(published)
	}
	// The split: when each batch's report reached QUARRY_REPORTS (its
	// stream time) and when each commit was made (commitInfo.timestamp).
	reported, err := reportTimes(ctx, p.JS)
	if err != nil {
		b.Fatal(err)
	}
	added, err := addedBy(ctx, lake.Open(p.Store), slices.MaxFunc(got, func(a, b delivery) int { return int(a.version - b.version) }).version)
	if err != nil {
		b.Fatal(err)
	}
	commitTimes := map[int64]time.Time{}
	commitTime := func(v int64) time.Time {
		ct, ok := commitTimes[v]
		if !ok {
			actions, err := lake.ReadCommit(ctx, lake.Open(p.Store).Records(), v)
			if err != nil {
				b.Fatal(err)
			}
			ct = lake.NoticeOf(streams.TableRecords, v, actions).CommitTime
			commitTimes[v] = ct
		}
		return ct
	}
	var held []time.Duration
	lat := make([]time.Duration, 0, m)
	var toReport, toCommit, fromCommit []time.Duration
	for _, d := range got {
		acked, ok := acks.ackedAt(d.seq)
		if !ok {
			b.Fatalf("line of WAL sequence %d delivered, its ack never seen", d.seq)
		}
		lat = append(lat, d.at.Sub(acked))
		ct := commitTime(d.version)
		if v, ok := added[d.seq]; ok && v < d.version {
			held = append(held, ct.Sub(commitTime(v)))
		}
		rt, ok := reported[d.seq]
		if !ok {
			b.Fatalf("WAL sequence %d in no report", d.seq)
		}
		toReport = append(toReport, rt.Sub(acked))
		toCommit = append(toCommit, ct.Sub(rt))
		fromCommit = append(fromCommit, d.at.Sub(ct))
	}
	ms := func(d []time.Duration, f float64) float64 {
		slices.Sort(d)
		return float64(d[int(f*float64(len(d)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(rate, "lines/s")
	b.ReportMetric(paced, "paced-lines/s")
	b.ReportMetric(float64(m)/elapsed.Seconds(), "delivered-lines/s")
	b.ReportMetric(ms(lat, 0.50), "p50-ms")
	b.ReportMetric(ms(lat, 0.99), "p99-ms")
	b.ReportMetric(ms(lat, 1), "max-ms")
	b.ReportMetric(ms(toReport, 0.50), "ack-report-p50-ms")
	b.ReportMetric(ms(toCommit, 0.50), "report-commit-p50-ms")
	b.ReportMetric(ms(fromCommit, 0.50), "commit-delivery-p50-ms")
	releases := map[int64]bool{}
	for _, d := range got {
		releases[d.version] = true
	}
	b.ReportMetric(float64(len(releases)), "commits")
	b.ReportMetric(100*float64(len(held))/float64(len(got)), "held-%")
	if len(held) > 0 {
		b.ReportMetric(ms(held, 0.50), "held-p50-ms")
		b.ReportMetric(ms(held, 1), "held-max-ms")
	}
	fmt.Fprintf(os.Stderr, "ack to delivery: %d lines paced at %.0f lines/s (%.0f%% of %.0f), delivered at %.0f lines/s in %d commits: p50 %.0f ms, p99 %.0f ms; %d lines (%.1f%%) held above the high-water\n",
		m, paced, 100*fraction, rate, float64(m)/elapsed.Seconds(), len(releases), ms(lat, 0.5), ms(lat, 0.99), len(held), 100*float64(len(held))/float64(len(got)))
}

// addedBy maps every WAL sequence of a records file added by versions
// 0..last to the version that added it (from the file's quarry.seqs tag):
// a line released by a later version was held above the high-water.
func addedBy(ctx context.Context, l *lake.Lake, last int64) (map[uint64]int64, error) {
	out := map[uint64]int64{}
	for v := int64(0); v <= last; v++ {
		actions, err := lake.ReadCommit(ctx, l.Records(), v)
		if err != nil {
			return nil, err
		}
		for _, f := range lake.NoticeOf(streams.TableRecords, v, actions).Adds {
			for part := range strings.SplitSeq(f.WAL, ",") {
				lo, hi, _ := strings.Cut(part, "-")
				a, err1 := strconv.ParseUint(lo, 10, 64)
				z, err2 := strconv.ParseUint(hi, 10, 64)
				if err2 != nil {
					z = a
				}
				for q := a; err1 == nil && q <= z; q++ {
					out[q] = v
				}
			}
		}
	}
	return out, nil
}

// reportTimes maps every WAL sequence a report covers to the time the
// report was stored in QUARRY_REPORTS (the last report, if several).
func reportTimes(ctx context.Context, js jetstream.JetStream) (map[uint64]time.Time, error) {
	st, err := js.Stream(ctx, streams.ReportStream)
	if err != nil {
		return nil, err
	}
	out := map[uint64]time.Time{}
	state := st.CachedInfo().State
	for seq := state.FirstSeq; seq <= state.LastSeq && seq > 0; seq++ {
		msg, err := st.GetMsg(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("report %d: %w", seq, err)
		}
		rep, err := streams.DecodeReport(msg.Data)
		if err != nil {
			return nil, fmt.Errorf("report %d: %w", seq, err)
		}
		for _, bt := range rep.Batches {
			out[bt.Seq] = msg.Time
		}
	}
	return out, nil
}

// ackClock is the pipeline's JetStream as the producer sees it, noting when
// the ack of each WAL sequence reached the producer.
type ackClock struct {
	jetstream.JetStream
	mu sync.Mutex
	at map[uint64]time.Time
}

func (a *ackClock) ackedAt(seq uint64) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[seq]
	return t, ok
}

func (a *ackClock) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := a.JetStream.PublishMsg(ctx, m, opts...)
	if err == nil {
		a.note(ack)
	}
	return ack, err
}

func (a *ackClock) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f, err := a.JetStream.PublishMsgAsync(m, opts...)
	if err != nil {
		return nil, err
	}
	w := &ackFuture{PubAckFuture: f, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	go func() {
		select {
		case ack := <-f.Ok():
			a.note(ack)
			w.ok <- ack
		case err := <-f.Err():
			w.err <- err
		}
	}()
	return w, nil
}

func (a *ackClock) note(ack *jetstream.PubAck) {
	if ack.Stream != streams.WALStream {
		return
	}
	now := time.Now()
	a.mu.Lock()
	a.at[ack.Sequence] = now
	a.mu.Unlock()
}

// ackFuture hands the producer the ack after ackClock noted it.
type ackFuture struct {
	jetstream.PubAckFuture
	ok  chan *jetstream.PubAck
	err chan error
}

func (f *ackFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *ackFuture) Err() <-chan error            { return f.err }
