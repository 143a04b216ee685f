// Package health serves a process's liveness, readiness and metrics
// endpoints: /healthz answers 200 while the process runs, /readyz answers 200
// only when every registered check returns nil (otherwise 503 with what each
// failing check waits for), and /metrics serves the Prometheus registry.
package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports nil when its component is ready, or what it waits for.
type Check func() error

// Info is a line /readyz shows whatever the verdict (a queue's size, say);
// it never makes the process unready.
type Info func() string

// Server is the health endpoint of one process.
type Server struct {
	mu     sync.Mutex
	checks map[string]Check
	infos  map[string]Info
	gather prometheus.Gatherer
	log    *slog.Logger
}

// New returns a server that serves metrics from g (nil for none).
func New(g prometheus.Gatherer, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{checks: map[string]Check{}, infos: map[string]Info{}, gather: g, log: log}
}

// Add registers a readiness check under name, replacing any earlier one.
func (s *Server) Add(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = c
}

// AddInfo registers a detail line for /readyz under name, replacing any
// earlier one.
func (s *Server) AddInfo(name string, i Info) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.infos[name] = i
}

// details runs every Info, in name order, as "name: line" lines.
func (s *Server) details() []string {
	s.mu.Lock()
	infos := make(map[string]Info, len(s.infos))
	for n, i := range s.infos {
		infos[n] = i
	}
	s.mu.Unlock()
	names := make([]string, 0, len(infos))
	for n := range infos {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, n+": "+infos[n]())
	}
	return out
}

// Ready runs every check and returns their errors joined, each prefixed
// with its name, in name order.
func (s *Server) Ready() error {
	s.mu.Lock()
	names := make([]string, 0, len(s.checks))
	for n := range s.checks {
		names = append(names, n)
	}
	checks := make(map[string]Check, len(s.checks))
	for n, c := range s.checks {
		checks[n] = c
	}
	s.mu.Unlock()
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		if err := checks[n](); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// Handler returns the HTTP handler with /healthz, /readyz and /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		err := s.Ready()
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err.Error())
		} else {
			fmt.Fprintln(w, "ready")
		}
		for _, d := range s.details() {
			fmt.Fprintln(w, d)
		}
	})
	if s.gather != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{}))
	}
	return mux
}

// Serve listens on addr and serves until ctx ends, then shuts down within
// five seconds. An empty addr serves nothing and returns when ctx ends.
func (s *Server) Serve(ctx context.Context, addr string) error {
	l, err := Listen(addr)
	if err != nil {
		return err
	}
	return s.ServeOn(ctx, l)
}

// Listen binds addr for ServeOn (nil for an empty addr). A command binds
// its health address before it starts its work, so that an address in use
// is its error and not a process without metrics.
func Listen(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health listen %s: %w", addr, err)
	}
	return l, nil
}

// ServeOn serves on l (from Listen) until ctx ends, then shuts down within
// five seconds. A nil l serves nothing and returns when ctx ends.
func (s *Server) ServeOn(ctx context.Context, l net.Listener) error {
	if l == nil {
		<-ctx.Done()
		return nil
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	s.log.Info("health endpoint listening", "addr", l.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("health serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-errc
	return nil
}
