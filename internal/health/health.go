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
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports nil when its component is ready, or what it waits for.
type Check func() error

// Server is the health endpoint of one process.
type Server struct {
	mu     sync.Mutex
	checks map[string]Check
	gather prometheus.Gatherer
	log    *slog.Logger
}

// New returns a server that serves metrics from g (nil for none).
func New(g prometheus.Gatherer, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{checks: map[string]Check{}, gather: g, log: log}
}

// Add registers a readiness check under name, replacing any earlier one.
func (s *Server) Add(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = c
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
		if err := s.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.ReplaceAll(err.Error(), "\n", "\n"))
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if s.gather != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{}))
	}
	return mux
}

// Serve listens on addr and serves until ctx ends, then shuts down within
// five seconds. An empty addr serves nothing and returns when ctx ends.
func (s *Server) Serve(ctx context.Context, addr string) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("health listen %s: %w", addr, err)
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
