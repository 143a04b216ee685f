package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/streams"
)

func testJS(t testing.TB) jetstream.JetStream {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	return js
}

func testFrame(source string, first uint64, n int) *streams.Frame {
	f := &streams.Frame{Source: source, Tenant: "acme", FirstOffset: first, NextOffset: first + uint64(n)}
	for i := 0; i < n; i++ {
		f.Records = append(f.Records, streams.Record{TS: int64(i), Text: fmt.Sprintf("line %d", first+uint64(i))})
	}
	return f
}

func TestPublisherOrderAndDuplicates(t *testing.T) {
	js := testJS(t)
	p := NewPublisher(js, PublisherConfig{MaxInFlight: 4}, nil, NewPublisherMetrics(nil))
	ctx := context.Background()
	var mu sync.Mutex
	var order []uint64
	var seqs []uint64
	const n = 50
	for i := 0; i < n; i++ {
		f := testFrame("src", uint64(i*10), 10)
		off := f.FirstOffset
		if err := p.Publish(ctx, streams.LineSubject("acme"), streams.FrameMsgID("src", off), f, func(seq uint64, err error) {
			if err != nil {
				t.Errorf("frame %d: %v", off, err)
			}
			if p.InFlight() > 4 {
				t.Errorf("in flight %d > 4", p.InFlight())
			}
			mu.Lock()
			order = append(order, off)
			seqs = append(seqs, seq)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(order) != n {
		t.Fatalf("done called %d times, want %d", len(order), n)
	}
	for i := range order {
		if order[i] != uint64(i*10) {
			t.Fatalf("done order %v", order)
		}
		if seqs[i] != uint64(i+1) {
			t.Fatalf("seq of frame %d = %d, want %d", i, seqs[i], i+1)
		}
	}
	if p.LastSeq() != n {
		t.Fatalf("LastSeq %d, want %d", p.LastSeq(), n)
	}
	// Republishing the same ids is de-duplicated and reports the original sequence.
	var dupSeq uint64
	if err := p.Publish(ctx, streams.LineSubject("acme"), streams.FrameMsgID("src", 30), testFrame("src", 30, 10), func(seq uint64, err error) {
		if err != nil {
			t.Errorf("duplicate: %v", err)
		}
		dupSeq = seq
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if dupSeq != 4 {
		t.Fatalf("duplicate acked with seq %d, want 4", dupSeq)
	}
	info, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.CachedInfo().State.Msgs; got != n {
		t.Fatalf("WAL holds %d messages, want %d", got, n)
	}
	msg, err := info.GetMsg(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(streams.HeaderFormat) != streams.FormatFrame || msg.Header.Get(streams.HeaderMsgID) != "src:60" || msg.Header.Get(HeaderNextOffset) != "70" {
		t.Fatalf("headers %v", msg.Header)
	}
	f, err := streams.DecodeFrame(msg.Data)
	if err != nil || f.FirstOffset != 60 || len(f.Records) != 10 {
		t.Fatalf("frame %+v, %v", f, err)
	}
	if p.AckLatency().Count() != n+1 {
		t.Fatalf("latency count %d", p.AckLatency().Count())
	}
}

func TestPublisherFailsAfterRetries(t *testing.T) {
	js := testJS(t)
	p := NewPublisher(js, PublisherConfig{MaxInFlight: 2, AckTimeout: 200 * time.Millisecond, MaxAttempts: 2, RetryBackoff: time.Millisecond}, nil, nil)
	ctx := context.Background()
	var errs []error
	for i := 0; i < 3; i++ {
		// No stream listens on this subject: no responders, then a final error.
		if err := p.Publish(ctx, "nowhere.x", fmt.Sprintf("x:%d", i), testFrame("x", uint64(i), 1), func(_ uint64, err error) {
			errs = append(errs, err)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(errs) != 3 {
		t.Fatalf("%d callbacks", len(errs))
	}
	for _, err := range errs {
		if err == nil {
			t.Fatal("publish to a subject without stream succeeded")
		}
	}
}

func TestPublisherBlocksAndClose(t *testing.T) {
	js := testJS(t)
	p := NewPublisher(js, PublisherConfig{MaxInFlight: 1, AckTimeout: 50 * time.Millisecond, MaxAttempts: 1000, RetryBackoff: 10 * time.Millisecond}, nil, nil)
	got := make(chan error, 1)
	if err := p.Publish(context.Background(), "nowhere.y", "y:0", testFrame("y", 0, 1), func(_ uint64, err error) { got <- err }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Publish(ctx, "nowhere.y", "y:1", testFrame("y", 1, 1), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish above max in flight: %v", err)
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer fcancel()
	if err := p.Flush(fctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush: %v", err)
	}
	p.Close()
	if err := <-got; !errors.Is(err, ErrPublisherClosed) {
		t.Fatalf("done after close: %v", err)
	}
	if err := p.Publish(context.Background(), "nowhere.y", "y:2", testFrame("y", 2, 1), nil); !errors.Is(err, ErrPublisherClosed) {
		t.Fatalf("publish after close: %v", err)
	}
}

func TestLatencyHistogram(t *testing.T) {
	h := NewLatencyHistogram()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, 1000 * time.Microsecond}} {
		got := h.Quantile(tc.q)
		if got > tc.want || float64(got) < 0.96*float64(tc.want) {
			t.Errorf("q%.2f = %s, want about %s", tc.q, got, tc.want)
		}
	}
	if h.Count() != 1000 || h.Max() != time.Millisecond {
		t.Fatalf("count %d max %s", h.Count(), h.Max())
	}
}

// Frames published while the server is down are retried under their ids
// once it is back, and land in the WAL exactly once.
func TestPublisherSurvivesServerRestart(t *testing.T) {
	s, js := restartableServer(t)
	m := NewPublisherMetrics(nil)
	p := NewPublisher(js, PublisherConfig{MaxInFlight: 8, AckTimeout: 300 * time.Millisecond, MaxAttempts: 60, RetryBackoff: 50 * time.Millisecond}, nil, m)
	ctx := context.Background()
	var mu sync.Mutex
	var order []uint64
	publish := func(i int) {
		f := testFrame("r", uint64(i), 1)
		if err := p.Publish(ctx, streams.LineSubject("acme"), streams.FrameMsgID("r", uint64(i)), f, func(_ uint64, err error) {
			if err != nil {
				t.Errorf("frame %d: %v", i, err)
			}
			mu.Lock()
			order = append(order, uint64(i))
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		publish(i)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	for i := 5; i < 12; i++ {
		publish(i)
	}
	// The outage must be seen before the server is back: wait for a retry
	// (a first attempt that failed) instead of guessing how long that takes.
	waitRetried(t, m)
	s.Restart(t)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	for i, o := range order {
		if o != uint64(i) {
			t.Fatalf("done order %v", order)
		}
	}
	if n := testutil.ToFloat64(m.Retries); n == 0 {
		t.Fatal("no publish was retried; the test did not exercise the outage")
	}
	// Every frame once, and in publish order: retries go out one after the
	// other, each after the frames before it are resolved, so an outage
	// does not shuffle a source's frames in the WAL.
	var walOrder []uint64
	for _, f := range walFrames(t, js, streams.LineSubject("acme")) {
		walOrder = append(walOrder, f.FirstOffset)
	}
	for i, o := range walOrder {
		if len(walOrder) != 12 || o != uint64(i) {
			t.Fatalf("WAL holds frames %v, want 0 to 11 in order", walOrder)
		}
	}
}

// AfterResolved is a barrier in the callback order: it runs after the done
// callbacks of every frame published before it and before those of later
// frames, and Flush waits for it.
func TestPublisherAfterResolved(t *testing.T) {
	js := testJS(t)
	p := NewPublisher(js, PublisherConfig{MaxInFlight: 3}, nil, nil)
	ctx := context.Background()
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	idle := make(chan struct{})
	p.AfterResolved(func() { close(idle) })
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatal("a barrier on an idle publisher did not run")
	}
	var want []string
	for i := range 10 {
		f := testFrame("bar", uint64(i), 1)
		name := fmt.Sprintf("f%d", i)
		if err := p.Publish(ctx, streams.LineSubject("acme"), streams.FrameMsgID("bar", uint64(i)), f, func(uint64, error) { note(name) }); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
		if i == 4 || i == 9 {
			b := fmt.Sprintf("barrier after f%d", i)
			p.AfterResolved(func() { note(b) })
			want = append(want, b)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("callback order\n got %v\nwant %v", order, want)
	}
}

// Frames in flight when the server goes away fail together ("server is
// disconnected") and are all retried. The retries must still reach the WAL
// in publish order: a source's frames are its lines in order.
func TestPublisherRetriesKeepOrder(t *testing.T) {
	s, js := restartableServer(t)
	m := NewPublisherMetrics(nil)
	p := NewPublisher(js, PublisherConfig{MaxInFlight: 64, AckTimeout: 2 * time.Second, MaxAttempts: 100, RetryBackoff: 20 * time.Millisecond}, nil, m)
	ctx := context.Background()
	const n = 40
	publish := func(i int) {
		f := testFrame("o", uint64(i), 50)
		if err := p.Publish(ctx, streams.LineSubject("acme"), streams.FrameMsgID("o", uint64(i)), f, func(_ uint64, err error) {
			if err != nil {
				t.Errorf("frame %d: %v", i, err)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The last frames are withheld until the server is down, so some
	// frames fail and are retried by construction; the others race the
	// shutdown (in flight, failing together as the connection closes).
	const withheld = 4
	for i := range n - withheld {
		publish(i)
		if i == n/4 {
			go s.Shutdown() // mid-burst: later frames fail while the connection closes
		}
	}
	s.WaitForShutdown()
	for i := n - withheld; i < n; i++ {
		publish(i)
	}
	waitRetried(t, m)
	s.Restart(t)
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	var walOrder []uint64
	for _, f := range walFrames(t, js, streams.LineSubject("acme")) {
		walOrder = append(walOrder, f.FirstOffset)
	}
	for i, o := range walOrder {
		if len(walOrder) != n || o != uint64(i) {
			t.Fatalf("WAL holds frames %v, want 0 to %d in order", walOrder, n-1)
		}
	}
}

// restartableServer starts a server that s.Restart(t) brings back on the
// same store and port, with quarry's streams and a producer connection.
// waitRetried waits until the publisher has retried a frame: a first
// attempt failed (the fault was seen) and the retries have begun.
func waitRetried(t *testing.T, m *PublisherMetrics) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(m.Retries) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no publish was retried within 30s of the outage")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func restartableServer(t *testing.T) (*natstest.Server, jetstream.JetStream) {
	t.Helper()
	s := natstest.RunServer(t)
	natstest.Connect(t, s.URL(), streams.Config{})
	return s, producerConn(t, s.URL())
}

// producerConn connects to url the way the producer roles do: without a
// reconnect buffer.
func producerConn(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, js, err := natsutil.Connect(ctx, natsutil.ConnConfig{URL: url, NoReconnectBuffer: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return js
}

// blackholeProxy forwards TCP connections to a server until blackhole is
// called; from then on it drops what clients send (they believe it sent)
// until cut closes every connection. New connections forward normally.
type blackholeProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	drop  bool
	conns []net.Conn
}

func newBlackholeProxy(t *testing.T, target string) *blackholeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &blackholeProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go io.Copy(c, s)
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if err != nil {
						s.Close()
						return
					}
					p.mu.Lock()
					drop := p.drop
					p.mu.Unlock()
					if !drop {
						if _, err := s.Write(buf[:n]); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return p
}

func (p *blackholeProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *blackholeProxy) blackhole() {
	p.mu.Lock()
	p.drop = true
	p.mu.Unlock()
}

func (p *blackholeProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns, p.drop = nil, false
}

// Frames lost silently in a dying connection (the client believes them
// sent) fail when the client reconnects, and frames published after the
// reconnect must not overtake their retries.
func TestPublisherSilentLossKeepsOrder(t *testing.T) {
	s := natstest.RunServer(t)
	natstest.Connect(t, s.URL(), streams.Config{})
	proxy := newBlackholeProxy(t, s.Addr().String())
	js := producerConn(t, proxy.url())
	nc := js.Conn()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := NewPublisherMetrics(nil)
	p := NewPublisher(js, PublisherConfig{MaxInFlight: 64, AckTimeout: time.Second, MaxAttempts: 30, RetryBackoff: 20 * time.Millisecond}, nil, m)
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			f := testFrame("s", uint64(i), 10)
			if err := p.Publish(ctx, streams.LineSubject("acme"), streams.FrameMsgID("s", uint64(i)), f, func(_ uint64, err error) {
				if err != nil {
					t.Errorf("frame %d: %v", i, err)
				}
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(0, 5)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	reconnects := nc.Stats().Reconnects
	proxy.blackhole()
	publish(5, 10) // written into the void
	if err := nc.FlushTimeout(50 * time.Millisecond); err == nil {
		t.Fatal("a flush got through the black hole")
	}
	proxy.cut()
	for nc.Stats().Reconnects == reconnects || nc.Status() != nats.CONNECTED {
		if ctx.Err() != nil {
			t.Fatal("no reconnect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	publish(10, 20) // on the new connection, while 5..9 wait for their retries
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if testutil.ToFloat64(m.Retries) == 0 {
		t.Fatal("no frame was retried: nothing was lost in the black hole")
	}
	var walOrder []uint64
	for _, f := range walFrames(t, js, streams.LineSubject("acme")) {
		walOrder = append(walOrder, f.FirstOffset)
	}
	for i, o := range walOrder {
		if len(walOrder) != 20 || o != uint64(i) {
			t.Fatalf("WAL holds frames %v, want 0 to 19 in order", walOrder)
		}
	}
}
