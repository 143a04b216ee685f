package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/quarrybin"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
	"github.com/quarrylake/quarry/subscribe"
)

// TestMultiProcessSubscriberCommitterKilled follows the lake with a
// subscriber (package subscribe, in this process) while the producers,
// miner, two encoders, committer and NATS server run as processes, and checks
// that it gets every input line exactly once, each tenant's in input order.
//
// Everything lands mid-stream by construction: the producers read stdin,
// and each part of their input is written only after the fault before it.
//   - part 1 (both tenants) flows while the subscriber starts, from the
//     beginning of the lake, once the first commit is in: it reads the
//     lake's past, then follows notices;
//   - the committer is SIGKILLed once part 1 is delivered and announced; a
//     second committer, with the crash point committer.before-notice set to
//     hang, takes over;
//   - part 2, one line, becomes one commit whose notice the second
//     committer never publishes: it is SIGKILLed while it holds there (the
//     test checks the records table is a version ahead of the last notice);
//   - the NATS server is SIGKILLed and restarted, and a third committer
//     starts: it must publish the missing notice, or the subscriber, which
//     never polls the log, does not get the line;
//   - part 3 flows.
//
// The subscriber stops at random points (seeded: QUARRY_SUBSCRIBE_SEED,
// logged) and resumes from its cursor saved as text, inside files, at the
// boundary between the lake and the live tail and while waiting at it.
func TestMultiProcessSubscriberCommitterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test builds the binary and runs for about a minute")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("QUARRY_SUBSCRIBE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("QUARRY_SUBSCRIBE_SEED %q: %v", s, err)
		}
		seed = v
	}
	t.Logf("QUARRY_SUBSCRIBE_SEED=%d", seed)
	dir := t.TempDir()
	bin := quarrybin.Path(t, dir)
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	lakeDir := filepath.Join(dir, "lake")
	cfgFile := filepath.Join(dir, "quarry.yaml")
	if err := os.WriteFile(cfgFile, []byte("encoder:\n  max_age: 300ms\ncommitter:\n  lease_ttl: 3s\n  commit_interval: 200ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serverArgs := []string{"server", "--data", filepath.Join(dir, "nats"), "--port", fmt.Sprint(port)}
	srv := start(t, bin, "server", serverArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nc, js, err := natsutil.Connect(ctx, natsutil.ConnConfig{URL: url}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, srv.out.String())
	}
	defer nc.Close()
	if err := streams.Ensure(ctx, js, streams.Config{}.Defaults()); err != nil {
		t.Fatal(err)
	}
	store, err := objstore.Open(ctx, lakeDir, objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	lk := lake.Open(store)

	common := []string{"--nats", url, "--config", cfgFile}
	committerArgs := append([]string{"committer", "--lake", lakeDir}, common...)
	cmt := start(t, bin, "committer-1", committerArgs...)
	start(t, bin, "miner", append([]string{"miner"}, common...)...)
	// Two encoders: their files reach the committer in any order, so files
	// are committed above the high-water and the subscriber must hold them
	// to deliver each tenant's lines in WAL order.
	start(t, bin, "encoder-a", append([]string{"encoder", "--lake", lakeDir, "--name", "a"}, common...)...)
	start(t, bin, "encoder-b", append([]string{"encoder", "--lake", lakeDir, "--name", "b"}, common...)...)

	tenants := []string{"acme", "globex"}
	gen := producer.NewGenerator(11, tenants)
	input := map[string][]string{}
	var want []string
	parts := map[string][3][]string{}
	var prods []*proc
	feeds := map[string]chan []string{}
	feedErr := make(chan error, len(tenants))
	for _, tn := range tenants {
		lines := gen.Lines(tn, 8000)
		p := [3][]string{lines[:4000], nil, lines[4000:]}
		if tn == "acme" {
			p = [3][]string{lines[:4000], lines[4000:4001], lines[4001:]}
		}
		parts[tn], input[tn] = p, lines
		want = append(want, lines...)
		proc, stdin := startStdin(t, bin, "producer-"+tn, append([]string{"producer", "--input", "-", "--tenant", tn}, common...)...)
		prods = append(prods, proc)
		ch := make(chan []string)
		feeds[tn] = ch
		go func() { feedErr <- feedParts(stdin, ch) }()
	}
	feed := func(part int) {
		t.Helper()
		for _, tn := range tenants {
			if lines := parts[tn][part]; len(lines) > 0 {
				select {
				case feeds[tn] <- lines:
				case err := <-feedErr:
					t.Fatalf("feed: %v", err)
				}
			}
		}
	}
	sent := func(part int) (n int) {
		for _, tn := range tenants {
			for i := 0; i <= part; i++ {
				n += len(parts[tn][i])
			}
		}
		return n
	}

	feed(0)
	waitFor(ctx, t, "the first commit", func() bool {
		hw, err := lk.HighWater(ctx)
		return err == nil && hw > 0
	})
	sub := startSubscriber(ctx, t, lakeDir, url, seed)
	defer sub.stop(t)
	waitFor(ctx, t, "part 1 delivered", func() bool { return sub.count(t) >= sent(0) })
	waitFor(ctx, t, "part 1 announced", func() bool {
		v, n, err := recordsVersions(ctx, lk, js)
		return err == nil && n == v
	})

	kill(t, cmt)
	cmt = startEnv(t, bin, "committer-2", []string{crashpoint.Env + "=committer.before-notice", crashpoint.ActionEnv + "=hang"}, committerArgs...)
	feed(1)
	waitFor(ctx, t, "committer-2 holding before a notice", func() bool {
		return strings.Contains(cmt.out.String(), crashpoint.HoldingLine+"committer.before-notice")
	})
	v, n, err := recordsVersions(ctx, lk, js)
	if err != nil || n >= v {
		t.Fatalf("committer-2 holds before a notice, yet the records table is at version %d and the last notice at %d (%v)", v, n, err)
	}
	kill(t, cmt)
	t.Logf("committer-2 SIGKILLed between records version %d and its notice (last notice %d)", v, n)

	kill(t, srv)
	srv = start(t, bin, "server-2", serverArgs...)
	start(t, bin, "committer-3", committerArgs...)
	waitFor(ctx, t, "part 2 delivered (through the notice committer-3 publishes)", func() bool { return sub.count(t) >= sent(1) })

	feed(2)
	for _, ch := range feeds {
		close(ch)
	}
	for range tenants {
		if err := <-feedErr; err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range prods {
		select {
		case <-p.done:
			if p.err != nil {
				t.Fatalf("%s: %v\n%s", p.name, p.err, p.out.String())
			}
		case <-ctx.Done():
			t.Fatalf("%s did not finish", p.name)
		}
	}
	waitFor(ctx, t, "every line delivered", func() bool { return sub.count(t) >= len(want) })
	wal, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		t.Fatal(err)
	}
	last := wal.CachedInfo().State.LastSeq
	waitFor(ctx, t, "the high-water at the WAL's end", func() bool {
		hw, err := lk.HighWater(ctx)
		return err == nil && hw >= last
	})
	got, byTenant, cur := sub.stop(t)
	t.Logf("subscriber stopped and resumed %d times; cursor %s", sub.stops, cur)
	// Nothing after the last line: a subscriber resumed from the final
	// cursor has nothing to deliver.
	s, err := subscribe.Subscribe(ctx, subscribe.Config{Lake: lakeDir, From: subscribe.After(cur)})
	if err != nil {
		t.Fatal(err)
	}
	qctx, qcancel := context.WithTimeout(ctx, time.Second)
	r, err := s.Next(qctx)
	qcancel()
	s.Close()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after the last line the subscriber delivered %q (err %v)", r.Line, err)
	}
	if d := laketest.Diff(got, want); d != "" {
		t.Fatalf("the subscriber's lines are not exactly the input: %s", d)
	}
	// Each tenant's lines come in WAL order, which is its input order, though
	// two encoders wrote them (docs/subscribers.md).
	for _, tn := range tenants {
		if g, w := byTenant[tn], input[tn]; !slices.Equal(g, w) {
			i := 0
			for i < min(len(g), len(w)) && g[i] == w[i] {
				i++
			}
			t.Errorf("%s: lines not delivered in input order: the first difference at line %d of %d: got %q, want %q",
				tn, i, len(w), g[min(i, len(g)-1)], w[min(i, len(w)-1)])
		}
	}
}

// feedParts writes each batch of lines received from parts to w, and closes
// w when parts is closed.
func feedParts(w io.WriteCloser, parts <-chan []string) error {
	defer w.Close()
	for lines := range parts {
		if _, err := io.WriteString(w, strings.Join(lines, "\n")+"\n"); err != nil {
			return fmt.Errorf("feed: %w", err)
		}
	}
	return w.Close()
}

// kill SIGKILLs p and waits for it to exit.
func kill(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", p.name, err)
	}
	<-p.done
}

// waitFor polls cond until it holds, failing t after two minutes (a
// generous bound on a loaded machine) or when ctx ends first.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if ctx.Err() != nil || time.Now().After(deadline) {
			t.Fatalf("never reached: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recordsVersions is the records table's version and the version of the
// last records commit notice (-1 when none).
func recordsVersions(ctx context.Context, lk *lake.Lake, js jetstream.JetStream) (table, notice int64, err error) {
	snap, err := lk.Records().Snapshot(ctx)
	if err != nil {
		return 0, 0, err
	}
	st, err := js.Stream(ctx, streams.NoticeStream)
	if err != nil {
		return 0, 0, err
	}
	m, err := st.GetLastMsgForSubject(ctx, streams.NoticeSubject(streams.TableRecords))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return snap.Version, -1, nil
	}
	if err != nil {
		return 0, 0, err
	}
	n, err := streams.DecodeNotice(m.Data)
	if err != nil {
		return 0, 0, err
	}
	return snap.Version, n.Version, nil
}

// follower is a subscriber that stops at random points and resumes from its
// cursor, saved as text, on its own NATS connection.
type follower struct {
	cancel context.CancelFunc
	done   chan struct{}
	stops  int

	mu       sync.Mutex
	lines    []string
	byTenant map[string][]string
	cur      subscribe.Cursor
	err      error
}

func startSubscriber(ctx context.Context, t *testing.T, lakeDir, url string, seed uint64) *follower {
	t.Helper()
	nc, js, err := natsutil.Connect(ctx, natsutil.ConnConfig{URL: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &follower{cancel: cancel, done: make(chan struct{}), byTenant: map[string][]string{}}
	rng := rand.New(rand.NewPCG(seed, 15))
	go func() {
		defer close(f.done)
		defer nc.Close()
		from := subscribe.Beginning()
		for ctx.Err() == nil {
			// PollInterval: never in this test, so new commits reach the
			// subscriber through notices only.
			s, err := subscribe.Subscribe(ctx, subscribe.Config{Lake: lakeDir, JS: js, From: from, PollInterval: time.Hour})
			if err != nil {
				f.fail(err)
				return
			}
			// Stop after k records, or after d while waiting for one.
			k := 1 + rng.IntN(1500)
			rctx, rcancel := ctx, context.CancelFunc(func() {})
			if rng.IntN(3) == 0 {
				rctx, rcancel = context.WithTimeout(ctx, time.Duration(rng.IntN(400))*time.Millisecond)
			}
			for range k {
				r, err := s.Next(rctx)
				if err != nil {
					if rctx.Err() == nil {
						f.fail(err)
					}
					break
				}
				f.mu.Lock()
				f.lines = append(f.lines, r.Line)
				f.byTenant[r.Tenant] = append(f.byTenant[r.Tenant], r.Line)
				f.mu.Unlock()
			}
			rcancel()
			s.Close()
			c, err := subscribe.ParseCursor(s.Cursor().String())
			if err != nil {
				f.fail(err)
				return
			}
			f.mu.Lock()
			f.cur, f.stops = c, f.stops+1
			f.mu.Unlock()
			from = subscribe.After(c)
		}
	}()
	return f
}

func (f *follower) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// count is how many lines the subscriber delivered; it fails t when the
// subscriber saw an error.
func (f *follower) count(t *testing.T) int {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		t.Fatalf("subscriber: %v", f.err)
	}
	return len(f.lines)
}

// stop ends the subscriber and returns what it delivered and its cursor;
// it fails t if the subscriber saw an error.
func (f *follower) stop(t *testing.T) ([]string, map[string][]string, subscribe.Cursor) {
	t.Helper()
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		t.Fatalf("subscriber: %v", f.err)
	}
	return f.lines, f.byTenant, f.cur
}
