package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/committer"
	"github.com/quarrylake/quarry/encoder"
	"github.com/quarrylake/quarry/internal/cputime"
	"github.com/quarrylake/quarry/internal/health"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/pipeline"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

func init() {
	register(&command{name: "run", summary: "run the whole pipeline in one process on an embedded NATS server", run: runRun})
}

// runSource is what feeds an embedded run: a file, stdin, the ingest
// subject or the generator.
type runSource interface {
	Run(ctx context.Context) error
	Stats() producer.Stats
	AckLatencies() *producer.LatencyHistogram
}

func runRun(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var c common
	c.registerEmbedded(fs, true)
	data := fs.String("data", "./data", "data directory: NATS store in DIR/nats, lake in DIR/lake unless --lake")
	input := fs.String("input", "", "ingest FILE (or - for stdin) as one line per record; default: the built-in generator")
	tenant := fs.String("tenant", pipeline.DefaultTenant, "tenant of the --input lines (producer.tenant in --config)")
	compact := fs.Bool("compact", false, "once every line is committed, compact every partition's small files and the templates table's (as committer.compaction does once they close); not with --follow")
	follow := fs.Bool("follow", false, "keep running: tail --input, or serve the ingest subject quarry.ingest.<tenant> when there is no --input")
	lines := fs.Int("lines", 100000, "generator: lines per tenant")
	tenants := fs.String("tenants", "acme,globex,initech", "generator: comma-separated tenants")
	seed := fs.Int64("seed", 1, "generator: seed")
	encoders := fs.Int("encoders", 2, "encoder instances in the process")
	natsPort := fs.Int("nats-port", -1, "embedded NATS client port (-1: any free port)")
	timeout := fs.Duration("timeout", 0, "give up waiting for the lake after this long (0: no limit)")
	rate := fs.Float64("rate", 0, "read at most this many lines per second per source, each generator tenant being one (0: unlimited; producer.rate in --config)")
	et := registerEventTime(fs)
	rf := registerReceivers(fs)
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if _, err := c.resolve(fs, e); err != nil {
		return err
	}
	// Page faults were a fifth of a run's CPU: the heap it grows into is
	// advised for transparent huge pages first (hugeHeapOf).
	runHugeHeap()
	if c.logLevel == "" {
		c.logLevel = "warn" // the progress lines and the summary are the output
	}
	log, err := c.logger(e.stderr)
	if err != nil {
		return err
	}
	if err := streams.CheckToken(*tenant); err != nil {
		return errUsage{fmt.Sprintf("--tenant: %v", err)}
	}
	cfg := c.cfg
	set := flagSet(fs)
	if set["data"] || cfg.Server.DataDir == "" {
		cfg.Server.DataDir = *data
	}
	if set["nats-port"] || cfg.Server.NATSPort == 0 {
		cfg.Server.NATSPort = *natsPort
	}
	if set["encoders"] || cfg.Server.Encoders == 0 {
		cfg.Server.Encoders = *encoders
	}
	if set["tenant"] || cfg.Producer.Tenant == "" {
		cfg.Producer.Tenant = *tenant
	}
	if err := et.apply(fs, &cfg.Producer); err != nil {
		return err
	}
	if set["rate"] {
		cfg.Producer.Rate = *rate
	}
	if *follow && *input != "" && *input != "-" {
		cfg.Producer.Follow = true
	}
	if *follow && *compact {
		return errUsage{"--compact needs an input that ends: not with --follow"}
	}
	rf.apply(fs, &cfg.Producer)
	if cfg.Producer.Receivers.Enabled() && !*follow {
		return errUsage{"the receivers (--listen-syslog, --listen-syslog-tls, --listen-http, --listen-otlp, --listen-otlp-grpc, producer.receivers) need --follow"}
	}
	cfg, err = checked(cfg)
	if err != nil {
		return err
	}
	*tenant = cfg.Producer.Tenant
	// The health address is bound first: one in use is this command's
	// error, not a run without metrics (and the embedded server's random
	// port cannot take it meanwhile).
	hl, err := health.Listen(c.httpAddr)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	start := time.Now()
	cpu0, _ := cputime.Used()
	p, err := pipeline.Start(ctx, cfg, log, reg)
	if err != nil {
		if hl != nil {
			hl.Close()
		}
		return err
	}
	defer p.Close()
	hs := health.New(reg, log)
	hs.Add("pipeline", p.Ready)
	hs.AddInfo("pipeline", p.Detail)
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	go func() { _ = hs.ServeOn(hctx, hl) }() // it returns when hctx ends (or l fails, which an accepted socket never does)
	natsKind := "embedded NATS"
	if p.Server == nil {
		natsKind = "NATS" // nats.url in --config
	}
	fmt.Fprintf(e.stderr, "quarry: %s at %s, lake %s\n", natsKind, p.URL, lakeDisplay(cfg))
	// What this goroutine starts from here on (the line source, the
	// receivers) is the producer in a CPU profile (pipeline.StageLabel).
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels(pipeline.StageLabel, "producer")))
	defer pprof.SetGoroutineLabels(ctx)

	pdeps := producer.Deps{JS: p.JS, Log: log, Registerer: reg}
	var src runSource
	var tenantList []string
	switch {
	case *input == "-":
		l, err := producer.NewReader(cfg.Producer, pdeps, e.stdin)
		if err != nil {
			return err
		}
		src, tenantList = l, []string{*tenant}
	case *input != "":
		l, err := producer.NewFile(cfg.Producer, pdeps, *input)
		if err != nil {
			return err
		}
		src, tenantList = l, []string{*tenant}
	case *follow:
		l, err := producer.NewSubject(cfg.Producer, pdeps)
		if err != nil {
			return err
		}
		src, tenantList = l, []string{*tenant}
		fmt.Fprintf(e.stderr, "quarry: publish lines to %s on %s\n", producer.IngestSubject(*tenant), p.URL)
	default:
		tenantList = strings.Split(*tenants, ",")
		g, err := producer.NewGenerate(producer.GenerateConfig{Seed: *seed, Tenants: tenantList, LinesPerTenant: *lines, Lines: cfg.Producer}, pdeps)
		if err != nil {
			return err
		}
		src = g
	}

	recv, err := listenReceivers(cfg.Producer, e.getenv, p.JS, log, reg, e.stderr)
	if err != nil {
		return err
	}
	if recv != nil {
		hs.Add("receivers", recv.Ready)
		src = bothSources{a: src, r: recv}
	}

	prog := &progress{w: e.stderr, p: p, src: src, start: start}
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); prog.loop(pctx, 2*time.Second) }()

	// While the source runs, the encoders leave a core to the producer,
	// the miner and the NATS server: a flush encoding on every core held
	// the WAL's acks back for hundreds of milliseconds (the ack tail in
	// docs/benchmarks.md). Once every line is in the WAL, they have them all.
	// With --follow the source runs until interrupted and lines come in
	// bursts: the slot is lent back while none comes (idleSlot).
	releaseSlot, err := encoder.ReserveEncodeSlot(ctx)
	if err != nil {
		pcancel()
		wg.Wait()
		return err
	}
	if *follow {
		releaseSlot = lendSlotWhenIdle(pctx, releaseSlot, func() uint64 { return sourceProgress(src.Stats()) }, slotIdleAfter, slotIdlePoll)
	}
	runErr := src.Run(ctx)
	releaseSlot()
	if err := runErr; err != nil && !errors.Is(err, context.Canceled) {
		pcancel()
		wg.Wait()
		return fmt.Errorf("producer: %w", err)
	}
	if ctx.Err() != nil { // interrupted (or --follow ended by a signal)
		pcancel()
		wg.Wait()
		fmt.Fprintln(e.stderr, "quarry: interrupted; draining")
		if err := p.Close(); err != nil {
			return err
		}
		return printSummaryAt(context.Background(), e.stdout, p, cfg, src, time.Since(start), cpuSince(cpu0), tenantList, reg)
	}
	last, err := p.WALLastSeq(ctx)
	if err != nil {
		return err
	}
	wctx := ctx
	if *timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	err = p.WaitCommitted(wctx, last, 0, nil)
	pcancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("%w (waiting for: %v)", err, p.Ready())
	}
	elapsed, cpu := time.Since(start), cpuSince(cpu0)
	if *compact {
		// Every line is committed: the input has ended, so every
		// partition is compacted now, as the committer's background
		// compaction would once they close (committer.compaction),
		// rather than left as the encoders' flushes.
		res, err := p.Maintain(wctx, committer.MaintainOptions{AllClosed: true})
		if err != nil {
			return fmt.Errorf("compact: %w (every line is committed; a committer compacts them once their partitions close)", err)
		}
		fmt.Fprintf(e.stderr, "quarry: compacted %d partitions: %d files into %d", res.Partitions, res.Compacted, res.Written)
		if res.TemplateFiles > 0 {
			fmt.Fprintf(e.stderr, "; %d templates files into 1", res.TemplateFiles)
		}
		fmt.Fprintln(e.stderr)
	}
	if err := p.Close(); err != nil {
		return err
	}
	return printSummaryAt(ctx, e.stdout, p, cfg, src, elapsed, cpu, tenantList, reg)
}

// A following run lends its reserved encode slot back to the encoders
// once its source has acked nothing for slotIdleAfter (checked every
// slotIdlePoll): a burst of lines ended, no ack waits, and the encoders'
// flushes of it (encoder.idle_flush, 100ms after their input stopped) get
// both cores instead of one. The next acked frame takes the slot again.
const (
	slotIdleAfter = 50 * time.Millisecond
	slotIdlePoll  = 10 * time.Millisecond
)

// sourceProgress counts what a source has done: it moves with every frame
// acked and every line dead-lettered.
func sourceProgress(st producer.Stats) uint64 { return st.Frames + st.DeadLetters }

// lendSlotWhenIdle takes over release, the release of a slot reserved
// with encoder.ReserveEncodeSlot: it releases the slot once progress has
// not moved for idleAfter and reserves one again when it moves. The
// returned func stops it and releases the slot if held; it is what to
// call instead of release. ctx ending stops it too.
func lendSlotWhenIdle(ctx context.Context, release func(), progress func() uint64, idleAfter, poll time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		held := true
		defer func() {
			if held {
				release()
			}
		}()
		last, moved := progress(), time.Now()
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur := progress()
			switch {
			case cur != last:
				last, moved = cur, time.Now()
				if !held {
					r, err := encoder.ReserveEncodeSlot(ctx)
					if err != nil {
						return // ctx ended
					}
					release, held = r, true
				}
			case held && time.Since(moved) >= idleAfter:
				release()
				held = false
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func lakeDisplay(cfg pipeline.Config) string { return cfg.LakeURL() }

type progress struct {
	w     io.Writer
	p     *pipeline.Pipeline
	src   runSource
	start time.Time
}

func (pr *progress) loop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st := pr.src.Stats()
			el := time.Since(pr.start).Seconds()
			wal, _ := pr.p.WALLastSeq(ctx)
			fmt.Fprintf(pr.w, "quarry: %6.1fs lines=%d frames=%d wal=%d high-water=%d lines/s=%.0f\n",
				el, st.Lines, st.Frames, wal, pr.p.HighWater(), float64(st.Lines)/el)
		}
	}
}

// cpuSince is the CPU time the process used since it had used cpu0; 0 where
// the platform cannot say.
func cpuSince(cpu0 time.Duration) time.Duration {
	if now, ok := cputime.Used(); ok {
		return now - cpu0
	}
	return 0
}

func printSummaryAt(ctx context.Context, w io.Writer, p *pipeline.Pipeline, cfg pipeline.Config, src runSource, elapsed, cpu time.Duration, tenants []string, reg prometheus.Gatherer) error {
	st := src.Stats()
	lat := src.AckLatencies()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	lk := lake.Open(p.Store)
	tpls, err := lk.Templates(ctx, "")
	if err != nil {
		return fmt.Errorf("read templates: %w", err)
	}
	perTenant := map[string]map[uint64]bool{}
	for _, t := range tpls {
		if t.MergedInto != 0 {
			continue // retired into another template: count the survivor only
		}
		if perTenant[t.Tenant] == nil {
			perTenant[t.Tenant] = map[uint64]bool{}
		}
		perTenant[t.Tenant][t.TemplateID] = true
	}
	recs, err := lk.Records().Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("read records log: %w", err)
	}
	tsnap, err := lk.TemplatesTable().Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("read templates log: %w", err)
	}
	hw, err := lk.HighWater(ctx)
	if err != nil {
		return fmt.Errorf("read high-water: %w", err)
	}
	dlq, err := p.DeadLetters(ctx)
	if err != nil {
		return fmt.Errorf("count dead letters: %w", err)
	}
	var dead uint64
	for _, n := range dlq {
		dead += n
	}
	fmt.Fprintln(w, "quarry run summary")
	fmt.Fprintf(w, "  lines in        %d (%d dead-lettered)\n", st.Lines, dead)
	if dead > 0 {
		stages := make([]string, 0, len(dlq))
		for s := range dlq {
			stages = append(stages, s)
		}
		sort.Strings(stages)
		var parts []string
		for _, s := range stages {
			parts = append(parts, fmt.Sprintf("%s %d", s, dlq[s]))
		}
		fmt.Fprintf(w, "  dead letters    %s (stream %s)\n", strings.Join(parts, ", "), streams.DeadLetterStream)
	}
	if st.Lines == 0 && st.Recovered == 0 {
		fmt.Fprintln(w, "                  (nothing new: the sources resumed after their saved positions; use a new --data or more --lines)")
	}
	fmt.Fprintf(w, "  frames          %d\n", st.Frames)
	names := make([]string, 0, len(perTenant))
	for t := range perTenant {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		fmt.Fprintf(w, "  templates       %-12s %d\n", t, len(perTenant[t]))
	}
	fmt.Fprintf(w, "  files           %d records, %d templates\n", len(recs.Files), len(tsnap.Files))
	if n, ok := counterSum(reg, "quarry_encoder_high_compression_files_total"); ok {
		fmt.Fprintf(w, "  zstd best       %.0f records files (idle flushes with little buffered, or all with encoder.high_compression: always)\n", n)
	}
	fmt.Fprintf(w, "  delta versions  records v%d, templates v%d\n", recs.Version, tsnap.Version)
	fmt.Fprintf(w, "  high-water      %d\n", hw)
	fmt.Fprintf(w, "  elapsed         %s\n", elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  lines/s         %.0f\n", float64(st.Lines)/elapsed.Seconds())
	if cpu > 0 && st.Lines > 0 {
		// Every stage and the NATS server share the process: its CPU per
		// line bounds the rate the machine's cores can carry.
		fmt.Fprintf(w, "  cpu             %.2fs user+sys, %.2f µs/line\n", cpu.Seconds(), float64(cpu.Microseconds())/float64(st.Lines))
	}
	if lat != nil && lat.Count() > 0 {
		fmt.Fprintf(w, "  publish-ack     p50 %s, p99 %s over %d frames\n", lat.Quantile(0.5).Round(10*time.Microsecond), lat.Quantile(0.99).Round(10*time.Microsecond), lat.Count())
	}
	t := "default"
	if len(tenants) > 0 {
		t = tenants[0]
	}
	fmt.Fprintf(w, "\ntry: %s query --lake %s --tenant %s --format table | head\n", selfName(), lakeDisplay(cfg), t)
	return nil
}

// counterSum is the sum of the counter name's series in reg (false when reg
// is nil or has no such counter).
func counterSum(reg prometheus.Gatherer, name string) (float64, bool) {
	if reg == nil {
		return 0, false
	}
	mfs, err := reg.Gather()
	if err != nil {
		return 0, false
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var v float64
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			return v, true
		}
	}
	return 0, false
}

func selfName() string {
	if len(os.Args) > 0 && strings.Contains(os.Args[0], "/") {
		return os.Args[0]
	}
	return "bin/quarry"
}
