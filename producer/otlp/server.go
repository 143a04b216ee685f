package otlp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/grpc"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/streams"
)

// TenantHeader names a request's tenant (gRPC: metadata x-quarry-tenant).
const TenantHeader = "X-Quarry-Tenant"

// Config says where the server listens.
type Config struct {
	// HTTPAddr serves POST /v1/logs; empty: off.
	HTTPAddr string
	// GRPCAddr serves LogsService/Export; empty: off.
	GRPCAddr string
	// TLS, when set, serves both over TLS.
	TLS *tls.Config
}

// Server receives OTLP logs over HTTP and gRPC and writes them through an
// ingest.Hub.
type Server struct {
	hub *ingest.Hub
	rc  producer.ReceiversConfig
	log *slog.Logger

	httpL, grpcL net.Listener
	httpSrv      *http.Server
	grpcSrv      *grpc.Server
	closeOnce    sync.Once
}

// Listen opens the listeners of cfg (port 0 picks one) and returns the
// server; Run serves them.
func Listen(cfg Config, hub *ingest.Hub) (*Server, error) {
	s := &Server{hub: hub, rc: hub.Config(), log: hub.Log().With("receiver", "otlp")}
	listen := func(what, addr string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("otlp %s listen %s: %w", what, addr, err)
		}
		if cfg.TLS != nil && what == "http" {
			l = tls.NewListener(l, cfg.TLS)
		}
		return l, nil
	}
	var err error
	if cfg.HTTPAddr != "" {
		if s.httpL, err = listen("http", cfg.HTTPAddr); err != nil {
			return nil, err
		}
		s.httpSrv = &http.Server{
			Handler:           s.Handler(),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       5 * time.Minute,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		}
	}
	if cfg.GRPCAddr != "" {
		if s.grpcL, err = listen("grpc", cfg.GRPCAddr); err != nil {
			s.Close()
			return nil, err
		}
		s.grpcSrv = s.newGRPC(cfg.TLS)
	}
	return s, nil
}

// Addrs are the bound addresses (nil: off).
func (s *Server) Addrs() (httpAddr, grpcAddr net.Addr) {
	if s.httpL != nil {
		httpAddr = s.httpL.Addr()
	}
	if s.grpcL != nil {
		grpcAddr = s.grpcL.Addr()
	}
	return
}

// Close closes the listeners of a server that is not running; safe to
// call twice.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		for _, c := range []io.Closer{s.httpL, s.grpcL} {
			if c != nil {
				c.Close()
			}
		}
	})
}

// Run serves until ctx ends, then shuts down: requests in progress get
// their answers (each waits at most ack_timeout) before it returns.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 2)
	n := 0
	if s.httpSrv != nil {
		n++
		go func() {
			if err := s.httpSrv.Serve(s.httpL); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("otlp http serve: %w", err)
				return
			}
			errc <- nil
		}()
	}
	if s.grpcSrv != nil {
		n++
		go func() {
			if err := s.grpcSrv.Serve(s.grpcL); err != nil {
				errc <- fmt.Errorf("otlp grpc serve: %w", err)
				return
			}
			errc <- nil
		}()
	}
	var errs []error
	select {
	case err := <-errc:
		n--
		errs = append(errs, err)
	case <-ctx.Done():
	}
	deadline := s.rc.AckTimeout + 5*time.Second
	var wg sync.WaitGroup
	if s.httpSrv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			if err := s.httpSrv.Shutdown(sctx); err != nil {
				s.httpSrv.Close()
			}
		}()
	}
	if s.grpcSrv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.AfterFunc(deadline, s.grpcSrv.Stop)
			defer t.Stop()
			s.grpcSrv.GracefulStop()
		}()
	}
	wg.Wait()
	for ; n > 0; n-- {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

// Errors export answers with; the transports map them to their codes.
var (
	// errUnauthenticated: no token or an unknown one (401,
	// UNAUTHENTICATED).
	errUnauthenticated = errors.New("missing or unknown token (Authorization: Bearer)")
	// errForbidden: the token's tenant is not the header's (403,
	// PERMISSION_DENIED).
	errForbidden = errors.New("tenant not allowed for this token")
	// errBadRequest: the request does not decode or names a bad tenant
	// (400, INVALID_ARGUMENT).
	errBadRequest = errors.New("bad request")
)

// tenant resolves a request's tenant from its bearer token (authz, the
// Authorization value) and its header tenant: the token's, which the
// header must match; without tokens configured the header's, else the
// default.
func (s *Server) tenant(authz, explicit string) (string, error) {
	if s.hub.AuthRequired() {
		scheme, tok, _ := strings.Cut(authz, " ")
		if !strings.EqualFold(scheme, "bearer") {
			tok = ""
		}
		t, ok := s.hub.Authenticate(strings.TrimSpace(tok))
		if !ok {
			return "", errUnauthenticated
		}
		if explicit != "" && explicit != t {
			return "", fmt.Errorf("%w: the token writes for tenant %q, not %q", errForbidden, t, explicit)
		}
		return t, nil
	}
	if explicit == "" {
		explicit = s.hub.DefaultTenant()
	}
	if err := streams.CheckToken(explicit); err != nil {
		return "", fmt.Errorf("%w: tenant: %v", errBadRequest, err)
	}
	return explicit, nil
}

// export writes a request's records, es (entries with the hub's check),
// for tenant (size bytes on the wire) and returns the answer once they
// are durable: partial_success counts the records dead-lettered for a
// limit.
func (s *Server) export(ctx context.Context, receiver, tenant string, es []producer.Entry, size int) (*collogspb.ExportLogsServiceResponse, error) {
	if _, err := s.hub.Ingest(ctx, receiver, tenant, es, int64(size)); err != nil {
		return nil, err
	}
	resp := &collogspb.ExportLogsServiceResponse{}
	var rejected int64
	var reasons []string
	for i := range es {
		if es[i].Bad == "" {
			continue
		}
		rejected++
		if len(reasons) < 3 {
			reasons = append(reasons, es[i].Bad)
		}
	}
	if rejected > 0 {
		msg := strings.Join(reasons, "; ")
		if rejected > int64(len(reasons)) {
			msg += fmt.Sprintf("; and %d more", rejected-int64(len(reasons)))
		}
		resp.PartialSuccess = &collogspb.ExportLogsPartialSuccess{RejectedLogRecords: rejected,
			ErrorMessage: "dead-lettered: " + msg}
	}
	return resp, nil
}
