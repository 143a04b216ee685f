// Package pipeline composes quarry's four stages in one process around an
// embedded NATS JetStream server (sync-always) and a lake: what `quarry run`
// runs and what the in-process integration tests and benchmarks drive.
//
// The stages still talk only through JetStream and the object store, exactly
// as they do when each runs as its own process; this package only starts
// them, restarts one on demand and waits for the drain barrier.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/committer"
	"github.com/quarrylake/quarry/encoder"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/miner"
	"github.com/quarrylake/quarry/streams"
)

// runDefaults are the defaults of a single-process run where they differ
// from a role process's: a lake under the data directory, and encoders and
// a committer that flush sooner.
func runDefaults(c Config) Config {
	c = c.Defaults()
	if c.Lake.URL == "" {
		c.Lake.URL = filepath.Join(c.Server.DataDir, "lake")
	}
	// An encoder's flush holds MaxAge of its share of the lines, and
	// every flush grows the heap by it: at 240,000 lines/s (80% of the
	// file source's rate) flushes of 1s (and of 500ms) took the process
	// through 49,000 page faults against 3,900 at 250ms, and the WAL's
	// publish->ack p99 from 22-46 ms to 64-190 ms (docs/benchmarks.md,
	// "The ack tail at 80%"). A file per encoder per 250ms is what a
	// run of that rate writes; compaction merges them.
	if c.Encoder.MaxAge == 0 {
		c.Encoder.MaxAge = 250 * time.Millisecond
	}
	if c.Committer.CommitInterval == 0 {
		c.Committer.CommitInterval = 500 * time.Millisecond
	}
	return c
}

// LakeURL is the lake a run with c writes: lake.url, or the lake under
// server.data_dir.
func (c Config) LakeURL() string { return runDefaults(c).Lake.URL }

// Pipeline is a running embedded server with the miner, encoders and
// committer. Producers are run by the caller against JS.
type Pipeline struct {
	cfg Config
	log *slog.Logger
	reg prometheus.Registerer
	// Server is the embedded server; nil when Config.NATS.URL is set.
	Server *server.Server
	// stopper is what Close shuts down: Server, or a test's wrapper of it.
	stopper natsutil.Stopper
	// URL is the NATS URL the stages use.
	URL   string
	NC    *nats.Conn
	JS    jetstream.JetStream
	Store objstore.Store

	mu        sync.Mutex
	miner     *stage
	encoders  []*stage
	committer *committer.Committer
	commStage *stage
	minerRuns int
	closed    bool

	// dlqBase is the dead-letter count per subject at Start; dlqFinal the
	// count Close took (the connection is gone after it).
	dlqBase  map[string]uint64
	dlqFinal map[string]uint64
	dlqErr   error
}

type stage struct {
	name   string
	cancel context.CancelFunc
	done   chan error
	ready  func() error
}

// Start starts the embedded server (unless cfg.NATS.URL names one),
// creates the streams, opens the lake and starts the miner, the encoders
// and the committer. The producer section is the caller's: it runs the
// producers against JS.
func Start(ctx context.Context, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Pipeline, error) {
	cfg = runDefaults(cfg)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pipeline{cfg: cfg, log: log, reg: reg}
	url := cfg.NATS.URL
	if url == "" {
		var srv *server.Server
		var err error
		// The server's goroutines inherit the label (see StageLabel).
		pprof.Do(ctx, pprof.Labels(StageLabel, "nats-server"), func(context.Context) {
			srv, err = natsutil.StartServer(natsutil.ServerConfig{
				StoreDir: filepath.Join(cfg.Server.DataDir, "nats"), Port: cfg.Server.NATSPort, SyncAlways: true,
				MaxPayload: cfg.Streams.MaxMsgSize,
			}, nil)
		})
		if err != nil {
			return nil, err
		}
		p.Server, p.stopper, url = srv, srv, srv.ClientURL()
	}
	p.URL = url
	cc := cfg.NATS.Conn("quarry-run")
	cc.URL = url
	var nc *nats.Conn
	var js jetstream.JetStream
	var err error
	pprof.Do(ctx, pprof.Labels(StageLabel, "nats-client"), func(ctx context.Context) {
		nc, js, err = natsutil.Connect(ctx, cc, log)
	})
	if err != nil {
		p.Close()
		return nil, err
	}
	p.NC, p.JS = nc, js
	if err := streams.Ensure(ctx, js, cfg.Streams); err != nil {
		p.Close()
		return nil, fmt.Errorf("ensure streams: %w", err)
	}
	if p.dlqBase, err = p.countDeadLetters(ctx); err != nil {
		p.Close()
		return nil, err
	}
	store, err := objstore.Open(ctx, cfg.Lake.URL, objstore.S3Options{})
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("open lake: %w", err)
	}
	p.Store = store

	cm, err := committer.New(cfg.Committer, committer.Deps{JS: js, Store: store, Log: log, Registerer: reg})
	if err != nil {
		p.Close()
		return nil, err
	}
	p.committer = cm
	p.commStage = p.start("committer", cm.Run, cm.Ready)
	for i := 0; i < cfg.Server.Encoders; i++ {
		ecfg := cfg.Encoder
		if ecfg.Name == "" {
			ecfg.Name = fmt.Sprintf("enc%d", i)
		}
		var r prometheus.Registerer
		if i == 0 {
			r = reg
		}
		enc, err := encoder.New(ecfg, encoder.Deps{JS: js, Store: store, Log: log.With("encoder", i), Registerer: r})
		if err != nil {
			p.Close()
			return nil, err
		}
		p.encoders = append(p.encoders, p.start(fmt.Sprintf("encoder-%d", i), enc.Run, enc.Ready))
	}
	if err := p.StartMiner(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// StageLabel is the profiler label (runtime/pprof) naming the stage a
// goroutine works for: "nats-server" (the embedded server), "nats-client"
// (the shared connection's reader), "miner", "encoder", "committer", and
// "producer" where the caller labels its sources (quarry run does). Goroutines
// inherit it from the goroutine that starts them, so a CPU profile of a run
// splits by stage: go tool pprof -tags, or -tagfocus stage=miner.
const StageLabel = "stage"

func (p *Pipeline) start(name string, run func(context.Context) error, ready func() error) *stage {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stage{name: name, cancel: cancel, done: make(chan error, 1), ready: ready}
	label, _, _ := strings.Cut(name, "-") // encoder-0 -> encoder
	go func() {
		var err error
		pprof.Do(ctx, pprof.Labels(StageLabel, label), func(ctx context.Context) { err = run(ctx) })
		if err != nil && ctx.Err() == nil {
			p.log.Error("stage stopped", "stage", name, "err", err)
		}
		s.done <- err
	}()
	return s
}

// StartMiner starts a miner (restoring its newest snapshot).
func (p *Pipeline) StartMiner() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.miner != nil {
		return errors.New("miner already running")
	}
	reg := p.reg
	if reg != nil && p.minerRuns > 0 {
		// A restarted miner would register its metrics a second time:
		// only the first one's are exported.
		reg = prometheus.NewRegistry()
	}
	m, err := miner.New(p.cfg.Miner, miner.Deps{JS: p.JS, Log: p.log, Registerer: reg})
	if err != nil {
		return err
	}
	p.miner = p.start("miner", m.Run, m.Ready)
	p.minerRuns++
	return nil
}

// StopMiner stops the miner (it drains and snapshots) and waits for it.
func (p *Pipeline) StopMiner() error {
	p.mu.Lock()
	s := p.miner
	p.miner = nil
	p.mu.Unlock()
	if s == nil {
		return nil
	}
	s.cancel()
	return <-s.done
}

// Ready reports what any stage waits for.
func (p *Pipeline) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, s := range append([]*stage{p.miner, p.commStage}, p.encoders...) {
		if s == nil {
			continue
		}
		if err := s.ready(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}

// Detail is the committer's /readyz detail line (the dead-letter stream's
// size).
func (p *Pipeline) Detail() string { return p.committer.Detail() }

// HighWater is the committer's high-water: every WAL sequence at or below it
// is committed to the lake.
func (p *Pipeline) HighWater() uint64 { return p.committer.HighWater() }

// Maintain runs one maintenance pass of the committer now (compaction of
// closed partitions, retention): committer.Committer.Maintain.
func (p *Pipeline) Maintain(ctx context.Context, o committer.MaintainOptions) (committer.PassResult, error) {
	return p.committer.Maintain(ctx, o)
}

// WALLastSeq is the WAL's last sequence.
func (p *Pipeline) WALLastSeq(ctx context.Context) (uint64, error) {
	s, err := p.JS.Stream(ctx, streams.WALStream)
	if err != nil {
		return 0, fmt.Errorf("wal info: %w", err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

// DeadLetters counts the dead letters of this run by stage ("producer",
// "miner", "encoder", "committer": the last token of the subject
// quarry.dlq.<stage>), as the dead-letter stream holds them: what it gained
// since Start. After Close it is the count Close took.
func (p *Pipeline) DeadLetters(ctx context.Context) (map[string]uint64, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	now, err := p.dlqFinal, p.dlqErr
	if !closed {
		now, err = p.countDeadLetters(ctx)
	}
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for subj, n := range now {
		stage := strings.TrimPrefix(subj, streams.DeadLetterSubject(""))
		if d := n - min(n, p.dlqBase[subj]); d > 0 {
			out[stage] += d
		}
	}
	return out, nil
}

// countDeadLetters is the dead-letter stream's message count per subject.
func (p *Pipeline) countDeadLetters(ctx context.Context) (map[string]uint64, error) {
	s, err := p.JS.Stream(ctx, streams.DeadLetterStream)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(streams.DeadLetterSubjects))
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream info: %w", err)
	}
	out := make(map[string]uint64, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		out[subj] = n
	}
	return out, nil
}

// WaitCommitted waits until the high-water reaches seq, calling tick (if not
// nil) about every interval while it waits.
func (p *Pipeline) WaitCommitted(ctx context.Context, seq uint64, interval time.Duration, tick func()) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for p.HighWater() < seq {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for high-water %d (at %d): %w", seq, p.HighWater(), ctx.Err())
		case <-t.C:
		}
		if tick != nil && interval > 0 && time.Since(last) >= interval {
			tick()
			last = time.Now()
		}
	}
	return nil
}

// Close stops every stage (miner first, then encoders, then the committer,
// so that what is in flight drains downstream) and the server, waiting for
// the server's shutdown at most server.shutdown_timeout: past it Close
// returns an error that is natsutil.ErrShutdownTimeout and leaves the
// server to finish on its own. It is safe to call twice.
func (p *Pipeline) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	var errs []error
	if err := p.StopMiner(); err != nil {
		errs = append(errs, fmt.Errorf("miner: %w", err))
	}
	for _, s := range p.encoders {
		s.cancel()
	}
	for _, s := range p.encoders {
		if err := <-s.done; err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	if p.commStage != nil {
		p.commStage.cancel()
		if err := <-p.commStage.done; err != nil {
			errs = append(errs, fmt.Errorf("committer: %w", err))
		}
	}
	if p.NC != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p.dlqFinal, p.dlqErr = p.countDeadLetters(ctx)
		cancel()
		p.NC.Close()
	}
	if p.stopper != nil {
		if err := natsutil.StopServer(p.stopper, p.cfg.Server.ShutdownTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
