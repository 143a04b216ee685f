package cdc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/health"
	"github.com/quarrylake/quarry/producer/sqlserver"
)

// Set is the streams of every configured capture instance of one database:
// NewSet, then Start (or Run), then Wait or Stop.
type Set struct {
	cfg  Config
	deps Deps

	mu      sync.Mutex
	phase   string // what a Set not yet started waits for
	started bool   // Start returned nil
	failed  error  // Start's error
	streams []*Stream
	cancels []context.CancelFunc
	dones   []chan struct{}
	errs    map[string]error
}

// NewSet checks cfg (after Defaults) and returns the set of its capture
// instances; nothing runs until Start. deps.Source may still be nil here;
// Start needs it.
func NewSet(cfg Config, deps Deps) (*Set, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Set{cfg: cfg, deps: deps, phase: "not started", errs: map[string]error{}}, nil
}

// Start is NewSet then (*Set).Start.
func Start(ctx context.Context, cfg Config, deps Deps) (*Set, error) {
	g, err := NewSet(cfg, deps)
	if err != nil {
		return nil, err
	}
	if err := g.Start(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

// Streams are the set's streams in start order.
func (g *Set) Streams() []*Stream {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*Stream(nil), g.streams...)
}

// Ready is the readiness check of `quarry producer mssql` (a health.Check):
// nil once Start has started every stream and while each of them reads and
// publishes normally; otherwise it names every capture instance that is
// starting, retrying after an error or stopped (with the error that
// stopped it), joined.
func (g *Set) Ready() error {
	g.mu.Lock()
	streams := append([]*Stream(nil), g.streams...)
	started, failed, phase := g.started, g.failed, g.phase
	g.mu.Unlock()
	var errs []error
	switch {
	case failed != nil:
		errs = append(errs, fmt.Errorf("start failed: %w", failed))
	case !started:
		errs = append(errs, fmt.Errorf("starting (%s): %d of %d capture instances started", phase, len(streams), len(g.cfg.Instances())))
	}
	for _, s := range streams {
		if err := s.Ready(); err != nil {
			errs = append(errs, fmt.Errorf("capture instance %s: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}

func (g *Set) setPhase(p string) {
	g.mu.Lock()
	g.phase = p
	g.mu.Unlock()
}

// Start starts one stream per configured capture instance (cfg's
// CaptureInstances and Tables; per-table settings matched ignoring case),
// one after the other: each start waits until the stream has loaded its
// position and started reading. A start that fails stops the streams
// already started (they drain) and returns its error. Two configured
// capture instances of the same table are an error (ErrConflict): list
// the older one, its stream follows the newer one. Start is called once.
//
// Once started, the streams are independent: a stream that fails at run
// time (ErrPurgedRange, say) stops alone and the others go on. Cancelling
// ctx stops them all (each drains). See Wait and Stop.
func (g *Set) Start(ctx context.Context) (err error) {
	defer func() {
		g.mu.Lock()
		g.started, g.failed = err == nil, err
		g.mu.Unlock()
	}()
	if g.deps.Source == nil {
		return errors.New("cdc: deps.Source is nil")
	}
	g.setPhase("listing capture instances")
	names := g.cfg.Instances()
	lctx, cancel := backoff.WithTimeout(ctx, g.cfg.QueryTimeout)
	cis, err := g.deps.Source.CaptureInstances(lctx)
	cancel()
	if err != nil {
		return fmt.Errorf("cdc: %w", err)
	}
	if err := conflicts(names, cis); err != nil {
		return err
	}
	for _, n := range names {
		g.setPhase("starting " + n)
		s, err := newStream(g.cfg, n, g.deps)
		if err != nil {
			g.Stop()
			return fmt.Errorf("cdc %s: %w", n, err)
		}
		sctx, scancel := context.WithCancel(ctx)
		done := make(chan struct{})
		g.mu.Lock()
		g.streams = append(g.streams, s)
		g.cancels = append(g.cancels, scancel)
		g.dones = append(g.dones, done)
		g.mu.Unlock()
		go func() {
			defer close(done)
			if err := s.Run(sctx); err != nil {
				g.mu.Lock()
				g.errs[s.name] = err
				g.mu.Unlock()
			}
		}()
		select {
		case <-s.Started():
		case <-done:
			g.mu.Lock()
			err := g.errs[s.name]
			g.mu.Unlock()
			g.Stop()
			if err == nil {
				err = context.Cause(ctx)
				if err == nil {
					err = errors.New("stopped before it started")
				}
			}
			return fmt.Errorf("cdc start %s: %w", n, err)
		case <-ctx.Done():
			g.Stop()
			return fmt.Errorf("cdc start %s: %w", n, ctx.Err())
		}
	}
	return nil
}

func conflicts(names []string, cis []sqlserver.CaptureInstance) error {
	byName := map[string]sqlserver.CaptureInstance{}
	for _, c := range cis {
		byName[strings.ToLower(c.Name)] = c
	}
	var errs []error
	for i, a := range names {
		ca, ok := byName[strings.ToLower(a)]
		if !ok {
			continue
		}
		for _, b := range names[i+1:] {
			if cb, ok := byName[strings.ToLower(b)]; ok && ca.SameTable(cb) {
				errs = append(errs, fmt.Errorf("%w: %s and %s both capture %s (list the older one; its stream continues in the newer one)", ErrConflict, ca.Name, cb.Name, ca.Table()))
			}
		}
	}
	return errors.Join(errs...)
}

// Wait waits until every stream of g has ended and returns the error of
// each stream that failed, by configured capture instance (empty when none
// failed). It does not stop anything: cancel Start's ctx or call Stop.
func (g *Set) Wait() map[string]error {
	if g == nil {
		return map[string]error{}
	}
	g.mu.Lock()
	dones := append([]chan struct{}(nil), g.dones...)
	g.mu.Unlock()
	for _, d := range dones {
		<-d
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]error, len(g.errs))
	for k, v := range g.errs {
		out[k] = v
	}
	return out
}

// Stop stops every stream of g (each drains: waits for its in-flight acks
// and saves its position) and waits for them. It is safe to call twice.
func (g *Set) Stop() {
	if g == nil {
		return
	}
	g.mu.Lock()
	cancels := append([]context.CancelFunc(nil), g.cancels...)
	dones := append([]chan struct{}(nil), g.dones...)
	g.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	for _, d := range dones {
		<-d
	}
}

// Run starts the set, waits until ctx ends or every stream has ended, and
// returns the failed streams' errors joined, by capture instance name (nil
// after a clean stop).
func (g *Set) Run(ctx context.Context) error {
	if err := g.Start(ctx); err != nil {
		return err
	}
	failed := g.Wait()
	names := make([]string, 0, len(failed))
	for n := range failed {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		errs = append(errs, fmt.Errorf("capture instance %s: %w", n, failed[n]))
	}
	return errors.Join(errs...)
}

// Checks is where Run registers its readiness check (a *health.Server).
type Checks interface {
	Add(name string, c health.Check)
}

// Run is `quarry producer mssql`: it registers the set's readiness check
// (Ready) as "cdc" with checks (nil: none) before anything else, opens SQL
// Server with dsn as deps.Source, and runs the set of cfg's streams (see
// (*Set).Run). Wire it as:
//
//	root, err := pipeline.Load(path, log) // cfg = *root.MSSQL, dsn from QUARRY_MSSQL_DSN
//	... natsutil.Connect(ctx, cfg.NATS, log) ...
//	hs := health.New(reg, log)
//	return cdc.Run(ctx, cfg, dsn, cdc.Deps{JS: js, Log: log, Registerer: reg}, hs)
func Run(ctx context.Context, cfg Config, dsn string, deps Deps, checks Checks) error {
	g, err := NewSet(cfg, deps)
	if err != nil {
		return err
	}
	if checks != nil {
		checks.Add("cdc", g.Ready)
	}
	g.setPhase("connecting to SQL Server")
	db, err := sqlserver.Open(ctx, dsn, g.cfg.SourceOptions())
	if err != nil {
		g.mu.Lock()
		g.failed = err
		g.mu.Unlock()
		return err
	}
	defer db.Close()
	g.deps.Source = db
	return g.Run(ctx)
}
