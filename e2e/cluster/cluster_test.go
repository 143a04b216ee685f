//go:build e2e

// Package cluster runs quarry's images the way deploy/ does (a 3-node NATS
// JetStream cluster with R3 streams, fsync always, TLS and per-role users,
// MinIO, the miner, two encoders, an active and a standby committer) and
// injects faults into one shared deployment, one case after the other, then
// checks that the lake, read through MinIO, holds every line published so
// far exactly once and that both Delta logs are valid.
//
// Each fault lands mid-stream by construction, never by pacing: a fault
// case's producer containers read their lines from stdin (`quarry producer
// --input -`), get the first half of them before the fault, and the second
// half only once the fault has been injected. Until then their input is
// open, so they are still publishing whenever the fault lands; what they
// publish afterwards must get through it.
//
//	make images && TESTCONTAINERS_RYUK_DISABLED=true go test -tags e2e -count=1 -v ./e2e/cluster/
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go"
	tcnet "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/quarrylake/quarry/e2e/quarrytest"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

var tenants = []string{"acme", "globex"}

// linesPerCase is the lines per tenant per case (E2E_LINES overrides).
func linesPerCase() int {
	if n, err := strconv.Atoi(os.Getenv("E2E_LINES")); err == nil && n > 0 {
		return n
	}
	return 5000
}

// Deadlines of the polls. They are generous: the machine running the suite
// may be loaded, and a poll returns as soon as its condition holds.
const (
	progressWait = 4 * time.Minute  // for the pipeline to move under or after a fault
	producerWait = 10 * time.Minute // for a producer to publish all and exit
)

func TestCluster(t *testing.T) {
	start := time.Now()
	env := quarrytest.Start(t, quarrytest.Options{})
	t.Logf("deployment up in %s", time.Since(start).Round(time.Second))
	js := connect(t, env, nil)
	store := env.Store(t)
	gen := producer.NewGenerator(11, tenants)
	var want []string
	// spec is copied from a producer container quarrytest started (the
	// baseline's): the fault cases' piped producers get its image,
	// environment (user, password, NATS URL) and files.
	var spec *producerSpec

	// run publishes a case's input and checks the lake. The baseline
	// publishes through file producers. A fault case publishes through
	// piped producers: the first half of their lines, then, once some of
	// the case is committed, the fault, whose function calls release (or
	// the fault's end does) to write the second half and close their
	// input.
	run := func(t *testing.T, fault func(t *testing.T, release func())) {
		caseStart := time.Now()
		before := env.HighWater(t, store)
		input := map[string][]string{}
		for _, tn := range tenants {
			input[tn] = gen.Lines(tn, linesPerCase())
			want = append(want, input[tn]...)
		}
		if fault == nil {
			var prods []*quarrytest.Producer
			for _, tn := range tenants {
				prods = append(prods, env.StartProducer(t, tn, input[tn]))
			}
			spec = copySpec(t, prods[0])
			var wg sync.WaitGroup
			for _, p := range prods {
				wg.Go(func() { p.Wait(t, producerWait) })
			}
			wg.Wait()
		} else {
			if spec == nil {
				t.Fatal("no producer spec: the baseline did not run")
			}
			resume := make(chan struct{})
			release := sync.OnceFunc(func() { close(resume) })
			defer release()
			var prods []*pipedProducer
			for _, tn := range tenants {
				prods = append(prods, startPiped(t, env, spec, tn))
			}
			feedErr := make(chan error, len(prods))
			for _, p := range prods {
				lines := input[p.tenant]
				half := len(lines) / 2
				go func() { feedErr <- p.feed(lines[:half], resume, lines[half:]) }()
			}
			waitFor(t, progressWait, "the case's first lines to be committed", func() bool {
				return env.HighWater(t, store) > before
			})
			t.Logf("fault at high-water %d (case started at %d); the second half is withheld", env.HighWater(t, store), before)
			fault(t, release)
			release()
			// A write returns once the producer has read it (or has
			// exited, with an error).
			for range prods {
				select {
				case err := <-feedErr:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(producerWait):
					t.Fatalf("the producers did not read their input within %s", producerWait)
				}
			}
			var wg sync.WaitGroup
			for _, p := range prods {
				wg.Go(func() { p.wait(t, producerWait) })
			}
			wg.Wait()
		}
		if t.Failed() {
			t.FailNow()
		}
		hw := env.WaitCommitted(t, progressWait)
		env.CheckExactlyOnce(t, want)
		t.Logf("%d lines exactly once at high-water %d; case took %s", len(want), hw, time.Since(caseStart).Round(time.Second))
	}
	// healthy waits until every replica of every stream is current again.
	healthy := func(t *testing.T, js jetstream.JetStream) {
		waitFor(t, progressWait, "every stream replica to be current", func() bool { return unhealthy(js) == "" })
	}
	// advanced waits until the lake's high-water passes hw.
	advanced := func(t *testing.T, hw uint64, what string) {
		waitFor(t, progressWait, fmt.Sprintf("the high-water to pass %d %s", hw, what), func() bool {
			return env.HighWater(t, store) > hw
		})
	}

	steps := []struct {
		name  string
		fault func(t *testing.T, release func())
	}{
		{"baseline", nil},
		{"nats-node-killed-and-restarted", func(t *testing.T, release func()) {
			n := env.NATS[1]
			env.Kill(t, n)
			seq := walLast(t, js)
			release()
			// The producers get the second half into the WAL without the
			// node (an R3 stream keeps its quorum), and the pipeline commits
			// it without the node: every consumer on it (the committer's
			// R1 ordered report consumer included, whose fetches then only
			// time out) is replaced.
			waitFor(t, progressWait, fmt.Sprintf("the WAL to grow past %d without %s", seq, n.Name), func() bool {
				s, ok := walLastNoFail(js)
				return ok && s > seq
			})
			advanced(t, seq, "without "+n.Name)
			env.Restart(t, n)
			healthy(t, js)
		}},
		{"wal-leader-partitioned", func(t *testing.T, release func()) {
			leader := streamLeader(t, js, streams.WALStream)
			n := env.NATSNode(leader)
			if n == nil {
				t.Fatalf("WAL leader %q is not a node", leader)
			}
			// Watch from the majority side: a connection to the cut-off
			// node would hang.
			js := connect(t, env, n)
			env.Disconnect(t, n)
			waitFor(t, progressWait, "the majority to elect a new WAL leader", func() bool {
				l := streamLeaderNoFail(js, streams.WALStream)
				return l != "" && l != leader
			})
			t.Logf("WAL leader moved from %s to %s", leader, streamLeaderNoFail(js, streams.WALStream))
			// The second half is written while the partition holds;
			// producers connected to the cut-off node must get it through
			// once they notice.
			release()
			env.Reconnect(t, n)
			healthy(t, js)
		}},
		{"minio-restarted", func(t *testing.T, release func()) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stop := 5 * time.Second
			if err := env.MinIO.Container.Stop(ctx, &stop); err != nil {
				t.Fatalf("stop minio: %v", err)
			}
			seq := walLast(t, js)
			release()
			// The producers publish on while the lake is down.
			waitFor(t, progressWait, fmt.Sprintf("the WAL to grow past %d without MinIO", seq), func() bool {
				s, ok := walLastNoFail(js)
				return ok && s > seq
			})
			env.Restart(t, env.MinIO)
			// Restart returns once the container runs; MinIO answers 503
			// until it has initialized. The lake has a high-water since
			// the baseline, so reading one says MinIO serves it again.
			waitFor(t, progressWait, "MinIO to serve the lake again", func() bool { return env.HighWater(t, store) > 0 })
		}},
		{"encoder-killed", func(t *testing.T, release func()) {
			env.Kill(t, env.Encoders[0])
			hw := env.HighWater(t, store)
			release()
			advanced(t, hw, "with one encoder")
			env.Restart(t, env.Encoders[0])
		}},
		{"active-committer-killed", func(t *testing.T, release func()) {
			holder := leaseHolder(t, js)
			var active *quarrytest.Node
			for _, c := range env.Committers {
				if c.Name == holder {
					active = c
				}
			}
			if active == nil {
				t.Fatalf("lease holder %q is not a committer container", holder)
			}
			hw := env.HighWater(t, store)
			env.Kill(t, active)
			release()
			// The standby takes over: the lease moves and the high-water
			// advances while the killed committer is down.
			waitFor(t, progressWait, "the standby to take over from "+holder, func() bool {
				h := leaseHolderNoFail(js)
				return h != "" && h != holder && env.HighWater(t, store) > hw
			})
			t.Logf("lease moved from %s to %s", holder, leaseHolderNoFail(js))
			env.Restart(t, active)
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { run(t, s.fault) }) {
			t.FailNow()
		}
	}
	t.Logf("all cases in %s", time.Since(start).Round(time.Second))
}

// waitFor polls cond until it holds and fails the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// connect connects as the admin user to every NATS node but except (nil:
// all). It pings often, so that a connection to a node cut off by a
// partition is given up quickly rather than hanging the test's polls.
func connect(t *testing.T, env *quarrytest.Env, except *quarrytest.Node) jetstream.JetStream {
	t.Helper()
	urls := strings.Split(env.NATSURL, ",")
	var keep []string
	for i, u := range urls {
		if except == nil || i >= len(env.NATS) || env.NATS[i] != except {
			keep = append(keep, u)
		}
	}
	nc, err := nats.Connect(strings.Join(keep, ","), nats.UserInfo(env.NATSUser, env.NATSPassword), nats.RootCAs(env.NATSCAFile),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true), nats.Timeout(5*time.Second),
		nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(3))
	if err != nil {
		t.Fatalf("connect %v: %v", keep, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// pipedProducer is a producer container reading its lines from stdin
// (`quarry producer --input -`) through an attached stream: it runs until
// the test closes its input.
type pipedProducer struct {
	name, tenant string
	c            testcontainers.Container
	stdin        client.HijackedResponse
}

// producerSpec is how quarrytest runs a producer container.
type producerSpec struct {
	image string
	env   map[string]string
	files map[string][]byte // container path: content
}

// copySpec reads the image, environment and config files (QUARRY_CONFIG,
// QUARRY_NATS_TLS_CA) of a running producer container.
func copySpec(t *testing.T, p *quarrytest.Producer) *producerSpec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info, err := p.Node.Container.Inspect(ctx)
	if err != nil {
		t.Fatalf("inspect %s: %v", p.Node.Name, err)
	}
	s := &producerSpec{image: info.Config.Image, env: map[string]string{}, files: map[string][]byte{}}
	for _, kv := range info.Config.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			s.env[k] = v
		}
	}
	for _, key := range []string{"QUARRY_CONFIG", "QUARRY_NATS_TLS_CA"} {
		path := s.env[key]
		if path == "" {
			continue
		}
		rc, err := p.Node.Container.CopyFileFromContainer(ctx, path)
		if err != nil {
			t.Fatalf("copy %s (%s) from %s: %v", path, key, p.Node.Name, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("copy %s from %s: %v", path, p.Node.Name, err)
		}
		s.files[path] = b
	}
	return s
}

// startPiped starts a piped producer for tenant as spec says, on the
// deployment's network, and attaches to its stdin. It returns once the
// producer's line source runs.
func startPiped(t *testing.T, env *quarrytest.Env, spec *producerSpec, tenant string) *pipedProducer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var files []testcontainers.ContainerFile
	for path, b := range spec.files {
		files = append(files, testcontainers.ContainerFile{Reader: bytes.NewReader(b), ContainerFilePath: path, FileMode: 0o644})
	}
	pipedSeq.Lock()
	pipedSeq.n++
	name := fmt.Sprintf("piped-%d-%s", pipedSeq.n, tenant)
	pipedSeq.Unlock()
	c, err := testcontainers.Run(ctx, spec.image,
		tcnet.WithNetwork([]string{name}, &testcontainers.DockerNetwork{Name: env.Network}),
		testcontainers.WithName(env.Network+"-"+name),
		testcontainers.WithCmd("producer", "--input", "-", "--tenant", tenant),
		testcontainers.WithEnv(spec.env),
		testcontainers.WithFiles(files...),
		testcontainers.WithConfigModifier(func(cfg *container.Config) {
			cfg.OpenStdin, cfg.StdinOnce, cfg.AttachStdin = true, true, true
		}),
		testcontainers.WithWaitStrategyAndDeadline(3*time.Minute, wait.ForLog("line source started").WithStartupTimeout(3*time.Minute)),
	)
	p := &pipedProducer{name: name, tenant: tenant, c: c}
	if c != nil {
		t.Cleanup(func() {
			if p.stdin.Conn != nil {
				p.stdin.Close()
			}
			if t.Failed() {
				t.Logf("--- %s log tail:\n%s", name, p.logs(60))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = c.Terminate(ctx)
		})
	}
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("docker: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	// The hijacked stream outlives ctx: attach under a context of its own.
	res, err := cli.ContainerAttach(context.Background(), c.GetContainerID(), client.ContainerAttachOptions{Stream: true, Stdin: true})
	if err != nil {
		t.Fatalf("attach to the stdin of %s: %v", name, err)
	}
	p.stdin = res.HijackedResponse
	return p
}

var pipedSeq struct {
	sync.Mutex
	n int
}

// feed writes first to the producer's stdin, waits until resume is closed,
// writes rest and closes the input (the producer then publishes what is
// left and exits).
func (p *pipedProducer) feed(first []string, resume <-chan struct{}, rest []string) error {
	if _, err := io.WriteString(p.stdin.Conn, strings.Join(first, "\n")+"\n"); err != nil {
		return fmt.Errorf("feed %s: %w", p.name, err)
	}
	<-resume
	if _, err := io.WriteString(p.stdin.Conn, strings.Join(rest, "\n")+"\n"); err != nil {
		return fmt.Errorf("feed %s: %w", p.name, err)
	}
	if err := p.stdin.CloseWrite(); err != nil {
		return fmt.Errorf("close the input of %s: %w", p.name, err)
	}
	return nil
}

// wait waits for the producer to exit and fails the test unless it exited
// 0. Its input is gone with it, so it is not restarted.
func (p *pipedProducer) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := p.c.State(ctx)
		cancel()
		if err == nil && !st.Running && st.Status == "exited" {
			if st.ExitCode != 0 {
				t.Errorf("%s exited %d:\n%s", p.name, st.ExitCode, p.logs(40))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s did not exit within %s (state %v, %v):\n%s", p.name, timeout, st, err, p.logs(30))
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (p *pipedProducer) logs(n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc, err := p.c.Logs(ctx)
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func walLastNoFail(js jetstream.JetStream) (uint64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		return 0, false
	}
	return s.CachedInfo().State.LastSeq, true
}

func walLast(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	var seq uint64
	waitFor(t, progressWait, "the WAL stream info", func() bool {
		s, ok := walLastNoFail(js)
		seq = s
		return ok
	})
	return seq
}

func streamLeaderNoFail(js jetstream.JetStream, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil || s.CachedInfo().Cluster == nil {
		return ""
	}
	return s.CachedInfo().Cluster.Leader
}

func streamLeader(t *testing.T, js jetstream.JetStream, name string) string {
	deadline := time.Now().Add(time.Minute)
	for {
		if l := streamLeaderNoFail(js, name); l != "" {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader for %s", name)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// unhealthy describes the first stream with a missing leader or a replica
// that is offline or behind ("" when all are current).
func unhealthy(js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cfg := range (streams.Config{Replicas: 3}).Defaults().StreamConfigs() {
		s, err := js.Stream(ctx, cfg.Name)
		if err != nil {
			return cfg.Name + ": " + err.Error()
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			return cfg.Name + ": no leader"
		}
		if len(ci.Replicas) != 2 {
			return cfg.Name + ": " + strconv.Itoa(len(ci.Replicas)) + " followers"
		}
		for _, r := range ci.Replicas {
			if !r.Current || r.Offline {
				return cfg.Name + ": replica " + r.Name + " not current"
			}
		}
	}
	return ""
}

func leaseHolderNoFail(js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, streams.StateBucket)
	if err != nil {
		return ""
	}
	ent, err := kv.Get(ctx, streams.KeyLease)
	if err != nil {
		return ""
	}
	var l struct {
		Holder string `json:"holder"`
	}
	if json.Unmarshal(ent.Value(), &l) != nil {
		return ""
	}
	return l.Holder
}

func leaseHolder(t *testing.T, js jetstream.JetStream) string {
	deadline := time.Now().Add(time.Minute)
	for {
		if h := leaseHolderNoFail(js); h != "" {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatal("no committer lease")
		}
		time.Sleep(250 * time.Millisecond)
	}
}
