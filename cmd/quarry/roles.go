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
	"github.com/quarrylake/quarry/pipeline"
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

// setup connects to NATS with c's resolved connection and ensures the
// streams of cfg (checked: see checked). The caller closes r.nc (one
// defer right after setup covers every later error).
func setup(ctx context.Context, e *env, c *common, cfg pipeline.Config, name string) (*role, error) {
	cc := c.conn
	if cc.URL == "" {
		return nil, errUsage{"--nats is required (or QUARRY_NATS_URL, or nats.url in --config)"}
	}
	log, err := c.logger(e.stderr)
	if err != nil {
		return nil, err
	}
	log = log.With("role", name)
	cc.Name = "quarry-" + name
	// A producer's frames must not overtake each other on a reconnect.
	cc.NoReconnectBuffer = strings.HasPrefix(name, "producer")
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	nc, js, err := natsutil.Connect(cctx, cc, log)
	if err != nil {
		return nil, err
	}
	if err := streams.Ensure(cctx, js, cfg.Streams); err != nil {
		nc.Close()
		return nil, fmt.Errorf("streams: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &role{log: log, reg: reg, nc: nc, js: js, hs: health.New(reg, log), c: *c}, nil
}

// serve runs run with the health endpoint beside it.
func (r *role) serve(ctx context.Context, name string, run func(context.Context) error, ready func() error) error {
	r.hs.Add(name, ready)
	r.hs.Add("nats", func() error {
		if !r.nc.IsConnected() {
			return errors.New("not connected")
		}
		return nil
	})
	hl, err := health.Listen(r.c.httpAddr) // an address in use is the role's error
	if err != nil {
		return err
	}
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = r.hs.ServeOn(hctx, hl) }()
	r.log.Info("role started")
	err = run(ctx)
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
	tenant := fs.String("tenant", pipeline.DefaultTenant, "tenant of the lines (producer.tenant in --config)")
	follow := fs.Bool("follow", false, "tail --input")
	subject := fs.Bool("subject", false, "read lines published to quarry.ingest.<tenant>")
	generate := fs.Int("generate", 0, "publish this many generated lines per tenant of --tenants instead")
	tenants := fs.String("tenants", "acme,globex,initech", "generator tenants")
	seed := fs.Int64("seed", 1, "generator seed")
	rate := fs.Float64("rate", 0, "read at most this many lines per second (0: unlimited; producer.rate in --config)")
	et := registerEventTime(fs)
	rf := registerReceivers(fs)
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if _, err := c.resolve(fs, e); err != nil {
		return err
	}
	root := c.cfg
	rf.apply(fs, &root.Producer)
	if err := et.apply(fs, &root.Producer); err != nil {
		return err
	}
	if flagSet(fs)["tenant"] || root.Producer.Tenant == "" {
		root.Producer.Tenant = *tenant
	}
	if *follow {
		root.Producer.Follow = true
	}
	if *rate != 0 {
		root.Producer.Rate = *rate
	}
	root, err := checked(root)
	if err != nil {
		return err
	}
	r, err := setup(ctx, e, &c, root, "producer")
	if err != nil {
		return err
	}
	defer r.nc.Close()
	cfg := root.Producer
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
	case cfg.Receivers.Enabled():
	default:
		return errUsage{"want --input FILE|-, --subject, --generate N or a receiver (--listen-syslog, --listen-syslog-tls, --listen-http, --listen-otlp, --listen-otlp-grpc)"}
	}
	if err != nil {
		return err
	}
	recv, err := listenReceivers(cfg, e.getenv, r.js, r.log, r.reg, e.stderr)
	if err != nil {
		return err
	}
	switch {
	case recv == nil:
	case s == nil:
		s = recv
	default:
		// A line source beside the receivers: both run until ctx ends
		// (or the line source's end).
		r.hs.Add("receivers", recv.Ready)
		line := s
		s = runBoth{line, recv}
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
	if c.cfg.MSSQL == nil {
		return errUsage{"--config FILE with an mssql section is required (capture instances and options; the connection string comes from " + cdc.DSNEnv + ")"}
	}
	if c.conn.URL == "" {
		c.conn.URL = "nats://127.0.0.1:4222" // the mssql producer's default
	}
	root, err := checked(c.cfg)
	dsn := strings.TrimSpace(e.getenv(cdc.DSNEnv))
	if dsn == "" {
		err = errors.Join(err, fmt.Errorf("%s: not set (the SQL Server connection string, e.g. sqlserver://user:pass@host:1433?database=db)", cdc.DSNEnv))
	}
	if err != nil {
		return err
	}
	r, err := setup(ctx, e, &c, root, "producer-mssql")
	if err != nil {
		return err
	}
	defer r.nc.Close()
	return r.serve(ctx, "producer-mssql", func(ctx context.Context) error {
		return cdc.Run(ctx, *root.MSSQL, dsn, cdc.Deps{JS: r.js, Log: r.log, Registerer: r.reg}, r.hs)
	}, func() error { return nil }) // cdc.Run registers the "cdc" check
}

func runMiner(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("miner", flag.ContinueOnError)
	var c common
	c.register(fs, false)
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if _, err := c.resolve(fs, e); err != nil {
		return err
	}
	root, err := checked(c.cfg)
	if err != nil {
		return err
	}
	r, err := setup(ctx, e, &c, root, "miner")
	if err != nil {
		return err
	}
	defer r.nc.Close()
	m, err := miner.New(root.Miner, miner.Deps{JS: r.js, Log: r.log, Registerer: r.reg})
	if err != nil {
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
	if _, err := c.resolve(fs, e); err != nil {
		return err
	}
	root := c.cfg
	if *workers > 0 {
		root.Encoder.Workers = *workers
	}
	if *name != "" {
		root.Encoder.Name = *name
	}
	if *maxAge > 0 {
		root.Encoder.MaxAge = *maxAge
	}
	root, err := checked(root)
	if err != nil {
		return err
	}
	r, err := setup(ctx, e, &c, root, "encoder")
	if err != nil {
		return err
	}
	defer r.nc.Close()
	cfg := root.Encoder
	store, err := openStore(ctx, e, &r.c)
	if err != nil {
		return err
	}
	enc, err := encoder.New(cfg, encoder.Deps{JS: r.js, Store: store, Log: r.log, Registerer: r.reg})
	if err != nil {
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
	if _, err := c.resolve(fs, e); err != nil {
		return err
	}
	root := c.cfg
	if *name != "" {
		root.Committer.Name = *name
	}
	if *leaseTTL > 0 {
		root.Committer.LeaseTTL = *leaseTTL
	}
	root, err := checked(root)
	if err != nil {
		return err
	}
	r, err := setup(ctx, e, &c, root, "committer")
	if err != nil {
		return err
	}
	defer r.nc.Close()
	cfg := root.Committer
	store, err := openStore(ctx, e, &r.c)
	if err != nil {
		return err
	}
	cm, err := committer.New(cfg, committer.Deps{JS: r.js, Store: store, Log: r.log, Registerer: r.reg})
	if err != nil {
		return err
	}
	r.hs.AddInfo("committer", cm.Detail)
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
	if err := natsutil.StopServer(s, natsutil.DefaultShutdownTimeout); err != nil {
		return fmt.Errorf("quarry server: %w", err)
	}
	return nil
}
