package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/quarrylake/quarry/internal/health"
	"github.com/quarrylake/quarry/internal/lake"
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
	learnFiles := fs.Int("learn-pairs", defaultLearnFiles, "the newest records files whose byte pairs serve learns in the background when their footers lack them (0: none)")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *learnFiles < 0 {
		return errUsage{fmt.Sprintf("--learn-pairs %d: want 0 or more", *learnFiles)}
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
	learned := prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_serve_pairs_learned_files_total",
		Help: "Records files written without their versions' byte pairs (a busy encoder's) whose pairs serve learned from their rows."})
	passes := prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_serve_pairs_passes_total",
		Help: "Passes of serve's byte pair learner over the lake's records files (one at start, then every 30s)."})
	reg.MustRegister(learned, passes)
	lctx, stopLearning := context.WithCancel(ctx)
	learning := make(chan struct{})
	go func() {
		defer close(learning)
		if *learnFiles > 0 {
			learnPairs(lctx, lk, *learnFiles, log, learned, passes, pairsEvery)
		}
	}()
	defer func() {
		stopLearning()
		<-learning
	}()
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

// defaultLearnFiles is --learn-pairs: the newest records files serve learns
// the byte pairs of (today's, where a busy encoder's files are). Each is
// read whole once: over object storage, their bytes are downloaded once.
const defaultLearnFiles = 1024

// pairsEvery is how often serve looks for records files it has not learned
// the byte pairs of (learnPairs): new files arrive as the pipeline commits.
const pairsEvery = 30 * time.Second

// learnPairs gives the newest records files of the lake written without
// their versions' byte pairs (a busy encoder's files, until compaction
// rewrites them) the pairs learned from their rows (lake.LearnPairs), now
// and then every interval, until ctx ends (learned counts the files,
// passes the calls). A search for a term in no template's text, an id or a
// name, then rules out the versions whose parameters never hold its bytes
// side by side before reading their rows, as it does over compacted files
// (docs/serve.md). Each file is read once, in the background of the
// searches; a pass that fails (the snapshot, the templates, a file that
// does not open) is logged and tried again at the next interval.
func learnPairs(ctx context.Context, lk *lake.Lake, newest int, log *slog.Logger, learned, passes prometheus.Counter, interval time.Duration) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := lk.LearnPairs(ctx, newest)
		learned.Add(float64(n))
		passes.Inc()
		if err != nil && ctx.Err() == nil {
			log.Warn("learn byte pairs", "err", err)
		} else if n > 0 {
			log.Debug("learned byte pairs", "files", n)
		}
		t.Reset(interval)
	}
}
