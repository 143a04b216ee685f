package subscribe_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarrylake/quarry/committer"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/syncbuf"
	"github.com/quarrylake/quarry/streams"
	"github.com/quarrylake/quarry/subscribe"
)

// never is a poll interval no test waits out: a subscriber configured with
// it learns of new commits from notices only.
const never = time.Hour

// collect runs Next in the background and sends every line it returns.
func collect(t *testing.T, s *subscribe.Subscription) (<-chan string, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan string, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		for {
			r, err := s.Next(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("Next: %v", err)
				}
				return
			}
			ch <- r.Line
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch, cancel
}

func receive(t *testing.T, ch <-chan string, n int) []string {
	t.Helper()
	var out []string
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("subscriber stopped after %d of %d lines", len(out), n)
			}
			out = append(out, l)
		case <-timeout:
			t.Fatalf("received %d of %d lines within 30s", len(out), n)
		}
	}
	return out
}

// TestFollowAcrossCommitterRestarts: a subscriber started mid-run reads the
// lake, then follows new commits by their notices alone (it never polls),
// through a committer restart and a committer that lost its notices (as if
// it died between each commit and its notice): it gets every line once, in
// commit order.
func TestFollowAcrossCommitterRestarts(t *testing.T) {
	e := newEnv(t)
	e.commit(3, "acme")
	e.commit(2, "acme", "beta")
	s := e.subscribe(subscribe.Config{JS: e.js, From: subscribe.Beginning(), PollInterval: never})
	ch, _ := collect(t, s)
	got := receive(t, ch, len(e.lines)) // the lake's past: the subscriber is now at the live edge

	want := e.commit(4, "beta")
	got = append(got, receive(t, ch, len(want))...)

	e.restartCommitter(e.js)
	want = e.commit(2, "acme")
	got = append(got, receive(t, ch, len(want))...)

	// Notices lost: nothing reaches the subscriber until the next term
	// publishes the missing notices.
	deaf := &deafNotices{JetStream: e.js}
	deaf.fail.Store(true)
	e.restartCommitter(deaf)
	lost := e.commit(3, "acme")
	lost = append(lost, e.commit(1, "beta", "acme")...)
	e.restartCommitter(e.js)
	got = append(got, receive(t, ch, len(lost))...)
	want = e.commit(2, "beta")
	got = append(got, receive(t, ch, len(want))...)

	sameMultiset(t, got, e.lines)
	if !slices.Equal(got, e.lines) {
		t.Fatalf("order:\n got %v\nwant %v", got, e.lines)
	}
	select {
	case l := <-ch:
		t.Fatalf("extra line %q", l)
	default:
	}
}

// TestFollowAcrossNATSRestart: a subscriber waiting at the live edge for
// a notice (it never polls the log) while the NATS server restarts, its
// notice consumer lost with it, gets the commits made after the restart.
func TestFollowAcrossNATSRestart(t *testing.T) {
	e := newEnv(t)
	e.commit(2, "acme")
	s := e.subscribe(subscribe.Config{JS: e.js, PollInterval: never})
	ch, _ := collect(t, s)
	got := receive(t, ch, 2)
	waitNoticeConsumer(t, e) // the subscriber waits on its notice consumer
	// The committer is restarted around NATS's restart: this test is about
	// the subscriber (a committer through a NATS restart sometimes took
	// over 30s to stop at the test's end).
	e.cmt.stop(t)
	e.srv = e.srv.Restart(t)
	e.cmt = e.startCommitter(e.js)
	want := e.commit(3, "beta")
	got = append(got, receive(t, ch, len(want))...)
	want = e.commit(1, "acme")
	got = append(got, receive(t, ch, len(want))...)
	if !slices.Equal(got, e.lines) {
		t.Fatalf("got %v\nwant %v", got, e.lines)
	}
}

// TestFollowNATSDownAtStart: a subscriber that reaches the live edge while
// NATS is down cannot start its notice consumer; it starts it once NATS is
// back, without waiting out its poll interval.
func TestFollowNATSDownAtStart(t *testing.T) {
	e := newEnv(t)
	e.commit(2, "acme")
	// The committer stops first: this test is about the subscriber (see
	// TestFollowAcrossNATSRestart).
	e.cmt.stop(t)
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	logs := &syncbuf.Buffer{}
	s := e.subscribe(subscribe.Config{JS: e.js, PollInterval: never, Log: slog.New(slog.NewTextHandler(logs, nil))})
	ch, _ := collect(t, s)
	got := receive(t, ch, 2)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(logs.String(), "polling the Delta log instead") {
		if time.Now().After(deadline) {
			t.Fatalf("the subscriber never tried its notice consumer; log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.srv = e.srv.Restart(t)
	e.cmt = e.startCommitter(e.js)
	want := e.commit(3, "beta")
	got = append(got, receive(t, ch, len(want))...)
	if !slices.Equal(got, e.lines) {
		t.Fatalf("got %v\nwant %v", got, e.lines)
	}
}

// waitNoticeConsumer waits until the notice stream has a consumer.
func waitNoticeConsumer(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		st, err := e.js.Stream(ctx, streams.NoticeStream)
		if err == nil && st.CachedInfo().State.Consumers > 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no consumer on %s: %v", streams.NoticeStream, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestResumeFromCursor: a subscriber stopped at many points (inside a
// file, at a file's end, at the end of the lake, at the live edge, inside
// a live file) and resumed from its cursor gets no gap and no duplicate.
func TestResumeFromCursor(t *testing.T) {
	e := newEnv(t)
	e.commit(3, "acme", "beta")
	e.commit(2, "acme")
	e.commit(1, "beta")
	lake := len(e.lines) // 3+3+2+1
	var got []string
	from := subscribe.Beginning()
	resume := func(n int) {
		t.Helper()
		s := e.subscribe(subscribe.Config{JS: e.js, From: from, PollInterval: never})
		got = append(got, take(t, s, n)...)
		s.Close()
		// The cursor survives as text.
		c, err := subscribe.ParseCursor(s.Cursor().String())
		if err != nil || c != s.Cursor() {
			t.Fatalf("cursor %s round trip: %v, %v", s.Cursor(), c, err)
		}
		from = subscribe.After(c)
	}
	for _, n := range []int{1, 2, 1, 2, 3} { // inside a file, at a file's end, across files and commits
		resume(n)
	}
	if len(got) != lake {
		t.Fatalf("setup: read %d of the lake's %d lines", len(got), lake)
	}
	// Stopped exactly at the end of the lake; the next lines are live.
	s := e.subscribe(subscribe.Config{JS: e.js, From: from, PollInterval: never})
	ch, stop := collect(t, s)
	e.commit(2, "acme")
	got = append(got, receive(t, ch, 2)...)
	stop()
	from = subscribe.After(s.Cursor())
	e.commit(3, "beta")
	resume(1) // inside a live file
	s = e.subscribe(subscribe.Config{JS: e.js, From: from, PollInterval: never})
	ch, _ = collect(t, s)
	got = append(got, receive(t, ch, 2)...)
	e.commit(1, "acme")
	got = append(got, receive(t, ch, 1)...)
	if !slices.Equal(got, e.lines) {
		t.Fatalf("resumed deliveries:\n got %v\nwant %v", got, e.lines)
	}
}

// TestCatchUpWithoutNotices: a subscriber further behind than the notice
// stream retains (the stream purged) catches up from the Delta log alone,
// then follows the notices of new commits.
func TestCatchUpWithoutNotices(t *testing.T) {
	e := newEnv(t)
	e.commit(2, "acme")
	s := e.subscribe(subscribe.Config{JS: e.js, PollInterval: never})
	got := take(t, s, 2)
	s.Close()
	e.commit(3, "beta")
	e.commit(1, "acme", "beta")
	ctx := context.Background()
	st, err := e.js.Stream(ctx, streams.NoticeStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	s = e.subscribe(subscribe.Config{JS: e.js, From: subscribe.After(s.Cursor()), PollInterval: never})
	ch, _ := collect(t, s)
	got = append(got, receive(t, ch, 5)...)
	e.commit(2, "beta")
	got = append(got, receive(t, ch, 2)...)
	if !slices.Equal(got, e.lines) {
		t.Fatalf("got %v\nwant %v", got, e.lines)
	}
}

// TestPollWithoutNATS: without NATS, the subscriber finds commits in the
// Delta log.
func TestPollWithoutNATS(t *testing.T) {
	e := newEnv(t)
	e.commit(1, "acme")
	s := e.subscribe(subscribe.Config{From: subscribe.Now()})
	ch, _ := collect(t, s)
	want := e.commit(2, "beta")
	if got := receive(t, ch, 2); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestFilters(t *testing.T) {
	e := newEnv(t)
	e.commit(2, "acme", "beta")
	e.commit(3, "beta")
	var beta, query []string
	for _, l := range e.lines {
		if strings.Contains(l, "beta") {
			beta = append(beta, l)
		}
		if strings.HasSuffix(l, "-1") {
			query = append(query, l)
		}
	}
	s := e.subscribe(subscribe.Config{Tenant: "beta"})
	if got := take(t, s, len(beta)); !slices.Equal(got, beta) {
		t.Fatalf("tenant beta: got %v, want %v", got, beta)
	}
	quiet(t, s)
	s = e.subscribe(subscribe.Config{Query: `/-1$/`})
	if got := take(t, s, len(query)); !slices.Equal(got, query) {
		t.Fatalf("query: got %v, want %v", got, query)
	}
	quiet(t, s)
	if _, err := subscribe.Subscribe(context.Background(), subscribe.Config{Store: e.store, Query: "x | count"}); err == nil {
		t.Error("an aggregating query was accepted")
	}
}

func TestFromVersionAndTime(t *testing.T) {
	e := newEnv(t)
	first := e.commit(1, "acme")
	mid := time.Now()
	second := e.commit(2, "beta")
	s := e.subscribe(subscribe.Config{From: subscribe.Time(mid)})
	if got := take(t, s, 2); !slices.Equal(got, second) {
		t.Fatalf("from time: got %v, want %v", got, second)
	}
	v := s.Cursor().Version
	s = e.subscribe(subscribe.Config{From: subscribe.Version(v)})
	if got := take(t, s, 2); !slices.Equal(got, second) {
		t.Fatalf("from version %d: got %v, want %v", v, got, second)
	}
	s = e.subscribe(subscribe.Config{From: subscribe.Version(0)})
	if got := take(t, s, 3); !slices.Equal(got, append(first, second...)) {
		t.Fatalf("from version 0: got %v", got)
	}
}

func TestParse(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct{ in, want string }{
		{"", "beginning"}, {"beginning", "beginning"}, {"now", "now"}, {"12", "12"},
		{"2026-11-29T10:00:00Z", "2026-11-29T10:00:00Z"}, {"1h", "2026-11-29T11:00:00Z"},
		{"cursor:v3.f1.r7", "cursor:v3.f1.r7"},
	} {
		f, err := subscribe.ParseFrom(tt.in, now)
		if err != nil || f.String() != tt.want {
			t.Errorf("ParseFrom(%q) = %v, %v; want %s", tt.in, f, err, tt.want)
		}
	}
	for _, bad := range []string{"soon", "cursor:v1.f2", "cursor:x1.f2.r3", "cursor:v-1.f0.r0", "-3"} {
		if _, err := subscribe.ParseFrom(bad, now); err == nil {
			t.Errorf("ParseFrom(%q) accepted", bad)
		}
	}
}

// TestCompactedBeforeRead: files compacted and vacuumed before a lagging
// subscriber read them: their rows come from the compacted file (whose own
// add, dataChange=false, delivers nothing), once, in order, for a
// subscriber resuming inside such a file and for one from the beginning.
func TestCompactedBeforeRead(t *testing.T) {
	e := newEnv(t)
	e.commit(3, "acme")
	e.commit(2, "acme", "beta")
	e.commit(2, "acme")
	s := e.subscribe(subscribe.Config{PollInterval: never})
	got := take(t, s, 2) // inside the first file
	s.Close()

	e.cmt.stop(t)
	ctx := context.Background()
	res, err := committer.Compact(ctx, committer.Config{Name: "compact", LeaseTTL: 600 * time.Millisecond, OpTimeout: 5 * time.Second},
		committer.Deps{JS: e.js, Store: e.store}, committer.CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Compacted < 3 {
		t.Fatalf("compaction %+v: want acme's files rewritten", res)
	}
	gone, err := lake.Open(e.store).Vacuum(ctx, lake.VacuumOptions{Now: func() time.Time { return time.Now().Add(30 * 24 * time.Hour) }})
	if err != nil || len(gone) < 3 {
		t.Fatalf("vacuum deleted %v: %v", gone, err)
	}
	e.cmt = e.startCommitter(e.js)

	s = e.subscribe(subscribe.Config{JS: e.js, From: subscribe.After(s.Cursor()), PollInterval: never})
	ch, _ := collect(t, s)
	got = append(got, receive(t, ch, len(e.lines)-2)...)
	e.commit(2, "beta")
	got = append(got, receive(t, ch, 2)...)
	if !slices.Equal(got, e.lines) {
		t.Fatalf("resumed:\n got %v\nwant %v", got, e.lines)
	}
	all := e.subscribe(subscribe.Config{})
	if got := take(t, all, len(e.lines)); !slices.Equal(got, e.lines) {
		t.Fatalf("from the beginning:\n got %v\nwant %v", got, e.lines)
	}
	quiet(t, all)
}

// TestWALOrderWithinTenant: one commit holds a tenant's rows in several
// files (two date partitions, files listed out of WAL order): they are
// delivered in WAL order within the tenant, from the lake and live, and a
// subscriber resumed after every record gets the same order.
func TestWALOrderWithinTenant(t *testing.T) {
	e := newEnv(t)
	commit := func() {
		e.commitBatches([]batch{
			{tenant: "acme", date: "2026-01-02", n: 2},
			{tenant: "beta", date: "2026-01-01", n: 1},
			{tenant: "acme", date: "2026-01-01", n: 3},
			{tenant: "acme", date: "2026-01-02", n: 1},
		}, []int{2, 0, 1, 3})
	}
	commit()
	byTenant := func(lines []string) map[string][]string {
		out := map[string][]string{}
		for _, l := range lines {
			tenant, _, _ := strings.Cut(strings.TrimPrefix(l, "line "), "-")
			out[tenant] = append(out[tenant], l)
		}
		return out
	}
	s := e.subscribe(subscribe.Config{JS: e.js, PollInterval: never})
	ch, _ := collect(t, s)
	got := receive(t, ch, len(e.lines))
	commit() // live
	got = append(got, receive(t, ch, len(e.lines)/2)...)
	want := byTenant(e.lines)
	if g := byTenant(got); !slices.Equal(g["acme"], want["acme"]) || !slices.Equal(g["beta"], want["beta"]) {
		t.Fatalf("not in WAL order within a tenant:\n got %v\nwant %v", g, want)
	}
	var resumed []string
	from := subscribe.Beginning()
	for range e.lines {
		s := e.subscribe(subscribe.Config{From: from})
		resumed = append(resumed, take(t, s, 1)...)
		s.Close()
		from = subscribe.After(s.Cursor())
	}
	if !slices.Equal(resumed, got) {
		t.Fatalf("resumed after every record:\n got %v\nwant %v", resumed, got)
	}
}

// TestTemplateCommittedLater: the committer commits an accepted report's
// files at once, above the high-water; a file may then use a template
// version born in an earlier batch that another encoder has not reported
// yet. The subscriber waits for that version rather than failing, and
// delivers every line once.
func TestTemplateCommittedLater(t *testing.T) {
	e := newEnv(t)
	logs := &syncbuf.Buffer{}
	s := e.subscribe(subscribe.Config{JS: e.js, PollInterval: never, Log: slog.New(slog.NewTextHandler(logs, nil))})
	ch, _ := collect(t, s)
	// Encoder A: batches 1 and 3; batch 3's rows use version 2 of the
	// template, born in batch 2. The high-water stops at 1, and both files
	// are committed.
	e.commitUpTo([]batch{
		{tenant: "acme", date: "2026-01-01", n: 2, seq: 1, prev: 0},
		{tenant: "acme", date: "2026-01-01", n: 3, seq: 3, prev: 2, version: 2, tpls: []int32{}},
	}, nil, 1)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "template version not committed yet") {
		if time.Now().After(deadline) {
			t.Fatalf("the subscriber never waited for the template version; log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Encoder B: batch 2, with version 2.
	e.commitUpTo([]batch{{tenant: "acme", date: "2026-01-01", n: 1, seq: 2, prev: 1, version: 2}}, nil, 3)
	sameMultiset(t, receive(t, ch, len(e.lines)), e.lines)
}

// commitBehind is the lake's store, in which the first read of one records
// log entry misses and a commit is made before the miss returns: the
// subscriber sees version v missing, and then the table at v.
type commitBehind struct {
	objstore.Store
	key    string
	armed  atomic.Bool
	missed chan struct{} // closed at the miss
	commit chan struct{} // closed once the test committed
	once   sync.Once
}

func (c *commitBehind) Get(ctx context.Context, key string) ([]byte, error) {
	first := false
	if key == c.key && c.armed.Load() {
		c.once.Do(func() { first = true })
	}
	if !first {
		return c.Store.Get(ctx, key)
	}
	close(c.missed)
	<-c.commit
	return nil, fmt.Errorf("get %s: %w", key, objstore.ErrNotFound)
}

// TestCommitBetweenReads: a commit made between the subscriber's read of
// a missing log entry and its look at the table is delivered, not taken
// for a version gone from the log.
func TestCommitBetweenReads(t *testing.T) {
	e := newEnv(t)
	e.commit(1, "acme")
	v, err := lake.Open(e.store).Records().Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cb := &commitBehind{Store: e.store, key: lake.Open(e.store).Records().CommitKey(v.Version + 1), missed: make(chan struct{}), commit: make(chan struct{})}
	s := e.subscribe(subscribe.Config{Store: cb, From: subscribe.Now(), PollInterval: never})
	cb.armed.Store(true)
	ch, _ := collect(t, s)
	<-cb.missed
	want := e.commit(2, "beta")
	close(cb.commit)
	if got := receive(t, ch, 2); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestRetainedBeforeRead: a file that retention cut (one row past the
// retention, two not) and vacuum deleted before a lagging subscriber read
// it: the kept rows come from the retention's rewrite (an add with
// dataChange false, of the same commit as the file's remove), in order;
// the expired row is not delivered.
func TestRetainedBeforeRead(t *testing.T) {
	e := newEnv(t)
	first := e.commitBatches([]batch{{tenant: "acme", n: 1, ages: []time.Duration{time.Hour}}}, nil)
	cut := e.commitBatches([]batch{{tenant: "acme", n: 3, ages: []time.Duration{40 * 24 * time.Hour, time.Hour, 2 * time.Hour}}}, nil)
	s := e.subscribe(subscribe.Config{PollInterval: never})
	got := take(t, s, 1)
	s.Close()

	e.cmt.stop(t)
	ctx := context.Background()
	cfg := committer.Config{Name: "compact", LeaseTTL: 600 * time.Millisecond, OpTimeout: 5 * time.Second,
		Retention: committer.Retention{Default: committer.Age(30 * 24 * time.Hour)}}
	res, err := committer.Compact(ctx, cfg, committer.Deps{JS: e.js, Store: e.store}, committer.CompactOptions{Retention: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Expired != 1 || res.Rewritten != 1 {
		t.Fatalf("retention %+v: want the second file cut", res)
	}
	gone, err := lake.Open(e.store).Vacuum(ctx, lake.VacuumOptions{Now: func() time.Time { return time.Now().Add(30 * 24 * time.Hour) }})
	if err != nil || len(gone) < 1 {
		t.Fatalf("vacuum deleted %v: %v", gone, err)
	}
	e.cmt = e.startCommitter(e.js)

	s = e.subscribe(subscribe.Config{JS: e.js, From: subscribe.After(s.Cursor()), PollInterval: never})
	ch, _ := collect(t, s)
	got = append(got, receive(t, ch, 2)...)
	want := append(slices.Clone(first), cut[1:]...)
	if !slices.Equal(got, want) {
		t.Fatalf("resumed:\n got %v\nwant %v", got, want)
	}
}
