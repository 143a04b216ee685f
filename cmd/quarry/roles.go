package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/quarrylake/quarry/committer"
	"github.com/quarrylake/quarry/encoder"
	"github.com/quarrylake/quarry/internal/health"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/miner"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/cdc"
	"github.com/quarrylake/quarry/streams"
)

func init() {
	register(&command{name: "producer", summary: "publish lines (file, stdin, NATS, generator) or SQL Server CDC ('producer mssql') to the WAL", run: runProducer})
	register(&command{name: "miner", summary: "mine the WAL into templates (one per cluster)", run: runMiner})
	register(&command{name: "encoder", summary: "write mined batches as Parquet to the lake (scale out freely)", run: runEncoder})
	register(&command{name: "committer", summary: "commit reported files to Delta and advance the high-water (one active, others standby)", run: runCommitter})
	register(&command{name: "server", summary: "run a standalone embedded NATS JetStream server (sync-always) for development and tests", run: runServer})
}

// role is what a role process needs: connection, logger, metrics, health.
type role struct {
	log *slog.Logger
	reg *prometheus.Registry
	nc  *nats.Conn
	js  jetstream.JetStream
	hs  *health.Server
	c   common
}

// setup resolves config, connects to NATS and ensures the streams.
func setup(ctx context.Context, fs *flag.FlagSet, e *env, c *common, name string) (*role, error) {
	cc, err := c.resolve(fs, e)
	if err != nil {
		return nil, err
	}
	if cc.URL == "" {
		return nil, errUsage{"--nats is required (or QUARRY_NATS_URL, or nats.url in --config)"}
	}
	log, err := c.logger(e.stderr)
	if err != nil {
		return nil, err
	}
	log = log.With("role", name)
	var scfg streams.Config
	if err := loadSection(c.config, "streams", &scfg); err != nil {
		return nil, err
	}
	scfg = scfg.Defaults()
	if err := scfg.Validate(); err != nil {
		return nil, err
	}
	cc.Name = "quarry-" + name
	// A producer's frames must not overtake each other on a reconnect.
	cc.NoReconnectBuffer = name == "producer"
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	nc, js, err := natsutil.Connect(cctx, cc, log)
	if err != nil {
		return nil, err
	}
	if err := streams.Ensure(cctx, js, scfg); err != nil {
		nc.Close()
		return nil, fmt.Errorf("streams: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &role{log: log, reg: reg, nc: nc, js: js, hs: health.New(reg, log), c: *c}, nil
}

// serve runs run with the health endpoint beside it, and closes the
// connection after run returns.
func (r *role) serve(ctx context.Context, name string, run func(context.Context) error, ready func() error) error {
	defer r.nc.Close()
	r.hs.Add(name, ready)
	r.hs.Add("nats", func() error {
		if !r.nc.IsConnected() {
			return errors.New("not connected")
		}
		return nil
	})
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = r.hs.Serve(hctx, r.c.httpAddr) }()
	r.log.Info("role started")
	err := run(ctx)
	cancel()
	wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	r.log.Info("role stopped")
	return nil
}

func openStore(ctx context.Context, e *env, c *common) (objstore.Store, error) {
	if c.lake == "" {
		return nil, errUsage{"--lake is required (or QUARRY_LAKE, or lake.url in --config)"}
	}
	store, err := objstore.Open(ctx, c.lake, s3Options(e))
	if err != nil {
		return nil, err
	}
	return withFaults(e, store, slog.New(slog.NewTextHandler(e.stderr, nil)))
}

func runProducer(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "mssql" {
		return runProducerMSSQL(ctx, e, args[1:])
	}
	fs := flag.NewFlagSet("producer", flag.ContinueOnError)
	var c common
	c.register(fs, false)
	input := fs.String("input", "", "FILE or - for stdin; empty with --subject serves quarry.ingest.<tenant>")
	tenant := fs.String("tenant", "default", "tenant of the lines")
	follow := fs.Bool("follow", false, "tail --input")
	subject := fs.Bool("subject", false, "read lines published to quarry.ingest.<tenant>")
	generate := fs.Int("generate", 0, "publish this many generated lines per tenant of --tenants instead")
	tenants := fs.String("tenants", "acme,globex,initech", "generator tenants")
	seed := fs.Int64("seed", 1, "generator seed")
	rate := fs.Float64("rate", 0, "read at most this many lines per second (0: unlimited; producer.rate in --config)")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	r, err := setup(ctx, fs, e, &c, "producer")
	if err != nil {
		return err
	}
	var cfg producer.Config
	if err := loadSection(c.config, "producer", &cfg); err != nil {
		return err
	}
	cfg.Tenant = *tenant
	if *follow {
		cfg.Follow = true
	}
	if *rate != 0 {
		cfg.Rate = *rate
	}
	deps := producer.Deps{JS: r.js, Log: r.log, Registerer: r.reg}
	type src interface {
		Run(context.Context) error
		Ready() error
	}
	var s src
	switch {
	case *generate > 0:
		s, err = producer.NewGenerate(producer.GenerateConfig{Seed: *seed, Tenants: strings.Split(*tenants, ","), LinesPerTenant: *generate, Lines: cfg}, deps)
	case *input == "-":
		s, err = producer.NewReader(cfg, deps, e.stdin)
	case *input != "":
		s, err = producer.NewFile(cfg, deps, *input)
	case *subject:
		s, err = producer.NewSubject(cfg, deps)
	default:
		r.nc.Close()
		return errUsage{"want --input FILE|-, --subject or --generate N"}
	}
	if err != nil {
		r.nc.Close()
		return err
	}
	return r.serve(ctx, "producer", s.Run, s.Ready)
}

func runProducerMSSQL(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("producer mssql", flag.ContinueOnError)
	var c common
	c.register(fs, false)
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if _, err := c.resolve(fs, e); err != nil {
		return err
	}
	if c.config == "" {
		return errUsage{"--config FILE is required (capture instances and options; the connection string comes from " + cdc.DSNEnv + ")"}
	}
	cfg, dsn, err := cdc.LoadConfig(c.config, e.getenv)
	if err != nil {
		return err
	}
	if c.natsURL != "" {
		cfg.NATS.URL = c.natsURL
	}
	log, err := c.logger(e.stderr)
	if err != nil {
		return err
	}
	log = log.With("role", "producer-mssql")
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cfg.NATS.NoReconnectBuffer = true // frames in order across reconnects
	nc, js, err := natsutil.Connect(cctx, cfg.NATS, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := streams.Ensure(cctx, js, streams.Config{}.Defaults()); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	hs := health.New(reg, log)
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	go hs.Serve(hctx, c.httpAddr)
	return cdc.Run(ctx, cfg, dsn, cdc.Deps{JS: js, Log: log, Registerer: reg}, hs)
}

func runMiner(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("miner", flag.ContinueOnError)
	var c common
	c.register(fs, false)
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	r, err := setup(ctx, fs, e, &c, "miner")
	if err != nil {
		return err
	}
	var cfg miner.Config
	if err := loadSection(c.config, "miner", &cfg); err != nil {
		return err
	}
	m, err := miner.New(cfg, miner.Deps{JS: r.js, Log: r.log, Registerer: r.reg})
	if err != nil {
		r.nc.Close()
		return err
	}
	return r.serve(ctx, "miner", m.Run, m.Ready)
}

func runEncoder(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("encoder", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	workers := fs.Int("workers", 0, "workers in this process (default from config, else 1)")
	name := fs.String("name", "", "encoder name (default hostname-pid)")
	maxAge := fs.Duration("max-age", 0, "flush a worker's buffer when its oldest batch is this old (default 5s)")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	r, err := setup(ctx, fs, e, &c, "encoder")
	if err != nil {
		return err
	}
	var cfg encoder.Config
	if err := loadSection(c.config, "encoder", &cfg); err != nil {
		return err
	}
	if *workers > 0 {
		cfg.Workers = *workers
	}
	if *name != "" {
		cfg.Name = *name
	}
	if *maxAge > 0 {
		cfg.MaxAge = *maxAge
	}
	store, err := openStore(ctx, e, &r.c)
	if err != nil {
		r.nc.Close()
		return err
	}
	enc, err := encoder.New(cfg, encoder.Deps{JS: r.js, Store: store, Log: r.log, Registerer: r.reg})
	if err != nil {
		r.nc.Close()
		return err
	}
	return r.serve(ctx, "encoder", enc.Run, enc.Ready)
}

func runCommitter(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("committer", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	name := fs.String("name", "", "committer name in the lease (default hostname-pid-random)")
	leaseTTL := fs.Duration("lease-ttl", 0, "lease duration (default 10s)")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	r, err := setup(ctx, fs, e, &c, "committer")
	if err != nil {
		return err
	}
	var cfg committer.Config
	if err := loadSection(c.config, "committer", &cfg); err != nil {
		return err
	}
	if *name != "" {
		cfg.Name = *name
	}
	if *leaseTTL > 0 {
		cfg.LeaseTTL = *leaseTTL
	}
	store, err := openStore(ctx, e, &r.c)
	if err != nil {
		r.nc.Close()
		return err
	}
	cm, err := committer.New(cfg, committer.Deps{JS: r.js, Store: store, Log: r.log, Registerer: r.reg})
	if err != nil {
		r.nc.Close()
		return err
	}
	return r.serve(ctx, "committer", cm.Run, cm.Ready)
}

func runServer(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	data := fs.String("data", "./data", "store directory (DIR/nats)")
	host := fs.String("host", "127.0.0.1", "listen host")
	port := fs.Int("port", 4222, "client port")
	noSync := fs.Bool("no-sync-always", false, "do not fsync every write (acks are then not durable)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error")
	natsConfig := fs.String("nats-config", "", "a nats-server config file (users and permissions, TLS); the flags above override its store, address and sync")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	c := common{logLevel: *logLevel}
	log, err := c.logger(e.stderr)
	if err != nil {
		return err
	}
	s, err := natsutil.StartServer(natsutil.ServerConfig{
		StoreDir: filepath.Join(*data, "nats"), Host: *host, Port: *port, SyncAlways: !*noSync,
		ConfigFile: *natsConfig,
	}, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "nats server listening on %s\n", s.ClientURL())
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}
