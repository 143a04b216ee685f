package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/promutil"
	"github.com/quarrylake/quarry/streams"
)

// PublisherConfig bounds the frame publisher.
type PublisherConfig struct {
	// MaxInFlight is the number of frames published but not yet acked (and
	// whose done callback has not yet returned). Publish blocks above it.
	// Default 16: with 64, a source running ahead held about 40 MB of
	// frames waiting for the server, which raised the peak heap (and its
	// page faults) and put seconds of queue in front of every ack, for no
	// more lines a second (docs/benchmarks.md, Throughput).
	MaxInFlight int `yaml:"max_in_flight"`
	// AckTimeout bounds the wait for one publish attempt's ack. An attempt
	// that times out is retried with backoff under the same Nats-Msg-Id.
	AckTimeout time.Duration `yaml:"ack_timeout"`
	// MaxAttempts is the number of attempts per frame before done gets the
	// error (default 30: with the backoff capped at 5s a frame rides out
	// about two minutes of a cluster electing a new WAL leader or a
	// restarting server before its source stops).
	MaxAttempts int `yaml:"max_attempts"`
	// RetryBackoff is the wait before the first retry; it doubles per retry
	// up to 5s (default 100ms).
	RetryBackoff time.Duration `yaml:"retry_backoff"`
}

// Defaults returns c with unset fields set to their defaults.
func (c PublisherConfig) Defaults() PublisherConfig {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 16
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = 10 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 30
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	return c
}

// Validate reports every problem with c (after Defaults).
func (c PublisherConfig) Validate() error {
	var errs []error
	// The jetstream client stalls async publishes above 4000 pending acks.
	if c.MaxInFlight < 1 || c.MaxInFlight > 4000 {
		errs = append(errs, fmt.Errorf("publisher.max_in_flight %d: must be 1 to 4000", c.MaxInFlight))
	}
	if c.AckTimeout < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("publisher.ack_timeout %s: must be at least 10ms", c.AckTimeout))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("publisher.max_attempts %d: must be at least 1", c.MaxAttempts))
	}
	if c.RetryBackoff < 0 {
		errs = append(errs, fmt.Errorf("publisher.retry_backoff %s: must not be negative", c.RetryBackoff))
	}
	return errors.Join(errs...)
}

// HeaderNextOffset carries a frame's NextOffset on every frame the
// Publisher sends, so a restarting source can rebuild which offsets are in
// the WAL from headers alone (see the package doc).
const HeaderNextOffset = "Quarry-Next-Offset"

// maxRetryBackoff caps the wait between a frame's publish attempts.
const maxRetryBackoff = 5 * time.Second

// ErrPublisherClosed is the error done gets for frames still in flight when
// the publisher is closed.
var ErrPublisherClosed = errors.New("publisher closed")

// PublisherMetrics are the publisher's Prometheus collectors. Several
// publishers (line sources, capture instances) may share one set.
type PublisherMetrics struct {
	AckSeconds prometheus.Histogram // quarry_producer_publish_ack_seconds
	Retries    prometheus.Counter   // quarry_producer_publish_retries_total
	Failures   prometheus.Counter   // quarry_producer_publish_failures_total
	InFlight   prometheus.Gauge     // quarry_producer_frames_in_flight
}

// NewPublisherMetrics creates the publisher collectors and registers them
// with reg (nil: not registered). Registering twice with one registry
// returns the collectors already registered, so every publisher of a
// process can call it.
func NewPublisherMetrics(reg prometheus.Registerer) *PublisherMetrics {
	m := &PublisherMetrics{
		AckSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "quarry_producer_publish_ack_seconds",
			Help:    "Time from publishing a frame to its JetStream ack, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarry_producer_publish_retries_total",
			Help: "Frame publish attempts retried after a timeout or error.",
		}),
		Failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarry_producer_publish_failures_total",
			Help: "Frames whose publish failed after every attempt.",
		}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quarry_producer_frames_in_flight",
			Help: "Frames published and not yet acked.",
		}),
	}
	m.AckSeconds = promutil.Register(reg, m.AckSeconds)
	m.Retries = promutil.Register(reg, m.Retries)
	m.Failures = promutil.Register(reg, m.Failures)
	m.InFlight = promutil.Register(reg, m.InFlight)
	return m
}

// Publisher publishes frames to the WAL asynchronously with a bounded number
// in flight and reports each frame's outcome in publish order.
//
// The first attempt of every frame goes out through PublishMsgAsync on the
// calling goroutine, so frames reach the WAL in Publish order. A frame whose
// ack does not arrive within AckTimeout, or whose publish fails, is
// retried with PublishMsg under the same Nats-Msg-Id; JetStream acks a copy
// it already holds as a duplicate with the original sequence, which counts
// as success. A frame is retried only after every frame before it is
// resolved, so frames that failed together (a lost connection) land in
// publish order; a frame can land out of order only when it failed while
// a later one was stored (a stream leader lost between two frames).
//
// A Publisher is safe for concurrent use, but the order of done callbacks is
// the order of Publish calls, so a source that needs ordered positions
// publishes from one goroutine.
type Publisher struct {
	js  jetstream.JetStream
	cfg PublisherConfig
	log *slog.Logger
	m   *PublisherMetrics

	sem chan struct{} // one token per frame in flight
	// life ends with Close: it bounds retry waits and sync publishes.
	life context.Context
	kill context.CancelFunc
	stop <-chan struct{} // life.Done()

	mu       sync.Mutex
	tail     chan struct{} // closed when the last published frame's done returned
	inflight int
	idle     chan struct{} // closed when inflight drops to 0; nil while idle
	// resolved gets a token (if it has room) each time inflight drops.
	resolved chan struct{}
	// serial counts frames being resolved in order after a failure: while
	// it is above 0, new frames are not sent ahead of them but published by
	// their own goroutine once the frames before them are resolved.
	serial int
	// reconnects is the connection's reconnect count seen at the last
	// Publish: after a reconnect, frames sent before it may still be lost
	// in the old connection, so the first frame after it waits for them.
	reconnects uint64

	lastSeq atomic.Uint64
	lat     *LatencyHistogram
}

// NewPublisher returns a publisher on js. cfg is completed with Defaults;
// an invalid cfg is replaced field by field with defaults (callers validate
// their config first). log nil discards, m nil records no metrics.
func NewPublisher(js jetstream.JetStream, cfg PublisherConfig, log *slog.Logger, m *PublisherMetrics) *Publisher {
	cfg = cfg.Defaults()
	d := PublisherConfig{}.Defaults()
	if cfg.MaxInFlight < 1 || cfg.MaxInFlight > 4000 {
		cfg.MaxInFlight = d.MaxInFlight
	}
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = d.AckTimeout
	}
	if cfg.MaxAttempts < 1 {
		cfg.MaxAttempts = d.MaxAttempts
	}
	if cfg.RetryBackoff < 0 {
		cfg.RetryBackoff = d.RetryBackoff
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewPublisherMetrics(nil)
	}
	tail := make(chan struct{})
	close(tail)
	var reconnects uint64
	if nc := js.Conn(); nc != nil {
		reconnects = nc.Stats().Reconnects
	}
	life, kill := context.WithCancel(context.Background())
	p := &Publisher{
		js: js, cfg: cfg, log: log, m: m,
		sem:      make(chan struct{}, cfg.MaxInFlight),
		resolved: make(chan struct{}, 1),
		life:     life, kill: kill, stop: life.Done(),
		tail: tail,
		lat:  NewLatencyHistogram(),
	}
	p.reconnects = reconnects
	return p
}

// Publish sends frame f on subject with Nats-Msg-Id msgID and header
// Quarry-Format streams.FormatFrame, asynchronously. It blocks while
// MaxInFlight frames are unacked; ctx bounds only that wait, not the publish (a cancelled
// source still drains with Flush). done is called exactly once, in publish
// order, with the PubAck's stream sequence or the final error after the
// retries (a duplicate ack counts as success). done runs on a publisher
// goroutine and must not call Publish. f is encoded before Publish returns;
// the caller may reuse it.
//
// Publish returns an error, and does not call done, when ctx ends while it
// waits, the publisher is closed, or f does not encode; the frame is then
// not published.
func (p *Publisher) Publish(ctx context.Context, subject, msgID string, f *streams.Frame, done func(seq uint64, err error)) error {
	select {
	case <-p.stop:
		return ErrPublisherClosed
	default:
	}
	select {
	case p.sem <- struct{}{}: // a free slot wins over a cancelled ctx
	default:
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("publish %s: wait for in-flight slot: %w", msgID, ctx.Err())
		case <-p.stop:
			return ErrPublisherClosed
		}
	}
	msg := nats.NewMsg(subject)
	msg.Header.Set(streams.HeaderMsgID, msgID)
	msg.Header.Set(streams.HeaderFormat, streams.FormatFrame)
	msg.Header.Set(HeaderNextOffset, strconv.FormatUint(f.NextOffset, 10))
	msg.Data = streams.AppendFrame(make([]byte, 0, frameSizeHint(f)), f)

	p.mu.Lock()
	prev, mine := p.enqueueLocked()
	p.m.InFlight.Inc()
	start := time.Now()
	// The first attempt is sent under p.mu so that concurrent Publish calls
	// hit the wire in the order of their done callbacks. While earlier
	// frames are being retried, or the connection is down (nats.go would
	// buffer the frame and send it on reconnect, ahead of the retries), the
	// frame waits for its turn instead.
	var paf jetstream.PubAckFuture
	var err error
	conn := p.js.Conn()
	serial := p.serial > 0 || conn.Status() != nats.CONNECTED
	if r := conn.Stats().Reconnects; r != p.reconnects {
		p.reconnects = r
		serial = serial || p.inflight > 1
	}
	if serial {
		err = errDeferred
	} else {
		paf, err = p.js.PublishMsgAsync(msg, jetstream.WithExpectStream(streams.WALStream))
		serial = err != nil
	}
	if serial {
		p.serial++
	}
	p.mu.Unlock()

	go p.await(msg, paf, err, serial, start, prev, mine, done)
	return nil
}

// errDeferred marks a frame whose first attempt waits for the frames
// before it (see Publisher.serial).
var errDeferred = errors.New("deferred behind earlier frames")

func frameSizeHint(f *streams.Frame) int {
	n := 64 + len(f.Source) + len(f.Tenant)
	for i := range f.Records {
		n += streams.EncodedRecordSize(&f.Records[i])
	}
	return n
}

// await resolves one frame: waits for the first attempt's ack, retries as
// needed, then waits for the previous frame's callback and calls done.
func (p *Publisher) await(msg *nats.Msg, paf jetstream.PubAckFuture, err error, serial bool, start time.Time, prev, mine chan struct{}, done func(uint64, error)) {
	var seq uint64
	if err == nil {
		seq, err = p.awaitFuture(paf)
	}
	if err != nil && !serial {
		// Frames published from now on wait for this one.
		p.mu.Lock()
		p.serial++
		p.mu.Unlock()
		serial = true
	}
	// Retries go out in publish order: a frame is retried (or, deferred,
	// sent) only once every frame before it is resolved, so frames that
	// failed together (a lost connection) reach the WAL in publish order.
	waited := false
	if err != nil && !p.closed() {
		<-prev
		waited = true
		if errors.Is(err, errDeferred) {
			seq, err = p.publishSync(msg)
		}
	}
	b := backoff.New(backoff.Policy{Min: p.cfg.RetryBackoff, Max: maxRetryBackoff})
	for attempt := 2; err != nil && attempt <= p.cfg.MaxAttempts && !p.closed(); attempt++ {
		p.m.Retries.Inc()
		p.log.Warn("frame publish retry", "msg_id", msg.Header.Get(streams.HeaderMsgID), "attempt", attempt, "err", err)
		if b.Wait(p.life) != nil {
			break
		}
		seq, err = p.publishSync(msg)
	}
	if serial {
		p.mu.Lock()
		p.serial--
		p.mu.Unlock()
	}
	if err != nil && p.closed() {
		err = fmt.Errorf("%w: %w", ErrPublisherClosed, err)
	}
	if err != nil {
		p.m.Failures.Inc()
		err = fmt.Errorf("publish %s: %w", msg.Header.Get(streams.HeaderMsgID), err)
	} else {
		el := time.Since(start)
		p.m.AckSeconds.Observe(el.Seconds())
		p.lat.Record(el)
		for {
			old := p.lastSeq.Load()
			if seq <= old || p.lastSeq.CompareAndSwap(old, seq) {
				break
			}
		}
	}
	if !waited {
		<-prev
	}
	if done != nil {
		done(seq, err)
	}
	p.m.InFlight.Dec()
	p.dequeue(mine)
	<-p.sem
}

// enqueueLocked appends an entry to the callback order: the entry waits on
// prev and closes mine when its callback returned. p.mu must be held.
func (p *Publisher) enqueueLocked() (prev, mine chan struct{}) {
	prev, mine = p.tail, make(chan struct{})
	p.tail = mine
	p.inflight++
	if p.inflight == 1 {
		p.idle = make(chan struct{})
	}
	return prev, mine
}

// dequeue marks an entry's callback as returned.
func (p *Publisher) dequeue(mine chan struct{}) {
	close(mine)
	p.mu.Lock()
	p.inflight--
	if p.inflight == 0 {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
	select {
	case p.resolved <- struct{}{}:
	default:
	}
}

func (p *Publisher) awaitFuture(paf jetstream.PubAckFuture) (uint64, error) {
	t := time.NewTimer(p.cfg.AckTimeout)
	defer t.Stop()
	select {
	case ack := <-paf.Ok():
		return ack.Sequence, nil
	case err := <-paf.Err():
		return 0, err
	case <-t.C:
		return 0, fmt.Errorf("no ack within %s: %w", p.cfg.AckTimeout, context.DeadlineExceeded)
	case <-p.stop:
		return 0, ErrPublisherClosed
	}
}

func (p *Publisher) publishSync(msg *nats.Msg) (uint64, error) {
	ctx, cancel := context.WithTimeout(p.life, p.cfg.AckTimeout)
	defer cancel()
	// Headers (msg id, expected stream) are already on msg.
	ack, err := p.js.PublishMsg(ctx, msg)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

func (p *Publisher) closed() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// Flush waits until every frame published so far is resolved and its done
// callback returned. It returns ctx's error if ctx ends first.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	idle := p.idle
	n := p.inflight
	p.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("flush with %d frames in flight: %w", n, ctx.Err())
	}
}

// AfterResolved calls done, on a publisher goroutine, once every frame
// published before this call has been resolved and its done callback has
// returned: a barrier in the callback order. It does not take an in-flight
// slot; Flush waits for it as for a frame.
func (p *Publisher) AfterResolved(done func()) {
	p.mu.Lock()
	prev, mine := p.enqueueLocked()
	p.mu.Unlock()
	go func() {
		<-prev
		done()
		p.dequeue(mine)
	}()
}

// Close stops retries: frames still waiting for an ack get done with an
// error wrapping ErrPublisherClosed (their fate in the WAL is unknown; a
// restarted source republishes them with the same ids), and later Publish
// calls fail. Close does not wait; call Flush first to drain.
func (p *Publisher) Close() {
	p.kill()
}

// InFlight is the number of frames published (and AfterResolved barriers)
// whose callback has not returned.
func (p *Publisher) InFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight
}

// Resolved gets a token (at most one waits) each time a frame's or a
// barrier's callback has returned and InFlight dropped: a caller holding
// work until fewer frames are in flight checks InFlight on each.
func (p *Publisher) Resolved() <-chan struct{} { return p.resolved }

// LastSeq is the highest WAL sequence acked so far.
func (p *Publisher) LastSeq() uint64 { return p.lastSeq.Load() }

// AckLatency is the publish→ack latency of every frame acked so far.
func (p *Publisher) AckLatency() *LatencyHistogram { return p.lat }

// LatencyHistogram is a lock-free log-linear histogram of durations (about
// 3% relative error), for benchmarks and stats: Quantile(0.99) is the p99.
type LatencyHistogram struct {
	counts [latBuckets]atomic.Uint64
	total  atomic.Uint64
	sum    atomic.Int64
	max    atomic.Int64
}

const (
	latSub     = 32 // sub-buckets per power of two
	latBuckets = 64 * latSub
)

// NewLatencyHistogram returns an empty histogram.
func NewLatencyHistogram() *LatencyHistogram { return &LatencyHistogram{} }

func latBucket(ns uint64) int {
	if ns < latSub {
		return int(ns)
	}
	e := bits.Len64(ns) - 1 // ns in [2^e, 2^(e+1))
	frac := (ns >> (e - 5)) & (latSub - 1)
	return (e-4)*latSub + int(frac)
}

func latLower(b int) uint64 {
	if b < latSub {
		return uint64(b)
	}
	e := b/latSub + 4
	frac := uint64(b % latSub)
	return (1 << e) | frac<<(e-5)
}

// Record adds one duration.
func (h *LatencyHistogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[latBucket(uint64(d))].Add(1)
	h.total.Add(1)
	h.sum.Add(int64(d))
	for {
		old := h.max.Load()
		if int64(d) <= old || h.max.CompareAndSwap(old, int64(d)) {
			break
		}
	}
}

// Count is the number of recorded durations.
func (h *LatencyHistogram) Count() uint64 { return h.total.Load() }

// Mean is the mean recorded duration.
func (h *LatencyHistogram) Mean() time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / int64(n))
}

// Max is the largest recorded duration.
func (h *LatencyHistogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Quantile returns the q-quantile (0 < q <= 1), e.g. 0.5 for the median,
// as the lower bound of its bucket; 0 when empty.
func (h *LatencyHistogram) Quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for b := range h.counts {
		seen += h.counts[b].Load()
		if seen >= rank {
			return time.Duration(latLower(b))
		}
	}
	return h.Max()
}

// Reset forgets every recorded duration.
func (h *LatencyHistogram) Reset() {
	for b := range h.counts {
		h.counts[b].Store(0)
	}
	h.total.Store(0)
	h.sum.Store(0)
	h.max.Store(0)
}

// Merge adds every duration recorded in o to h.
func (h *LatencyHistogram) Merge(o *LatencyHistogram) {
	for b := range o.counts {
		if n := o.counts[b].Load(); n > 0 {
			h.counts[b].Add(n)
		}
	}
	h.total.Add(o.total.Load())
	h.sum.Add(o.sum.Load())
	m := o.max.Load()
	for {
		old := h.max.Load()
		if m <= old || h.max.CompareAndSwap(old, m) {
			break
		}
	}
}
