package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/httpin"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/producer/otlp"
	"github.com/quarrylake/quarry/producer/syslog"
)

// receiverFlags are the receivers' listen flags of `quarry producer` and
// `quarry run`; set, they override producer.receivers in --config.
type receiverFlags struct {
	syslog, syslogTLS, http, otlp, otlpGRPC *string
}

func registerReceivers(fs *flag.FlagSet) *receiverFlags {
	return &receiverFlags{
		syslog:    fs.String("listen-syslog", "", "receive syslog on ADDR over TCP and UDP (producer.receivers.listen_syslog)"),
		syslogTLS: fs.String("listen-syslog-tls", "", "receive syslog over TLS on ADDR (producer.receivers.listen_syslog_tls; needs tls_cert and tls_key)"),
		http:      fs.String("listen-http", "", "serve /_bulk, /<tenant>/_bulk and /jsonline?tenant=T on ADDR (producer.receivers.listen_http)"),
		otlp:      fs.String("listen-otlp", "", "receive OTLP logs over HTTP (POST /v1/logs) on ADDR (producer.receivers.listen_otlp)"),
		otlpGRPC:  fs.String("listen-otlp-grpc", "", "receive OTLP logs over gRPC on ADDR (producer.receivers.listen_otlp_grpc)"),
	}
}

func (r *receiverFlags) apply(fs *flag.FlagSet, cfg *producer.Config) {
	set := flagSet(fs)
	if set["listen-syslog"] {
		cfg.Receivers.ListenSyslog = *r.syslog
	}
	if set["listen-syslog-tls"] {
		cfg.Receivers.ListenSyslogTLS = *r.syslogTLS
	}
	if set["listen-http"] {
		cfg.Receivers.ListenHTTP = *r.http
	}
	if set["listen-otlp"] {
		cfg.Receivers.ListenOTLP = *r.otlp
	}
	if set["listen-otlp-grpc"] {
		cfg.Receivers.ListenOTLPGRPC = *r.otlpGRPC
	}
}

// receivers are the network receivers of one process over one ingest hub.
type receivers struct {
	hub    *ingest.Hub
	syslog *syslog.Server
	http   *httpin.Server
	otlp   *otlp.Server
}

// listenReceivers opens the listeners of cfg.Receivers (nil, nil when
// none is set); the tokens come from ingest.TokensEnv, the client
// certificates' tenants from ingest.ClientTenantsEnv.
func listenReceivers(cfg producer.Config, getenv func(string) string, js jetstream.JetStream, log *slog.Logger, reg prometheus.Registerer, stderr io.Writer) (*receivers, error) {
	if !cfg.Receivers.Enabled() {
		return nil, nil
	}
	tokens, err := ingest.ParseTokens(getenv(ingest.TokensEnv))
	if err != nil {
		return nil, err
	}
	clients, err := ingest.ParseClientTenants(getenv(ingest.ClientTenantsEnv))
	if err != nil {
		return nil, err
	}
	hub, err := ingest.New(cfg, ingest.Deps{JS: js, Log: log, Registerer: reg, Tokens: tokens, ClientTenants: clients})
	if err != nil {
		return nil, err
	}
	rc := hub.Config()
	tc, err := ingest.ServerTLS(rc)
	if err != nil {
		return nil, err
	}
	r := &receivers{hub: hub}
	if rc.ListenSyslog != "" || rc.ListenSyslogTLS != "" {
		if r.syslog, err = syslog.Listen(syslog.Config{Addr: rc.ListenSyslog, TLSAddr: rc.ListenSyslogTLS, TLS: tc}, hub); err != nil {
			return nil, err
		}
		tcp, _, tlsAddr := r.syslog.Addrs()
		if tcp != nil {
			fmt.Fprintf(stderr, "quarry: syslog on %s (tcp and udp)\n", tcp)
		}
		if tlsAddr != nil {
			fmt.Fprintf(stderr, "quarry: syslog over tls on %s\n", tlsAddr)
		}
	}
	if rc.ListenHTTP != "" {
		if r.http, err = httpin.Listen(rc.ListenHTTP, tc, hub); err != nil {
			r.close()
			return nil, err
		}
		fmt.Fprintf(stderr, "quarry: http ingest on %s (/_bulk, /<tenant>/_bulk, /jsonline)\n", r.http.Addr())
	}
	if rc.ListenOTLP != "" || rc.ListenOTLPGRPC != "" {
		if r.otlp, err = otlp.Listen(otlp.Config{HTTPAddr: rc.ListenOTLP, GRPCAddr: rc.ListenOTLPGRPC, TLS: tc}, hub); err != nil {
			r.close()
			return nil, err
		}
		h, g := r.otlp.Addrs()
		if h != nil {
			fmt.Fprintf(stderr, "quarry: otlp logs over http on %s (/v1/logs)\n", h)
		}
		if g != nil {
			fmt.Fprintf(stderr, "quarry: otlp logs over grpc on %s\n", g)
		}
	}
	return r, nil
}

// close closes the syslog listeners opened so far, when a later one
// fails (httpin.Server has no Close: its listener goes with the process).
func (r *receivers) close() {
	if r.syslog != nil {
		r.syslog.Close()
	}
}

// Run serves until ctx ends: the servers stop taking input and answer
// what is in flight, then the hub drains its sources.
func (r *receivers) Run(ctx context.Context) error {
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	hubDone := make(chan error, 1)
	go func() { hubDone <- r.hub.Run(hctx) }()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	if r.syslog != nil {
		wg.Add(1)
		go func() { defer wg.Done(); errs[0] = r.syslog.Run(ctx) }()
	}
	if r.http != nil {
		wg.Add(1)
		go func() { defer wg.Done(); errs[1] = r.http.Run(ctx) }()
	}
	if r.otlp != nil {
		wg.Add(1)
		go func() { defer wg.Done(); errs[2] = r.otlp.Run(ctx) }()
	}
	wg.Wait()
	hcancel()
	return errors.Join(append(errs, <-hubDone)...)
}

func (r *receivers) Ready() error { return r.hub.Ready() }

// Stats sums the counters of the tenants' sources.
func (r *receivers) Stats() producer.Stats {
	st := producer.Stats{Source: "receivers"}
	for _, s := range r.hub.Stats() {
		st.Add(s)
	}
	return st
}

func (r *receivers) AckLatencies() *producer.LatencyHistogram { return r.hub.AckLatencies() }

// bothSources runs a line source and the receivers side by side: Run
// returns when both returned (the line source at its end or ctx's, the
// receivers at ctx's end), with the first error.
type bothSources struct {
	a runSource
	r *receivers
}

func (b bothSources) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- b.r.Run(ctx) }()
	err := b.a.Run(ctx)
	return errors.Join(err, <-errc)
}

func (b bothSources) Stats() producer.Stats {
	x := b.a.Stats()
	x.Add(b.r.Stats())
	return x
}

func (b bothSources) AckLatencies() *producer.LatencyHistogram {
	h := producer.NewLatencyHistogram()
	h.Merge(b.a.AckLatencies())
	h.Merge(b.r.AckLatencies())
	return h
}

// runBoth runs a role's line source and the receivers side by side until
// both returned; Ready is the line source's (the receivers report their
// own health check).
type runBoth struct {
	a interface {
		Run(context.Context) error
		Ready() error
	}
	r *receivers
}

func (b runBoth) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- b.r.Run(ctx) }()
	err := b.a.Run(ctx)
	return errors.Join(err, <-errc)
}

func (b runBoth) Ready() error { return b.a.Ready() }
