package encoder

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/streams"
)

// Stage is the stage name used for dead letters.
const Stage = "encoder"

// ErrRunning is returned by a second call of Run.
var ErrRunning = errors.New("encoder already ran")

// Encoder is an encoder process: Config.Workers workers sharing the durable
// consumer streams.EncoderConsumer.
type Encoder struct {
	cfg      Config
	js       jetstream.JetStream
	store    objstore.Store
	log      *slog.Logger
	m        *metrics
	instance string
	texts    *texts

	stopReq   chan struct{} // closed by Shutdown: drain
	force     chan struct{} // closed by Shutdown when its ctx expires: abandon now
	done      chan struct{} // closed when Run returned
	stopOnce  sync.Once
	forceOnce sync.Once

	mu      sync.Mutex
	started bool
	phase   string // "", "running", "draining", "stopped"
	workers []*worker

	// crashed is set by the test hook crash: workers return without acking
	// or naking anything, as if the process died.
	crashMu sync.Mutex
	crashed bool
	crash   context.CancelFunc
	// hooks for tests; nil in production.
	afterReport func(w *worker, reportID string)
	// cpuUsed is the process's CPU time (cputime.Used) and cpuWaited the
	// time its threads waited for a CPU (cputime.Waited); tests replace them.
	cpuUsed, cpuWaited func() (time.Duration, bool)
}

// New checks cfg (after Defaults) and returns an encoder ready to Run.
func New(cfg Config, deps Deps) (*Encoder, error) {
	cfg = cfg.Defaults()
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if deps.JS == nil {
		errs = append(errs, errors.New("encoder: deps.JS is nil"))
	}
	if deps.Store == nil {
		errs = append(errs, errors.New("encoder: deps.Store is nil"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := &Encoder{
		cfg:      cfg,
		js:       deps.JS,
		store:    deps.Store,
		m:        newMetrics(deps.Registerer),
		instance: cfg.Name + "-" + runToken(),
		texts:    newTexts(deps.JS),
		stopReq:  make(chan struct{}),
		force:    make(chan struct{}),
		done:     make(chan struct{}),
	}
	e.log = log.With("stage", Stage, "instance", e.instance)
	return e, nil
}

// Instance is this process's encoder instance id: Config.Name plus a random
// run token. Worker i writes as Instance()+"-"+i.
func (e *Encoder) Instance() string { return e.instance }

// WriterIDs are the writer ids of the workers: the file-name and report
// subject token of each.
func (e *Encoder) WriterIDs() []string {
	ids := make([]string, e.cfg.Workers)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", e.instance, i)
	}
	return ids
}

// ConsumerConfig is the config of the shared durable consumer.
func (c Config) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       streams.EncoderConsumer,
		Description:   "quarry encoders: mined batches to Parquet",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxAckPending: c.MaxAckPending,
		MaxDeliver:    c.MaxDeliver,
		MaxWaiting:    4096,
	}
}

// EnsureConsumer creates the shared consumer, or updates it to cfg's
// settings (ack wait, ack pending, deliveries) if it exists.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Consumer, error) {
	ctx, cancel := backoff.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := js.CreateOrUpdateConsumer(ctx, streams.MinedStream, cfg.Defaults().ConsumerConfig())
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %s: %w", streams.EncoderConsumer, streams.MinedStream, err)
	}
	return c, nil
}

// Run binds the consumer and runs the workers until ctx is canceled or
// Shutdown is called; it then drains within Config.DrainTimeout (stop
// fetching, flush, wait for verdicts, nak the rest) and returns nil. It
// returns an error only when it cannot start.
func (e *Encoder) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return ErrRunning
	}
	e.started = true
	e.phase = "starting"
	e.mu.Unlock()
	defer close(e.done)
	defer e.setPhase("stopped")
	select {
	case <-e.stopReq:
		return nil
	default:
	}

	cons, err := EnsureConsumer(ctx, e.js, e.cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil // canceled before it started: nothing to drain
		}
		return err
	}
	kvCtx, cancel := backoff.WithTimeout(ctx, 30*time.Second)
	kv, err := e.js.KeyValue(kvCtx, streams.VerdictsBucket)
	cancel()
	if err != nil {
		return fmt.Errorf("key-value bucket %s: %w", streams.VerdictsBucket, err)
	}

	// soft ends the fetching; hard ends the drain.
	soft, softCancel := context.WithCancel(ctx)
	defer softCancel()
	hard, hardCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hardCancel()
	e.crashMu.Lock()
	e.crash = hardCancel
	e.crashMu.Unlock()
	e.setPhase("running")
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-soft.Done():
		case <-e.stopReq:
			softCancel()
		case <-hard.Done():
			return
		}
		e.setPhase("draining")
		t := time.NewTimer(e.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			hardCancel()
		case <-e.force:
			hardCancel()
		case <-hard.Done():
		}
	})

	// The records table's layout (lake.Layout) decides the files'
	// partitions. A worker that does not know it yet (no table, or the read
	// failed) reads it again at its flushes until the table exists.
	layout, settled, err := lake.ReadLayout(ctx, e.store)
	if err != nil {
		e.log.Warn("records layout not read, read again at the first flush", "err", err)
	}
	var workers sync.WaitGroup
	ws := make([]*worker, e.cfg.Workers)
	for i, id := range e.WriterIDs() {
		ws[i] = newWorker(e, i, id, cons, kv)
		ws[i].layout, ws[i].settled = layout, settled
	}
	e.mu.Lock()
	e.workers = ws
	e.mu.Unlock()
	e.log.Info("encoder started", "workers", e.cfg.Workers, "store", e.store.String())
	for _, w := range ws {
		workers.Go(func() { w.run(soft, hard) })
	}
	workers.Wait()
	hardCancel()
	wg.Wait()
	if !e.isCrashed() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if nc := e.js.Conn(); nc != nil {
			_ = nc.FlushWithContext(fctx) // deliver the last acks and naks
		}
		cancel()
	}
	e.log.Info("encoder stopped")
	return nil
}

// Shutdown asks Run to drain and waits until it returned. When ctx ends
// first, the drain is cut short (everything still held is nak'ed at once)
// and Shutdown returns ctx's error after Run returned. It is safe to call
// more than once, concurrently and before Run.
func (e *Encoder) Shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() { close(e.stopReq) })
	e.mu.Lock()
	started := e.started
	e.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
	}
	e.forceOnce.Do(func() { close(e.force) })
	<-e.done
	return ctx.Err()
}

// Ready reports nil while the encoder runs normally, else what it waits
// for: not started, draining, a verdict overdue, uploads or fetches failing.
func (e *Encoder) Ready() error {
	e.mu.Lock()
	phase, ws := e.phase, e.workers
	e.mu.Unlock()
	switch phase {
	case "running":
	case "":
		return errors.New("encoder not started")
	default:
		return fmt.Errorf("encoder %s", phase)
	}
	var errs []error
	for _, w := range ws {
		if s := w.getStatus(); s != "" {
			errs = append(errs, fmt.Errorf("worker %s: %s", w.id, s))
		}
	}
	return errors.Join(errs...)
}

func (e *Encoder) setPhase(p string) {
	e.mu.Lock()
	if e.phase != "stopped" {
		e.phase = p
	}
	e.mu.Unlock()
}

// crashNow simulates a process crash (tests): every worker stops at once
// without acking, naking, deleting or reporting anything more.
func (e *Encoder) crashNow() {
	e.crashMu.Lock()
	e.crashed = true
	c := e.crash
	e.crashMu.Unlock()
	if c != nil {
		c()
	}
}

func (e *Encoder) isCrashed() bool {
	e.crashMu.Lock()
	defer e.crashMu.Unlock()
	return e.crashed
}

// runToken is 6 random base-32 characters.
func runToken() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var b [6]byte
	_, _ = rand.Read(b[:])
	var s strings.Builder
	for _, c := range b {
		s.WriteByte(alphabet[c&31])
	}
	return s.String()
}
