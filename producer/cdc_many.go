package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/producer/sqlserver"
)

// CDCGroup is the set of CDC streams StartMany started.
type CDCGroup struct {
	streams []*CDCStream
	cancels []context.CancelFunc
	dones   []chan struct{}
	mu      sync.Mutex
	errs    map[string]error
}

// Streams are the group's streams in start order.
func (g *CDCGroup) Streams() []*CDCStream { return g.streams }

// Ready is nil when every stream is ready, else every stream's reason,
// joined.
func (g *CDCGroup) Ready() error {
	var errs []error
	for _, s := range g.streams {
		if err := s.Ready(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}

// StartMany starts one stream per configured capture instance (cfg's
// CaptureInstances and Tables; per-table settings matched ignoring case),
// one after the other: each start waits until the stream has loaded its
// position and started reading. A start that fails stops the streams
// already started (they drain) and returns its error. Two configured
// capture instances of the same table are an error (ErrCDCConflict): list
// the older one, its stream follows the newer one.
//
// Once started, the streams are independent: a stream that fails at run
// time (ErrPurgedRange, say) stops alone and the others go on. Cancelling
// ctx stops them all (each drains). See AwaitAll and StopAll.
func StartMany(ctx context.Context, cfg CDCConfig, deps CDCDeps) (*CDCGroup, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Source == nil {
		return nil, errors.New("cdc: deps.Source is nil")
	}
	names := cfg.Instances()
	lctx, cancel := backoff.WithTimeout(ctx, cfg.QueryTimeout)
	cis, err := deps.Source.CaptureInstances(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("cdc: %w", err)
	}
	if err := cdcConflicts(names, cis); err != nil {
		return nil, err
	}
	g := &CDCGroup{errs: map[string]error{}}
	for _, n := range names {
		s, err := NewCDCStream(cfg, n, deps)
		if err != nil {
			StopAll(g)
			return nil, fmt.Errorf("cdc %s: %w", n, err)
		}
		sctx, scancel := context.WithCancel(ctx)
		done := make(chan struct{})
		g.streams = append(g.streams, s)
		g.cancels = append(g.cancels, scancel)
		g.dones = append(g.dones, done)
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
			StopAll(g)
			if err == nil {
				err = context.Cause(ctx)
				if err == nil {
					err = errors.New("stopped before it started")
				}
			}
			return nil, fmt.Errorf("cdc start %s: %w", n, err)
		case <-ctx.Done():
			StopAll(g)
			return nil, fmt.Errorf("cdc start %s: %w", n, ctx.Err())
		}
	}
	return g, nil
}

func cdcConflicts(names []string, cis []sqlserver.CaptureInstance) error {
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
				errs = append(errs, fmt.Errorf("%w: %s and %s both capture %s (list the older one; its stream continues in the newer one)", ErrCDCConflict, ca.Name, cb.Name, ca.Table()))
			}
		}
	}
	return errors.Join(errs...)
}

// AwaitAll waits until every stream of g has ended and returns the error
// of each stream that failed, by configured capture instance (empty when
// none failed). It does not stop anything: cancel StartMany's ctx or call
// StopAll.
func AwaitAll(g *CDCGroup) map[string]error {
	if g == nil {
		return map[string]error{}
	}
	for _, d := range g.dones {
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

// StopAll stops every stream of g (each drains: waits for its in-flight
// acks and saves its position) and waits for them.
func StopAll(g *CDCGroup) {
	if g == nil {
		return
	}
	for _, c := range g.cancels {
		c()
	}
	for _, d := range g.dones {
		<-d
	}
}

// RunCDC is `quarry producer mssql`: it opens SQL Server with dsn, starts
// every configured stream on js, waits until ctx ends or every stream has
// ended, and returns the failed streams' errors joined (nil after a clean
// stop). Wire it as:
//
//	cfg, dsn, err := producer.LoadCDCConfig(path, os.Getenv)
//	... natsutil.Connect(ctx, cfg.NATS, log) ...
//	return producer.RunCDC(ctx, cfg, dsn, js, log, reg)
func RunCDC(ctx context.Context, cfg CDCConfig, dsn string, js jetstream.JetStream, log *slog.Logger, reg prometheus.Registerer) error {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	db, err := sqlserver.Open(ctx, dsn, cfg.SourceOptions())
	if err != nil {
		return err
	}
	defer db.Close()
	g, err := StartMany(ctx, cfg, CDCDeps{JS: js, Source: db, Log: log, Registerer: reg})
	if err != nil {
		return err
	}
	failed := AwaitAll(g)
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
