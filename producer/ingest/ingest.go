package ingest

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/promutil"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

// TokensEnv holds the receivers' bearer tokens: "token=tenant" pairs
// separated by ',' or whitespace. Set, every HTTP request needs one of
// them and writes for its tenant; unset, HTTP is open.
const TokensEnv = "QUARRY_INGEST_TOKENS"

// ClientTenantsEnv maps client certificates to tenants for syslog over
// TLS: "common-name=tenant" pairs separated by ',' or whitespace. Set, a
// syslog TLS connection writes for its verified client certificate's
// tenant, and one whose certificate's common name is not listed is
// refused; unset, every connection writes for the default tenant.
const ClientTenantsEnv = "QUARRY_INGEST_CLIENT_TENANTS"

// Sentinel errors callers branch on.
var (
	// ErrBusy: the in-flight bound is reached (HTTP 429).
	ErrBusy = errors.New("too many lines in flight; retry later")
	// ErrUnavailable: the tenant's source is not running (HTTP 503).
	ErrUnavailable = errors.New("ingest unavailable; retry later")
	// ErrTooManyTenants: MaxTenants sources already run (HTTP 503).
	ErrTooManyTenants = errors.New("too many tenants")
	// ErrNotDurable: the lines were not acknowledged within AckTimeout;
	// they may or may not be written (HTTP 503, the client resends).
	ErrNotDurable = errors.New("lines not durable within ack_timeout")
)

// Deps are the hub's connections and instruments.
type Deps struct {
	JS jetstream.JetStream
	// Log nil discards.
	Log *slog.Logger
	// Registerer nil registers no metrics.
	Registerer prometheus.Registerer
	// Tokens maps a bearer token to its tenant (ParseTokens); empty: no
	// authentication.
	Tokens map[string]string
	// ClientTenants maps a client certificate's common name to its tenant
	// (ParseClientTenants); empty: the default tenant.
	ClientTenants map[string]string
}

// ParseTokens parses TokensEnv's value.
func ParseTokens(s string) (map[string]string, error) { return parsePairs(TokensEnv, "token", s) }

// ParseClientTenants parses ClientTenantsEnv's value.
func ParseClientTenants(s string) (map[string]string, error) {
	return parsePairs(ClientTenantsEnv, "common-name", s)
}

// parsePairs parses "key=tenant" pairs separated by ',' or whitespace
// from the variable env.
func parsePairs(env, key, s string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		k, tenant, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: entry %d: want %s=tenant", env, len(out)+1, key)
		}
		if err := streams.CheckToken(tenant); err != nil {
			return nil, fmt.Errorf("%s: tenant of entry %d: %w", env, len(out)+1, err)
		}
		out[k] = tenant
	}
	return out, nil
}

// ClientTenant is the tenant of a connection whose verified client
// certificate has common name cn (cn "" for none): the default tenant
// when no client tenants are configured, else cn's; !ok when cn is not
// listed.
func (h *Hub) ClientTenant(cn string) (tenant string, ok bool) {
	if len(h.deps.ClientTenants) == 0 {
		return h.cfg.Tenant, true
	}
	tenant, ok = h.deps.ClientTenants[cn]
	return tenant, ok && cn != ""
}

// Hub is what every receiver writes through: one push source per tenant
// (created on the tenant's first lines), the in-flight bound, the limits
// and the tokens. See the package doc for the delivery contract.
type Hub struct {
	cfg    producer.Config
	rc     producer.ReceiversConfig
	deps   Deps
	log    *slog.Logger
	m      *metrics
	flight *weighted

	mu      sync.Mutex
	ctx     context.Context // Run's; nil before Run
	tenants map[string]*tenant
	wg      sync.WaitGroup
	started chan struct{}
}

type tenant struct {
	name  string
	lines *producer.Lines
	push  *producer.Push
	done  chan struct{} // closed when Run returned
	err   error
}

type metrics struct {
	lines, rejected, busy *prometheus.CounterVec
	inflight              prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		lines: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_received_lines_total", Help: "Lines received by the receivers and acknowledged durable, by receiver.",
		}, []string{"receiver"})),
		rejected: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_received_bad_lines_total", Help: "Malformed or over-limit lines received, dead-lettered or refused, by receiver.",
		}, []string{"receiver"})),
		busy: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_receiver_busy_total", Help: "Requests refused (HTTP 429) or reads held back because the in-flight bound was reached, by receiver.",
		}, []string{"receiver"})),
		inflight: promutil.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quarry_producer_receiver_in_flight_bytes", Help: "Bytes received and not yet durable.",
		})),
	}
}

// New returns a hub writing for cfg.Tenant by default, bounded by
// cfg.Receivers. cfg.Source is ignored: each tenant's source id is
// "recv-<tenant>".
func New(cfg producer.Config, deps Deps) (*Hub, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.JS == nil {
		return nil, errors.New("ingest: Deps.JS is required")
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{
		cfg: cfg, rc: cfg.Receivers, deps: deps, log: log, m: newMetrics(deps.Registerer),
		flight:  newWeighted(cfg.Receivers.MaxInFlightBytes),
		tenants: map[string]*tenant{}, started: make(chan struct{}),
	}, nil
}

// Config is the receivers' configuration after defaults.
func (h *Hub) Config() producer.ReceiversConfig { return h.rc }

// DefaultTenant is the tenant of lines that name none.
func (h *Hub) DefaultTenant() string { return h.cfg.Tenant }

// Log is the hub's logger.
func (h *Hub) Log() *slog.Logger { return h.log }

// Run runs the tenants' sources until ctx ends, then drains them (each
// within DrainTimeout) and returns. The default tenant's source starts at
// once.
func (h *Hub) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.ctx != nil {
		h.mu.Unlock()
		return errors.New("ingest: Run called twice")
	}
	h.ctx = ctx
	h.mu.Unlock()
	close(h.started)
	if _, err := h.tenant(h.cfg.Tenant); err != nil {
		return err
	}
	<-ctx.Done()
	h.wg.Wait()
	return nil
}

// Ready is nil once the default tenant's source is ready.
func (h *Hub) Ready() error {
	h.mu.Lock()
	t := h.tenants[h.cfg.Tenant]
	h.mu.Unlock()
	if t == nil {
		return errors.New("ingest: not started")
	}
	return t.lines.Ready()
}

// Stats are the counters of every tenant's source.
func (h *Hub) Stats() []producer.Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []producer.Stats
	for _, t := range h.tenants {
		out = append(out, t.lines.Stats())
	}
	return out
}

// AckLatencies is the publish→ack latency of every frame of every
// tenant's source acked so far.
func (h *Hub) AckLatencies() *producer.LatencyHistogram {
	out := producer.NewLatencyHistogram()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.tenants {
		out.Merge(t.lines.AckLatencies())
	}
	return out
}

// SourceID is the source id of tenant's lines.
func SourceID(tenant string) string { return "recv-" + tenant }

// tenant returns the running source of name, starting it if needed. A
// source that stopped (its WAL writes failed) is replaced on the next
// lines: the new one resumes where it stopped.
func (h *Hub) tenant(name string) (*tenant, error) {
	if err := streams.CheckToken(name); err != nil {
		return nil, fmt.Errorf("tenant: %w", err)
	}
	select {
	case <-h.started:
	default:
		return nil, fmt.Errorf("%w: not started", ErrUnavailable)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return nil, fmt.Errorf("%w: shutting down", ErrUnavailable)
	}
	if t := h.tenants[name]; t != nil {
		select {
		case <-t.done:
			delete(h.tenants, name)
		default:
			return t, nil
		}
	}
	if len(h.tenants) >= h.rc.MaxTenants {
		return nil, fmt.Errorf("%w: %d (producer.receivers.max_tenants)", ErrTooManyTenants, h.rc.MaxTenants)
	}
	cfg := h.cfg
	cfg.Tenant, cfg.Source = name, SourceID(name)
	lines, push, err := producer.NewPush(cfg, producer.Deps{JS: h.deps.JS, Log: h.log, Registerer: h.deps.Registerer})
	if err != nil {
		return nil, err
	}
	t := &tenant{name: name, lines: lines, push: push, done: make(chan struct{})}
	h.tenants[name] = t
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t.err = lines.Run(h.ctx)
		if t.err != nil {
			h.log.Error("receiver source stopped", "tenant", name, "err", t.err)
		}
		close(t.done)
	}()
	return t, nil
}

// Submit hands entries (received by receiver, size bytes on the wire) to
// tenant's source. With wait it blocks while the in-flight bound is
// reached (syslog: the connection stops reading); without, it returns
// ErrBusy. done gets the outcome once, when every line is durable, or
// with an error when they failed or the source stopped first; it is not
// called when Submit returns an error.
func (h *Hub) Submit(ctx context.Context, receiver, tenantName string, entries []producer.Entry, size int64, wait bool, done func(producer.Ingested, error)) error {
	t, err := h.tenant(tenantName)
	if err != nil {
		return err
	}
	size = max(size, 1)
	if !h.flight.tryAcquire(size) {
		if !wait {
			h.m.busy.WithLabelValues(receiver).Inc()
			return ErrBusy
		}
		h.m.busy.WithLabelValues(receiver).Inc()
		if err := h.flight.acquire(ctx, size, t.done); err != nil {
			return err
		}
	}
	h.m.inflight.Add(float64(size))
	var once sync.Once
	release := func() {
		once.Do(func() {
			h.flight.release(size)
			h.m.inflight.Sub(float64(size))
		})
	}
	n := len(entries)
	bad := 0
	for i := range entries {
		if entries[i].Bad != "" {
			bad++
		}
	}
	var answered sync.Once
	answer := func(in producer.Ingested, err error) { answered.Do(func() { done(in, err) }) }
	stopWatch := make(chan struct{})
	err = t.push.Submit(ctx, entries, func(in producer.Ingested, err error) {
		close(stopWatch)
		release()
		if err == nil {
			h.m.lines.WithLabelValues(receiver).Add(float64(n - bad))
			h.m.rejected.WithLabelValues(receiver).Add(float64(bad))
		}
		answer(in, err)
	})
	if err != nil {
		release()
		if errors.Is(err, producer.ErrPushStopped) {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return err
	}
	// A source that stops without answering (its reader abandoned after a
	// failure) must neither keep the bytes nor leave the receiver waiting:
	// when it stops, done gets ErrUnavailable. Watched only once the source
	// took the batch: a Submit that fails reports its error alone. (The
	// watcher ran from before push's Submit, which waits while the source
	// is full: a source that stopped meanwhile made both report, and
	// syslog handed the batch over twice; TestWALFull wrote 1,024 lines
	// twice under -race.)
	go func() {
		select {
		case <-t.done:
			release()
			answer(producer.Ingested{}, fmt.Errorf("%w: source %s stopped before the lines were durable", ErrUnavailable, SourceID(t.name)))
		case <-stopWatch:
		}
	}()
	return nil
}

// Ingest submits without waiting for in-flight room and waits up to
// AckTimeout for the lines to be durable: the HTTP path.
func (h *Hub) Ingest(ctx context.Context, receiver, tenantName string, entries []producer.Entry, size int64) (producer.Ingested, error) {
	type result struct {
		in  producer.Ingested
		err error
	}
	ch := make(chan result, 1)
	err := h.Submit(ctx, receiver, tenantName, entries, size, false, func(in producer.Ingested, err error) { ch <- result{in, err} })
	if err != nil {
		return producer.Ingested{}, err
	}
	t := time.NewTimer(h.rc.AckTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			return r.in, fmt.Errorf("%w: %v", ErrUnavailable, r.err)
		}
		return r.in, nil
	case <-t.C:
		return producer.Ingested{}, ErrNotDurable
	case <-ctx.Done():
		return producer.Ingested{}, ctx.Err()
	}
}

// Authenticate maps a presented token to its tenant. With no tokens
// configured every request is allowed (ok, tenant ""). A wrong or missing
// token is !ok.
func (h *Hub) Authenticate(token string) (tenant string, ok bool) {
	if len(h.deps.Tokens) == 0 {
		return "", true
	}
	if token == "" {
		return "", false
	}
	for tok, ten := range h.deps.Tokens {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(token)) == 1 {
			return ten, true
		}
	}
	return "", false
}

// AuthRequired reports whether tokens are configured.
func (h *Hub) AuthRequired() bool { return len(h.deps.Tokens) > 0 }

// Check applies the line and attribute limits to e: an entry above them
// becomes Bad, dead-lettered with the reason that names the limit.
func (h *Hub) Check(e *producer.Entry) {
	if e.Bad != "" {
		return
	}
	if len(e.Text) > h.rc.MaxLineBytes {
		e.Bad = fmt.Sprintf("line of %d bytes exceeds producer.receivers.max_line_bytes %d", len(e.Text), h.rc.MaxLineBytes)
		return
	}
	if len(e.Attrs) > h.rc.MaxAttrs {
		e.Bad = fmt.Sprintf("%d attributes exceed producer.receivers.max_attrs %d", len(e.Attrs), h.rc.MaxAttrs)
		return
	}
	n := 0
	for _, a := range e.Attrs {
		n += len(a.Key) + len(a.Value)
	}
	if n > h.rc.MaxAttrBytes {
		e.Bad = fmt.Sprintf("attributes of %d bytes exceed producer.receivers.max_attr_bytes %d", n, h.rc.MaxAttrBytes)
	}
}

// weighted is a semaphore of n units that never grants more than n, except
// that one request larger than n is granted when nothing else is held.
type weighted struct {
	mu    sync.Mutex
	n     int64
	held  int64
	freed chan struct{} // closed and replaced on every release
}

func newWeighted(n int64) *weighted { return &weighted{n: n, freed: make(chan struct{})} }

func (w *weighted) tryAcquire(k int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held+k <= w.n || w.held == 0 {
		w.held += k
		return true
	}
	return false
}

func (w *weighted) acquire(ctx context.Context, k int64, stop <-chan struct{}) error {
	for {
		w.mu.Lock()
		if w.held+k <= w.n || w.held == 0 {
			w.held += k
			w.mu.Unlock()
			return nil
		}
		freed := w.freed
		w.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return fmt.Errorf("%w: source stopped", ErrUnavailable)
		}
	}
}

func (w *weighted) release(k int64) {
	w.mu.Lock()
	w.held -= k
	close(w.freed)
	w.freed = make(chan struct{})
	w.mu.Unlock()
}

// Busy reports whether n more bytes would be refused at the in-flight
// bound now: the HTTP receiver answers 429 before reading such a body.
func (h *Hub) Busy(n int64) bool {
	held := h.flight.inUse()
	return held > 0 && held+max(n, 1) > h.rc.MaxInFlightBytes
}

// InFlight is the number of bytes received and not yet durable.
func (h *Hub) InFlight() int64 { return h.flight.inUse() }

func (w *weighted) inUse() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held
}

// ReadBody reads rd (a request's body) to its end into one buffer sized by
// hint (its Content-Length, when within limit), without io.ReadAll's
// doublings and copies. Past limit it returns what it read: the caller,
// which bounds rd, checks the length.
func ReadBody(rd io.Reader, hint, limit int64) ([]byte, error) {
	n := int64(512)
	if hint > 0 && hint <= limit {
		n = hint + 1 // the read that meets the end needs room of its own
	}
	b := make([]byte, 0, n)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
