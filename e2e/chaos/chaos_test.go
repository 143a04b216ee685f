//go:build chaos

// Package chaos is quarry's seeded fault harness: every role runs as its own
// OS process (a producer, the miner, three encoders, two committers) against
// a `quarry server` NATS process, and a seeded schedule SIGKILLs and restarts
// roles, pauses them (SIGSTOP/SIGCONT) longer than the ack wait and the
// lease, stops and adds encoders, kills the NATS server and restarts it on
// the same store, injects object-store faults (QUARRY_FAULTS: errors,
// timeouts, slow writes, writes whose reply is lost) and crash points
// (QUARRY_CRASHPOINTS: a committer dies between a Delta log write and the
// high-water key or around a compaction's commit, an encoder after its
// upload or its report, the miner after a snapshot). The committer purges
// the WAL and the report stream, and compacts closed partitions in the
// background; after the round `quarry compact` runs once by hand
// (checkCompact) between two checks of the lake.
//
// Every fault lands mid-stream by construction, never by pacing: the input
// is fed chunk after chunk, each by a producer following its own file
// (--follow). A chunk's file holds half of it when its producer starts; the
// other half is appended only after the producer has published some of the
// first and the schedule has injected a fault since, so a fault always
// hits a producer in the middle of its input, and the next chunk starts
// only once the whole chunk is in the WAL.
//
// After each round it checks the lake alone (see checkLake and checkVacuum)
// and prints the round's seed; the last line is "N passed, N failed" and a
// failed round is replayed with -seed=N.
//
//	go test -tags chaos -count=1 -v ./e2e/chaos/ -args -rounds=3 [-seed=N] [-lines=5000] [-keep]
package chaos

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"

	"github.com/quarrylake/quarry/internal/quarrybin"
)

var (
	roundsFlag = flag.Int("rounds", 3, "rounds to run")
	seedFlag   = flag.Int64("seed", 0, "seed of the first round (0: from the clock); round i uses seed+i")
	linesFlag  = flag.Int("lines", 6000, "input lines per tenant")
	chunksFlag = flag.Int("chunks", 5, "input chunks per tenant, each fed by its own producer run")
	keepFlag   = flag.Bool("keep", false, "keep every round's directory (failed rounds are always kept)")
	quietFlag  = flag.Bool("quiet-faults", false, "no store faults or crash points (a fault-free baseline)")
)

var tenants = []string{"acme", "globex", "initech"}

// Timings of the round's config: short, so faults bite within a round.
const (
	ackWait        = 3 * time.Second
	leaseTTL       = 2 * time.Second
	verdictTimeout = 2 * time.Second
)

const configYAML = `streams:
  duplicate_window: 2m
producer:
  frame_max_records: 40
  linger: 20ms
  drain_timeout: 3s
miner:
  snapshot_every: 25
  snapshot_interval: 500ms
  snapshot_keep: 3
  drain_timeout: 3s
  publish_timeout: 2s
  blocked_after: 2s
encoder:
  ack_wait: 3s
  max_age: 300ms
  verdict_timeout: 2s
  upload_timeout: 3s
  drain_timeout: 3s
committer:
  lease_ttl: 2s
  commit_interval: 200ms
  purge_wal: true
  purge_reports: true
  op_timeout: 2s
  shutdown_timeout: 3s
  stall_after: 3s
  compaction:
    interval: 300ms
    target_bytes: 131072
`

func TestChaos(t *testing.T) {
	if *roundsFlag < 1 {
		t.Fatal("-rounds must be at least 1")
	}
	base := *seedFlag
	if base == 0 {
		base = time.Now().UnixNano() % 1_000_000
	}
	bin := quarrybin.Path(t, t.TempDir()) // $QUARRY_BIN, else built here
	var passed, failed int
	var failedSeeds []string
	// Each failed round's errors, repeated after the last round: CI logs
	// keep only the tail, and the round's own lines are above its long
	// process dump.
	var failures []string
	for i := 0; i < *roundsFlag; i++ {
		seed := base + int64(i)
		fmt.Printf("=== chaos round %d/%d seed %d\n", i+1, *roundsFlag, seed)
		start := time.Now()
		dir, err := os.MkdirTemp("", fmt.Sprintf("quarry-chaos-%d-", seed))
		if err != nil {
			t.Fatal(err)
		}
		r := &round{t: t, seed: seed, rng: rand.New(rand.NewSource(seed)), dir: dir, bin: bin}
		errs := r.run()
		took := time.Since(start).Round(100 * time.Millisecond)
		if len(errs) == 0 {
			passed++
			fmt.Printf("--- round seed %d passed in %s (%s)\n", seed, took, r.summary())
			if !*keepFlag {
				os.RemoveAll(dir)
			}
			continue
		}
		failed++
		failedSeeds = append(failedSeeds, fmt.Sprint(seed))
		fmt.Printf("--- round seed %d FAILED in %s (%s); replay with -seed=%d -rounds=1; logs in %s\n", seed, took, r.summary(), seed, dir)
		for _, e := range errs {
			fmt.Printf("    %v\n", e)
			failures = append(failures, fmt.Sprintf("seed %d: %s", seed, firstLine(e.Error())))
		}
		r.dumpLogs()
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		fmt.Printf("failed seeds: %s\n", strings.Join(failedSeeds, " "))
		for _, f := range failures {
			fmt.Printf("    %s\n", f)
		}
		t.Fail()
	}
}

// firstLine is s up to its first newline, at most 300 bytes.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// round is one seeded run of the pipeline.
type round struct {
	t    *testing.T
	seed int64
	rng  *rand.Rand
	dir  string
	bin  string

	url     string
	lakeDir string
	cfgFile string

	server     *slot
	miner      *slot
	encoders   []*slot
	committers []*slot
	producers  []*slot
	all        []*slot

	// faults counts the faults the schedule injected so far; the input
	// waits on it.
	faults atomic.Int64

	mu      sync.Mutex
	actions []string
	hwSeen  []uint64
	hwBack  []string
	stats   map[string]int
}

func (r *round) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.actions = append(r.actions, time.Now().Format("15:04:05.000")+" "+msg)
	r.mu.Unlock()
}

func (r *round) count(what string) {
	r.mu.Lock()
	if r.stats == nil {
		r.stats = map[string]int{}
	}
	r.stats[what]++
	r.mu.Unlock()
}

func (r *round) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for _, k := range []string{"kill", "pause", "snapshot-corrupted", "nats-restart", "encoder-stop", "encoder-add", "crashpoint", "takeover", "stall-explained", "producer-watchdog", "vacuumed", "wal-first-seq", "compacted-by-hand"} {
		if n := r.stats[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, n))
		}
	}
	return strings.Join(parts, " ")
}

func (r *round) dumpLogs() {
	r.mu.Lock()
	acts := strings.Join(r.actions, "\n    ")
	r.mu.Unlock()
	fmt.Printf("    actions:\n    %s\n", acts)
	for _, s := range r.all {
		fmt.Printf("    %s exits: %v\n", s.name, s.exitLog())
	}
}

// faultEnv is the object-store fault spec and crash points of a role.
func (r *round) faultEnv(role string, seed int64) func(int) []string {
	if *quietFlag {
		return nil
	}
	// Fault rates drawn per round from the seed.
	pErr := 0.01 + r.rng.Float64()*0.04
	pLose := 0.01 + r.rng.Float64()*0.03
	pSlow := r.rng.Float64() * 0.1
	return func(inc int) []string {
		spec := fmt.Sprintf("seed=%d,put.err=%.3f,put.lose=%.3f,put.delay=150ms@%.3f,put.timeout=2500ms@0.005,put-if-absent.err=%.3f,put-if-absent.lose=%.3f,stat.err=%.3f,get.err=%.3f,delete.err=%.3f,list.err=0.01",
			seed*100+int64(inc), pErr, pLose, pSlow, pErr, pLose*3, pErr, pErr/2, pErr)
		env := []string{"QUARRY_FAULTS=" + spec, fmt.Sprintf("QUARRY_CRASHPOINTS_SEED=%d", seed*100+int64(inc))}
		switch role {
		case "committer":
			cp := "committer.before-high-water@0.03,committer.between-tables@0.03,committer.compact-before-commit@0.05,committer.compact-after-commit@0.05"
			if inc == 0 {
				// The first term of each committer surely dies between
				// writing the Delta log and recording the high-water.
				cp = "committer.before-high-water"
			}
			env = append(env, "QUARRY_CRASHPOINTS="+cp)
		case "encoder":
			env = append(env, "QUARRY_CRASHPOINTS=encoder.after-upload@0.01,encoder.after-report@0.01")
		case "miner":
			env = append(env, "QUARRY_CRASHPOINTS=miner.after-snapshot@0.05")
		}
		return env
	}
}

func (r *round) newSlot(name string, args []string, env func(int) []string, withHTTP bool) *slot {
	if withHTTP {
		port, err := freePort()
		if err == nil {
			args = append(args, "--http", fmt.Sprintf("127.0.0.1:%d", port))
		}
		s := newSlot(r.dir, r.bin, name, args, env)
		if err == nil {
			s.httpURL = fmt.Sprintf("http://127.0.0.1:%d", port)
		}
		r.all = append(r.all, s)
		return s
	}
	s := newSlot(r.dir, r.bin, name, args, env)
	r.all = append(r.all, s)
	return s
}

func (r *round) run() (errs []error) {
	// A round takes about a minute; the bound is generous for a loaded
	// machine (every wait in it ends as soon as its condition holds).
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	port, err := freePort()
	if err != nil {
		return []error{err}
	}
	r.url = fmt.Sprintf("nats://127.0.0.1:%d", port)
	r.lakeDir = filepath.Join(r.dir, "lake")
	r.cfgFile = filepath.Join(r.dir, "quarry.yaml")
	if err := os.WriteFile(r.cfgFile, []byte(configYAML), 0o644); err != nil {
		return []error{err}
	}
	r.server = r.newSlot("nats", []string{"server", "--data", filepath.Join(r.dir, "nats"), "--port", fmt.Sprint(port)}, nil, false)
	r.server.start()
	defer func() {
		for _, s := range r.all {
			if s != r.server {
				s.stop(15 * time.Second)
			}
		}
		r.server.stop(15 * time.Second)
	}()

	nc, js, err := natsutil.Connect(ctx, natsutil.ConnConfig{URL: r.url}, nil)
	if err != nil {
		return []error{fmt.Errorf("connect: %w\n%s", err, r.server.tail(2000))}
	}
	defer nc.Close()
	if err := streams.Ensure(ctx, js, streams.Config{DuplicateWindow: 2 * time.Minute}.Defaults()); err != nil {
		return []error{fmt.Errorf("ensure streams: %w", err)}
	}

	common := []string{"--nats", r.url, "--config", r.cfgFile}
	lakeArgs := append([]string{"--lake", r.lakeDir}, common...)
	for i := range 2 {
		name := fmt.Sprintf("committer-%d", i+1)
		r.committers = append(r.committers, r.newSlot(name, append([]string{"committer", "--name", name}, lakeArgs...), r.faultEnv("committer", r.seed*10+int64(i)), true))
	}
	r.miner = r.newSlot("miner", append([]string{"miner"}, common...), r.faultEnv("miner", r.seed*10+5), true)
	for i := range 3 {
		name := fmt.Sprintf("encoder-%d", i+1)
		r.encoders = append(r.encoders, r.newSlot(name, append([]string{"encoder", "--name", name}, lakeArgs...), r.faultEnv("encoder", r.seed*10+6+int64(i)), true))
	}
	for _, s := range r.committers {
		s.start()
	}
	r.miner.start()
	for _, s := range r.encoders {
		s.start()
	}

	// The input: every tenant's lines cut into chunks, fed one chunk at a
	// time (acme 1, globex 1, initech 1, acme 2, ...) by one producer
	// process after the other, so the WAL holds the input in one known
	// order. Each producer follows its chunk's file, which holds the first
	// half of the chunk until a fault has hit the producer (see feed).
	perTenant := map[string][]string{}
	for _, tn := range tenants {
		perTenant[tn] = genLines(r.seed, tn, *linesFlag)
	}
	var input []inputLine
	var chunks []*chunk
	for c := range *chunksFlag {
		for _, tn := range tenants {
			all := perTenant[tn]
			lines := all[c*len(all)/(*chunksFlag) : (c+1)*len(all)/(*chunksFlag)]
			for _, l := range lines {
				input = append(input, inputLine{tn, l})
			}
			f := filepath.Join(r.dir, fmt.Sprintf("%s-%d.log", tn, c))
			half := len(lines) / 2
			first := strings.Join(lines[:half], "\n") + "\n"
			if half == 0 {
				first = ""
			}
			if err := os.WriteFile(f, []byte(first), 0o644); err != nil {
				return []error{err}
			}
			p := r.newSlot(fmt.Sprintf("producer-%s-%d", tn, c), append([]string{"producer", "--input", f, "--follow", "--tenant", tn}, common...), nil, false)
			p.oneShot = true
			r.producers = append(r.producers, p)
			abs, err := filepath.Abs(f)
			if err != nil {
				return []error{err}
			}
			source := streams.SanitizeToken(abs)
			chunks = append(chunks, &chunk{p: p, path: f, tenant: tn, source: source, key: producer.PositionKey(source),
				first: uint64(len(first)), rest: strings.Join(lines[half:], "\n") + "\n"})
		}
	}

	store, err := objstore.Open(ctx, r.lakeDir, objstore.S3Options{})
	if err != nil {
		return []error{err}
	}
	lk := lake.Open(store)

	// The high-water as the lake shows it, sampled throughout.
	monCtx, stopMon := context.WithCancel(ctx)
	defer stopMon()
	var monWG sync.WaitGroup
	monWG.Go(func() { r.monitorHighWater(monCtx, lk) })

	// Chaos runs while the producers feed the WAL, one tenant at a time.
	chaosCtx, stopChaos := context.WithCancel(ctx)
	defer stopChaos()
	var chaosWG sync.WaitGroup
	var chaosErrs []error
	// Scripted first: a lease takeover before any input, then a stall
	// (both committers stopped) while the first tenant flows.
	if err := r.takeover(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := r.stallExplained(ctx, r.producers[0]); err != nil {
		errs = append(errs, err)
	}
	chaosWG.Go(func() { chaosErrs = r.chaos(chaosCtx, js) })
	for i, c := range chunks {
		if i == len(chunks)/2 {
			r.idleCorruption(ctx, js, lk)
		}
		if i > 0 {
			c.p.start()
		}
		if err := r.feed(ctx, js, c); err != nil {
			stopChaos()
			chaosWG.Wait()
			stopMon()
			monWG.Wait()
			return append(chaosErrs, fmt.Errorf("%s: %w: %v\n%s", c.p.name, err, c.p.exitLog(), c.p.tail(3000)))
		}
	}
	// Let the faults go on after the input ends: one more.
	if err := r.nextFault(ctx, r.faults.Load()); err != nil {
		errs = append(errs, err)
	}
	stopChaos()
	chaosWG.Wait()
	errs = append(errs, chaosErrs...)

	// Converge: every WAL message committed (faults from the env and crash
	// points keep firing meanwhile; the supervisors restart what dies).
	last, err := walLast(ctx, js)
	if err != nil {
		return append(errs, err)
	}
	r.logf("input done: WAL last seq %d", last)
	defer func() {
		// Show that the committer purged the WAL.
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if s, err := js.Stream(cctx, streams.WALStream); err == nil {
			r.mu.Lock()
			r.stats["wal-first-seq"] = int(s.CachedInfo().State.FirstSeq)
			r.mu.Unlock()
		}
	}()
	converged := false
	convCtx, convCancel := context.WithTimeout(ctx, 90*time.Second)
	defer convCancel()
	for convCtx.Err() == nil {
		hw, err := lk.HighWater(convCtx)
		if err == nil && hw >= last {
			converged = true
			break
		}
		sleepCtx(convCtx, 200*time.Millisecond)
	}
	stopMon()
	monWG.Wait()
	if !converged {
		hw, _ := lk.HighWater(context.Background())
		errs = append(errs, fmt.Errorf("did not converge: high-water %d, WAL last seq %d", hw, last))
		for _, s := range append(append([]*slot{r.miner}, r.committers...), r.encoders...) {
			code, body, err := s.readyz()
			lines := strings.Split(strings.TrimSpace(s.tail(1500)), "\n")
			errs = append(errs, fmt.Errorf("%s /readyz: %d %q %v; last log line: %s", s.name, code, body, err, lines[len(lines)-1]))
		}
	}
	for _, s := range r.all {
		if s != r.server {
			s.stop(15 * time.Second)
		}
		r.mu.Lock()
		if r.stats == nil {
			r.stats = map[string]int{}
		}
		r.stats["crashpoint"] += s.crashes()
		r.mu.Unlock()
	}
	r.mu.Lock()
	for _, b := range r.hwBack {
		errs = append(errs, fmt.Errorf("high-water went backwards: %s", b))
	}
	r.mu.Unlock()

	// The checks, with nothing but the lake.
	cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ccancel()
	errs = append(errs, checkLake(cctx, store, input)...)
	compacted, cerrs := checkCompact(cctx, r.bin, r.lakeDir, r.url, r.cfgFile)
	errs = append(errs, cerrs...)
	r.mu.Lock()
	r.stats["compacted-by-hand"] = compacted
	r.mu.Unlock()
	if len(cerrs) == 0 {
		for _, e := range checkLake(cctx, store, input) {
			errs = append(errs, fmt.Errorf("after quarry compact: %w", e))
		}
	}
	n, verrs := checkVacuum(cctx, r.bin, r.lakeDir, store)
	errs = append(errs, verrs...)
	r.mu.Lock()
	r.stats["vacuumed"] = n
	r.mu.Unlock()
	if len(verrs) == 0 {
		for _, e := range checkLake(cctx, store, input) {
			errs = append(errs, fmt.Errorf("after vacuum: %w", e))
		}
	}
	return errs
}

func walLast(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	var err error
	for ctx.Err() == nil {
		var s jetstream.Stream
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		s, err = js.Stream(cctx, streams.WALStream)
		cancel()
		if err == nil {
			return s.CachedInfo().State.LastSeq, nil
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return 0, fmt.Errorf("WAL info: %v", err)
}

func (r *round) monitorHighWater(ctx context.Context, lk *lake.Lake) {
	var prev uint64
	for ctx.Err() == nil {
		hw, err := lk.HighWater(ctx)
		if err == nil {
			if hw < prev {
				r.mu.Lock()
				r.hwBack = append(r.hwBack, fmt.Sprintf("%d after %d", hw, prev))
				r.mu.Unlock()
			}
			prev = max(prev, hw)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// chaos runs the seeded fault schedule until ctx ends.
func (r *round) chaos(ctx context.Context, js jetstream.JetStream) []error {
	var errs []error
	var bg sync.WaitGroup
	defer bg.Wait()
	for ctx.Err() == nil {
		sleepCtx(ctx, time.Duration(400+r.rng.Intn(1200))*time.Millisecond)
		if ctx.Err() != nil {
			break
		}
		switch k := r.rng.Intn(100); {
		case k < 40: // SIGKILL a role; the supervisor restarts it
			victims := append(append(append([]*slot{r.miner}, r.encoders...), r.committers...), r.producers...)
			s := victims[r.rng.Intn(len(victims))]
			if s.signal(syscall.SIGKILL) {
				r.logf("SIGKILL %s", s.name)
				r.count("kill")
				r.faults.Add(1)
			}
		case k < 60: // pause a role for longer than the ack wait and the lease
			victims := append(append([]*slot{r.miner}, r.encoders...), r.committers...)
			s := victims[r.rng.Intn(len(victims))]
			d := ackWait + time.Duration(r.rng.Intn(2000))*time.Millisecond
			if s.signal(syscall.SIGSTOP) {
				r.logf("SIGSTOP %s for %s", s.name, d)
				r.count("pause")
				r.faults.Add(1)
				bg.Go(func() {
					time.Sleep(d)
					s.signal(syscall.SIGCONT)
				})
			}
		case k < 63: // corrupt the miner's newest snapshot while it is down
			r.corruptSnapshot(ctx, js)
		case k < 70: // kill the NATS server, restart it on the same store
			d := time.Duration(500+r.rng.Intn(1500)) * time.Millisecond
			r.logf("SIGKILL nats server, down %s", d)
			r.count("nats-restart")
			r.faults.Add(1)
			r.server.hold(syscall.SIGKILL, d)
		case k < 85: // stop an encoder gracefully for a while (scale in)
			s := r.encoders[r.rng.Intn(len(r.encoders))]
			d := time.Duration(1000+r.rng.Intn(3000)) * time.Millisecond
			r.logf("stop %s for %s", s.name, d)
			r.count("encoder-stop")
			r.faults.Add(1)
			bg.Go(func() { s.hold(syscall.SIGTERM, d) })
		default: // add an encoder for a while (scale out), then stop it
			name := fmt.Sprintf("encoder-x%d", len(r.all))
			s := r.newSlot(name, []string{"encoder", "--name", name, "--lake", r.lakeDir, "--nats", r.url, "--config", r.cfgFile}, r.faultEnv("encoder", r.seed*10+int64(len(r.all))), false)
			d := time.Duration(2000+r.rng.Intn(4000)) * time.Millisecond
			r.logf("add %s for %s", name, d)
			r.count("encoder-add")
			r.faults.Add(1)
			s.start()
			bg.Go(func() {
				time.Sleep(d)
				s.stop(10 * time.Second)
			})
		}
	}
	return errs
}

// takeover SIGKILLs the active committer and checks that the standby
// becomes active within a bound (lease TTL, a poll, and slack for a loaded
// machine).
func (r *round) takeover(ctx context.Context) error {
	bound := 3*leaseTTL + 10*time.Second
	active := -1
	deadline := time.Now().Add(20 * time.Second)
	for active < 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		for i, s := range r.committers {
			if code, body, err := s.readyz(); err == nil && (code == 200 || !strings.Contains(body, "standby")) && !strings.Contains(body, "starting") {
				active = i
			}
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	if active < 0 {
		return nil // no term yet (crash points, faults): nothing to time
	}
	victim, other := r.committers[active], r.committers[1-active]
	// Keep the victim down so the other must take over.
	start := time.Now()
	go victim.hold(syscall.SIGKILL, bound)
	r.logf("takeover: SIGKILL active %s", victim.name)
	for time.Since(start) < bound && ctx.Err() == nil {
		code, body, err := other.readyz()
		if err == nil && (code == 200 || !strings.Contains(body, "standby")) && !strings.Contains(body, "starting") {
			r.logf("takeover: %s active after %s (%d %q)", other.name, time.Since(start).Round(time.Millisecond), code, body)
			r.count("takeover")
			return nil
		}
		if err != nil {
			// The other committer may be restarting (a crash point): its
			// restart is still a takeover, the clock runs on.
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	if ctx.Err() != nil {
		return nil
	}
	code, body, err := other.readyz()
	return fmt.Errorf("takeover: %s not active %s after %s was killed: /readyz %d %q %v", other.name, bound, victim.name, code, body, err)
}

// stallExplained pauses both committers, starts feed so batches flow, and
// checks that an encoder's /readyz is 503
// and names what it waits for.
func (r *round) stallExplained(ctx context.Context, feed *slot) error {
	for _, s := range r.committers {
		s.signal(syscall.SIGSTOP)
	}
	r.logf("stall: SIGSTOP both committers")
	feed.start()
	defer func() {
		for _, s := range r.committers {
			s.signal(syscall.SIGCONT)
		}
		r.logf("stall: SIGCONT both committers")
	}()
	deadline := time.Now().Add(verdictTimeout + 8*time.Second)
	var last []string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		last = last[:0]
		for _, s := range r.encoders {
			code, body, err := s.readyz()
			if err == nil && code == 503 && strings.Contains(body, "verdict") {
				r.logf("stall: %s /readyz %d %q", s.name, code, body)
				r.count("stall-explained")
				return nil
			}
			last = append(last, fmt.Sprintf("%s: %d %q %v", s.name, code, body, err))
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("stall: no encoder's /readyz says it waits for a verdict with both committers stopped: %s", strings.Join(last, "; "))
}

// corruptSnapshot SIGKILLs the miner, overwrites its newest snapshot with
// garbage and lets it restart: it must fall back to an older snapshot, whose
// WAL suffix the committer's purge must have kept.
func (r *round) corruptSnapshot(ctx context.Context, js jetstream.JetStream) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	obs, err := js.ObjectStore(cctx, streams.SnapshotBucket)
	if err != nil {
		return
	}
	infos, err := streams.ListSnapshots(cctx, js)
	if err != nil {
		return
	}
	var newest, older string
	for _, in := range infos {
		if in.Deleted || !strings.HasPrefix(in.Name, "miner-") {
			continue
		}
		if in.Name > newest {
			newest, older = in.Name, newest
		} else if in.Name > older {
			older = in.Name
		}
	}
	if older == "" {
		return // the only snapshot: corrupting it is a deliberate stop (ErrNoUsableSnapshot)
	}
	r.miner.mu.Lock()
	r.miner.held = true
	r.miner.mu.Unlock()
	defer func() {
		r.miner.mu.Lock()
		r.miner.held = false
		r.miner.mu.Unlock()
	}()
	if cmd, done := r.miner.running(); cmd != nil {
		_ = cmd.Process.Kill()
		<-done
	}
	// The miner may have written a newer one before it died.
	if _, err := obs.PutBytes(cctx, newest, []byte("corrupt snapshot")); err != nil {
		r.logf("corrupt snapshot %s: %v", newest, err)
		return
	}
	r.logf("SIGKILL miner and corrupt its snapshot %s (older: %s)", newest, older)
	r.count("snapshot-corrupted")
	r.faults.Add(1)
}

// idleCorruption waits until the pipeline has caught up (the lake's
// high-water covers the WAL and the miner's newest snapshot too, so the
// committer may purge the whole WAL) and then corrupts the miner's newest
// snapshot: the miner must restore an older one and find the WAL after it
// still there.
func (r *round) idleCorruption(ctx context.Context, js jetstream.JetStream, lk *lake.Lake) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		last, err := walLast(ctx, js)
		hw, herr := lk.HighWater(ctx)
		if err == nil && herr == nil && hw >= last {
			sleepCtx(ctx, 1500*time.Millisecond) // a snapshot at the end, an advance, a purge
			r.logf("idle at high-water %d", hw)
			r.corruptSnapshot(ctx, js)
			return
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	r.logf("idle corruption skipped: the pipeline did not catch up")
}

// chunk is one producer's share of the input: a followed file holding
// first bytes, to which rest is appended after a fault.
type chunk struct {
	p              *slot
	path           string
	tenant, source string
	key            string // the producer's position key
	first          uint64
	rest           string
}

// feed runs chunk c's producer (already started) through its chunk: it
// waits until the producer has some of the first half in the WAL and the
// schedule has injected a fault since, appends the second half, waits
// until the whole file is in the WAL and stops the producer. The fault is
// thus mid-stream for the producer by construction.
func (r *round) feed(ctx context.Context, js jetstream.JetStream, c *chunk) error {
	if err := r.waitDurable(ctx, js, c, 1); err != nil {
		return fmt.Errorf("first half: %w", err)
	}
	mark := r.faults.Load()
	if err := r.nextFault(ctx, mark); err != nil {
		return err
	}
	f, err := os.OpenFile(c.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(c.rest)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append the second half: %w", err)
	}
	r.logf("%s: second half appended after fault %d", c.p.name, mark+1)
	if err := r.waitDurable(ctx, js, c, c.first+uint64(len(c.rest))); err != nil {
		return fmt.Errorf("second half: %w", err)
	}
	c.p.stop(15 * time.Second)
	return nil
}

// nextFault waits until the schedule has injected more than mark faults.
func (r *round) nextFault(ctx context.Context, mark int64) error {
	for r.faults.Load() <= mark {
		if ctx.Err() != nil {
			return fmt.Errorf("no fault injected after fault %d", mark)
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	return nil
}

// waitDurable waits until c's file up to byte offset want is in the WAL
// (see durable). A role that starts while the NATS server is down can hang
// in its setup (streams.Ensure under cmd/quarry's 2-minute deadline)
// without saying why; a watchdog kills a producer that has made no
// progress for 12s, the supervisor restarts it, and the count shows in the
// round's summary.
func (r *round) waitDurable(ctx context.Context, js jetstream.JetStream, c *chunk, want uint64) error {
	var got uint64
	moved := time.Now()
	for ctx.Err() == nil {
		if n := durable(ctx, js, c); n > got {
			got, moved = n, time.Now()
		}
		if got >= want {
			return nil
		}
		if time.Since(moved) > 12*time.Second {
			if c.p.signal(syscall.SIGKILL) {
				r.logf("watchdog: SIGKILL %s, at %d of %d for 12s", c.p.name, got, want)
				r.count("producer-watchdog")
			}
			moved = time.Now()
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	return fmt.Errorf("%d bytes in the WAL, want %d", got, want)
}

// durable is how far c's file is known to be in the WAL: the producer's
// saved position, or the end of its last frame in the WAL, whichever is
// further. The saved position alone may lag: a producer restarted after
// its frames were acked but before it saved the position skips them and
// moves the position only with its next acked frame. The last frame alone
// may be gone: the committer purges committed frames once the source
// saved its position past them. The tenant's chunks are fed one after the
// other, so the tenant's last frame in the WAL is c's once c published.
func durable(ctx context.Context, js jetstream.JetStream, c *chunk) uint64 {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var n uint64
	if kv, err := js.KeyValue(cctx, streams.PositionsBucket); err == nil {
		if e, err := kv.Get(cctx, c.key); err == nil {
			n, _ = strconv.ParseUint(string(e.Value()), 10, 64)
		}
	}
	if wal, err := js.Stream(cctx, streams.WALStream); err == nil {
		if m, err := wal.GetLastMsgForSubject(cctx, streams.LineSubject(c.tenant)); err == nil {
			if f, err := streams.DecodeFrame(m.Data); err == nil && f.Source == c.source {
				n = max(n, f.NextOffset)
			}
		}
	}
	return n
}
