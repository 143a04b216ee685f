package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/quarrylake/quarry/internal/health"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/web"
)

func init() {
	register(&command{name: "serve", summary: "serve the search API and web page over the lake (and the pipeline's status with --nats)", run: runServe})
}

// defaultServeAddr is where serve listens without --http.
const defaultServeAddr = "127.0.0.1:7070"

// loopbackOnly reports whether addr can only be reached from this host.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runServe(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	access, err := web.AccessFromEnv(e.getenv)
	if err != nil {
		return errUsage{err.Error()}
	}
	if _, err := c.resolve(fs, e); err != nil {
		return err
	}
	addr := c.httpAddr
	if addr == "" {
		addr = defaultServeAddr
	}
	if !access.Enabled() && !loopbackOnly(addr) {
		return errUsage{fmt.Sprintf("--http %s: without credentials (%s, or %s and %s) serve listens on a loopback address only, e.g. 127.0.0.1:7070",
			addr, web.EnvTokens, web.EnvBasicUser, web.EnvBasicPassword)}
	}
	log, err := c.logger(e.stderr)
	if err != nil {
		return err
	}
	log = log.With("role", "serve")
	lk, err := openLake(ctx, fs, e, &c)
	if err != nil {
		return err
	}
	lk.EnableCache() // many queries over one lake: keep footers and templates between them
	var js jetstream.JetStream
	var natsConn *nats.Conn
	if c.conn.URL != "" {
		cc := c.conn
		cc.Name = "quarry-serve"
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		nc, j, err := natsutil.Connect(cctx, cc, log)
		cancel()
		if err != nil {
			return err
		}
		defer nc.Close()
		js = j
		natsConn = nc
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hs := health.New(reg, log)
	hs.Add("lake", func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return lk.Exists(cctx)
	})
	if natsConn != nil {
		hs.Add("nats", func() error {
			if !natsConn.IsConnected() {
				return errors.New("not connected")
			}
			return nil
		})
	}
	srv := web.New(web.Config{}, web.Deps{Searcher: web.LakeSearcher{Lake: lk}, Catalog: lk,
		Status: web.NewStatus(lk, js), Access: access, Log: log})
	mux := http.NewServeMux()
	mux.Handle("/", srv.Handler())
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		mux.Handle(p, hs.Handler())
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	if access.Enabled() {
		log.Info("serve listening", "addr", l.Addr().String(), "access", "credentials required")
	} else {
		log.Warn("serve listening on loopback only: no credentials configured", "addr", l.Addr().String(),
			"hint", "set "+web.EnvTokens+" or "+web.EnvBasicUser+"/"+web.EnvBasicPassword+" to listen elsewhere")
	}
	hsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hsrv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hsrv.Shutdown(sctx); err != nil {
		hsrv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
