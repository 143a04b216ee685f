// Package quarrytest starts quarry in containers for a test: a 3-node NATS
// JetStream cluster (R3 streams, fsync on every write, TLS, one user per
// role with the permissions of deploy/nats/auth.conf), MinIO, the miner, the
// encoders and the committers, on a private Docker network.
//
//	env := quarrytest.Start(t, quarrytest.Options{})
//	env.Publish(t, "acme", lines)            // a producer container
//	env.WaitCommitted(t, 2*time.Minute)      // high-water reaches the WAL end
//	got := env.LakeLines(t)                  // read back through MinIO
//
// It uses the images `make images` builds (quarrylake/quarry,
// quarrylake/nats-server, quarrylake/minio at Options.Tag) and never pulls:
// a missing image fails the test with what to run. Set
// TESTCONTAINERS_RYUK_DISABLED=true where the reaper image cannot be pulled
// (Start does it for the process). Containers are removed when the test
// ends; when it failed, the tail of every container's log is logged first.
package quarrytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	mnet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go"
	tcnet "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/tlsgen"
	"github.com/quarrylake/quarry/streams"
)

// Options configure Start. The zero value is a full deployment.
type Options struct {
	// Tag of the images; default $QUARRY_TAG, else "dev".
	Tag string
	// Encoders and Committers to run: default 2 each (a committer holds the
	// lease, the other waits as a standby).
	Encoders, Committers int
	// RoleConfig is the YAML config file of every role (mounted as
	// QUARRY_CONFIG). Default: R3 streams and short timeouts for tests.
	RoleConfig string
}

// DefaultRoleConfig is the role config Start uses unless Options.RoleConfig
// is set: replicated streams, quick flushes, a short lease and ack wait so
// faults heal quickly.
const DefaultRoleConfig = `streams:
  replicas: 3
encoder:
  ack_wait: 6s
  max_age: 300ms
committer:
  lease_ttl: 4s
  commit_interval: 200ms
producer:
  frame_max_records: 100
`

// Node is one container of the deployment.
type Node struct {
	Name      string // the network alias: nats-0, minio, miner, encoder-0, committer-1
	Container testcontainers.Container
}

// Env is a running deployment.
type Env struct {
	// NATSURL lists every NATS node as reachable from the test process
	// (tls://127.0.0.1:PORT,...); NATSUser/NATSPassword is the admin user
	// and NATSCAFile the CA the servers' certificates are signed by.
	NATSURL, NATSUser, NATSPassword, NATSCAFile string
	// S3Endpoint (host:port, plain http), S3AccessKey and S3SecretKey reach
	// MinIO from the test process; LakeURL is the lake in it.
	S3Endpoint, S3AccessKey, S3SecretKey, LakeURL string
	// Network is the name of the private Docker network.
	Network string

	NATS       []*Node // nats-0..2
	MinIO      *Node
	Miner      *Node
	Encoders   []*Node
	Committers []*Node

	tag, dir   string
	roleConfig string
	passwords  map[string]string
	docker     *client.Client
	mu         sync.Mutex
	producers  int
}

const (
	imgQuarry = "quarrylake/quarry"
	imgNATS   = "quarrylake/nats-server"
	imgMinIO  = "quarrylake/minio"
	natsNodes = 3
	// In-network URLs of the cluster for the roles.
	clusterURL = "tls://nats-0:4222,tls://nats-1:4222,tls://nats-2:4222"
)

// Start starts the deployment and returns once every role is up. It fails
// the test (t.Fatal) on any error.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	if o.Tag == "" {
		o.Tag = os.Getenv("QUARRY_TAG")
	}
	if o.Tag == "" {
		o.Tag = "dev"
	}
	if o.Encoders == 0 {
		o.Encoders = 2
	}
	if o.Committers == 0 {
		o.Committers = 2
	}
	if o.RoleConfig == "" {
		o.RoleConfig = DefaultRoleConfig
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("docker: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	for _, img := range []string{imgQuarry, imgNATS, imgMinIO} {
		ref := img + ":" + o.Tag
		if _, err := cli.ImageInspect(ctx, ref); err != nil {
			t.Fatalf("image %s is missing: build it with `make images` (nothing is pulled): %v", ref, err)
		}
	}
	e := &Env{tag: o.Tag, dir: t.TempDir(), roleConfig: o.RoleConfig, docker: cli.Client, passwords: map[string]string{}, LakeURL: "s3://lake"}
	for _, u := range []string{"admin", "producer", "miner", "encoder", "committer", "reader"} {
		e.passwords[u] = tlsgen.Secret(12)
	}
	e.NATSUser, e.NATSPassword = "admin", e.passwords["admin"]
	e.S3AccessKey, e.S3SecretKey = "quarrytest", tlsgen.Secret(12)
	hosts := []string{"localhost", "127.0.0.1", "nats-0", "nats-1", "nats-2"}
	if err := tlsgen.Write(e.dir, hosts, 48*time.Hour); err != nil {
		t.Fatalf("certificates: %v", err)
	}
	e.NATSCAFile = filepath.Join(e.dir, "ca.pem")
	if err := os.WriteFile(filepath.Join(e.dir, "quarry.yaml"), []byte(o.RoleConfig), 0o644); err != nil {
		t.Fatal(err)
	}

	nw, err := tcnet.New(ctx)
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	e.Network = nw.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = nw.Remove(ctx)
	})

	// NATS: three nodes with the configs of deploy/nats, started together
	// (each waits for its routes).
	natsDir := filepath.Join(repoRoot(), "deploy", "nats")
	var urls []string
	var wg sync.WaitGroup
	errs := make([]error, natsNodes)
	e.NATS = make([]*Node, natsNodes)
	ports := make([]int, natsNodes)
	for i := range natsNodes {
		name := fmt.Sprintf("nats-%d", i)
		env := map[string]string{"NATS_SERVER_NAME": name}
		for u, p := range e.passwords {
			env["QUARRY_"+strings.ToUpper(u)+"_PASSWORD"] = p
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.NATS[i], ports[i], errs[i] = e.runPublished(ctx, t, name, imgNATS, 4222,
				testcontainers.WithCmd("-c", "/etc/nats/cluster.conf", "--routes", "nats://nats-0:6222,nats://nats-1:6222,nats://nats-2:6222"),
				testcontainers.WithEnv(env),
				testcontainers.WithFiles(
					testcontainers.ContainerFile{HostFilePath: filepath.Join(natsDir, "cluster.conf"), ContainerFilePath: "/etc/nats/cluster.conf", FileMode: 0o644},
					testcontainers.ContainerFile{HostFilePath: filepath.Join(natsDir, "auth.conf"), ContainerFilePath: "/etc/nats/auth.conf", FileMode: 0o644},
					testcontainers.ContainerFile{HostFilePath: filepath.Join(e.dir, "ca.pem"), ContainerFilePath: "/certs/ca.pem", FileMode: 0o644},
					testcontainers.ContainerFile{HostFilePath: filepath.Join(e.dir, "server.pem"), ContainerFilePath: "/certs/server.pem", FileMode: 0o644},
					testcontainers.ContainerFile{HostFilePath: filepath.Join(e.dir, "server-key.pem"), ContainerFilePath: "/certs/server-key.pem", FileMode: 0o644},
				),
				testcontainers.WithWaitStrategyAndDeadline(2*time.Minute, wait.ForLog("Server is ready").WithStartupTimeout(2*time.Minute)),
			)
		}()
	}
	var minioPort int
	wg.Add(1)
	var minioErr error
	go func() {
		defer wg.Done()
		e.MinIO, minioPort, minioErr = e.runPublished(ctx, t, "minio", imgMinIO, 9000,
			testcontainers.WithEnv(map[string]string{"MINIO_ROOT_USER": e.S3AccessKey, "MINIO_ROOT_PASSWORD": e.S3SecretKey}),
			testcontainers.WithWaitStrategyAndDeadline(2*time.Minute, wait.ForLog("API:").WithStartupTimeout(2*time.Minute)),
		)
	}()
	wg.Wait()
	if err := errors.Join(append(errs, minioErr)...); err != nil {
		t.Fatalf("start NATS and MinIO: %v", err)
	}
	for _, p := range ports {
		urls = append(urls, fmt.Sprintf("tls://127.0.0.1:%d", p))
	}
	e.S3Endpoint = fmt.Sprintf("127.0.0.1:%d", minioPort)
	e.NATSURL = strings.Join(urls, ",")
	// JetStream answers only once the cluster elected a meta leader; a
	// request before that gets no reply at all.
	e.WaitJetStream(t, 2*time.Minute)

	// The roles. The miner first: it creates the streams with the role
	// config's replicas.
	e.Miner = e.role(ctx, t, "miner", "miner", []string{"miner"})
	var rwg sync.WaitGroup
	e.Encoders = make([]*Node, o.Encoders)
	for i := range o.Encoders {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			name := fmt.Sprintf("encoder-%d", i)
			e.Encoders[i] = e.role(ctx, t, name, "encoder", []string{"encoder", "--name", strings.ReplaceAll(name, "-", "")})
		}()
	}
	e.Committers = make([]*Node, o.Committers)
	for i := range o.Committers {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			name := fmt.Sprintf("committer-%d", i)
			e.Committers[i] = e.role(ctx, t, name, "committer", []string{"committer", "--name", name})
		}()
	}
	rwg.Wait()
	for _, n := range append(append([]*Node{e.Miner}, e.Encoders...), e.Committers...) {
		if n == nil {
			t.Fatal("a role did not start")
		}
	}
	return e
}

// role starts a quarry role container as user; it returns nil (after
// t.Error) when it does not start.
func (e *Env) role(ctx context.Context, t testing.TB, name, user string, cmd []string, extra ...testcontainers.ContainerCustomizer) *Node {
	opts := append([]testcontainers.ContainerCustomizer{
		testcontainers.WithCmd(cmd...),
		testcontainers.WithEnv(e.roleEnv(user)),
		testcontainers.WithFiles(
			testcontainers.ContainerFile{HostFilePath: filepath.Join(e.dir, "ca.pem"), ContainerFilePath: "/certs/ca.pem", FileMode: 0o644},
			testcontainers.ContainerFile{HostFilePath: filepath.Join(e.dir, "quarry.yaml"), ContainerFilePath: "/etc/quarry/quarry.yaml", FileMode: 0o644},
		),
	}, extra...)
	if len(extra) == 0 {
		opts = append(opts, testcontainers.WithWaitStrategyAndDeadline(3*time.Minute, wait.ForLog("role started").WithStartupTimeout(3*time.Minute)))
	}
	n, err := e.run(ctx, t, name, imgQuarry, opts...)
	if err != nil {
		t.Errorf("start %s: %v", name, err)
		return nil
	}
	return n
}

func (e *Env) roleEnv(user string) map[string]string {
	// QUARRYTEST_ADMIN_ROLES=1 runs every role as the admin user: tells a
	// missing permission in deploy/nats/auth.conf from another failure.
	if os.Getenv("QUARRYTEST_ADMIN_ROLES") == "1" {
		user = "admin"
	}
	return map[string]string{
		"QUARRY_CONFIG":        "/etc/quarry/quarry.yaml",
		"QUARRY_NATS_URL":      clusterURL,
		"QUARRY_NATS_USER":     user,
		"QUARRY_NATS_PASSWORD": e.passwords[user],
		"QUARRY_NATS_TLS_CA":   "/certs/ca.pem",
		"QUARRY_HTTP_ADDR":     ":8080",
		"QUARRY_LAKE":          e.LakeURL,
		"QUARRY_S3_ENDPOINT":   "http://minio:9000",
		"QUARRY_S3_ACCESS_KEY": e.S3AccessKey,
		"QUARRY_S3_SECRET_KEY": e.S3SecretKey,
		"QUARRY_S3_REGION":     "us-east-1",
	}
}

// run starts a container on the network under alias name and removes it
// when the test ends (logging its tail first if the test failed).
func (e *Env) run(ctx context.Context, t testing.TB, name, image string, opts ...testcontainers.ContainerCustomizer) (*Node, error) {
	opts = append([]testcontainers.ContainerCustomizer{
		tcnet.WithNetwork([]string{name}, &testcontainers.DockerNetwork{Name: e.Network}),
		testcontainers.WithName(fmt.Sprintf("%s-%s", e.Network, name)),
	}, opts...)
	c, err := testcontainers.Run(ctx, image+":"+e.tag, opts...)
	if err != nil && strings.Contains(err.Error(), "port is already allocated") {
		if c != nil {
			tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_ = c.Terminate(tctx)
			cancel()
		}
		return nil, fmt.Errorf("%s: %w: %w", name, errPortTaken, err)
	}
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("--- %s log tail:\n%s", name, logTail(c, 60))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = c.Terminate(ctx)
		})
	}
	if err != nil {
		if c != nil {
			return nil, fmt.Errorf("%s: %w\n%s", name, err, logTail(c, 30))
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Node{Name: name, Container: c}, nil
}

// runPublished is run with containerPort published on a free host port.
// A free port can be taken by another process between the probe and
// Docker's bind ("port is already allocated"): the container is then
// removed and started again on another port.
func (e *Env) runPublished(ctx context.Context, t testing.TB, name, image string, containerPort int, opts ...testcontainers.ContainerCustomizer) (*Node, int, error) {
	var err error
	for range 5 {
		port := freePort(t)
		var n *Node
		n, err = e.run(ctx, t, name, image, append(opts, publish(containerPort, port))...)
		if err == nil {
			return n, port, nil
		}
		if !errors.Is(err, errPortTaken) {
			return nil, 0, err
		}
		t.Logf("%s: host port %d was taken before Docker bound it; trying another", name, port)
	}
	return nil, 0, err
}

// errPortTaken: Docker could not bind a published host port.
var errPortTaken = errors.New("host port already allocated")

// publish binds containerPort to 127.0.0.1:hostPort, fixed so it survives
// restarts.
func publish(containerPort, hostPort int) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		p := mnet.MustParsePort(fmt.Sprintf("%d/tcp", containerPort))
		req.ExposedPorts = append(req.ExposedPorts, p.String())
		prev := req.HostConfigModifier
		req.HostConfigModifier = func(hc *container.HostConfig) {
			if prev != nil {
				prev(hc)
			}
			if hc.PortBindings == nil {
				hc.PortBindings = mnet.PortMap{}
			}
			hc.PortBindings[p] = []mnet.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(hostPort)}}
		}
		return nil
	}
}

func logTail(c testcontainers.Container, n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc, err := c.Logs(ctx)
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

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Connect connects to the cluster as the admin user; the connection is
// closed when the test ends.
func (e *Env) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(e.NATSURL, nats.UserInfo(e.NATSUser, e.NATSPassword), nats.RootCAs(e.NATSCAFile),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("connect %s: %v", e.NATSURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// WaitJetStream waits until the cluster answers JetStream requests.
func (e *Env) WaitJetStream(t testing.TB, timeout time.Duration) {
	t.Helper()
	_, js := e.Connect(t)
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("JetStream not available after %s: %v", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Store opens the lake's object store in MinIO from the test process.
func (e *Env) Store(t testing.TB) objstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := objstore.Open(ctx, e.LakeURL, objstore.S3Options{Endpoint: e.S3Endpoint, AccessKey: e.S3AccessKey, SecretKey: e.S3SecretKey, Region: "us-east-1"})
	if err != nil {
		t.Fatalf("open lake %s at %s: %v", e.LakeURL, e.S3Endpoint, err)
	}
	return s
}

// Producer is a producer container publishing one file of lines.
type Producer struct {
	Node   *Node
	Tenant string
}

// StartProducer starts a producer container publishing lines for tenant
// (as one file, a new source each call) and returns without waiting.
func (e *Env) StartProducer(t testing.TB, tenant string, lines []string) *Producer {
	t.Helper()
	return e.StartPacedProducer(t, tenant, lines, 0)
}

// StartPacedProducer is StartProducer reading at most rate lines per
// second (`quarry producer --rate`; 0: unlimited), so that a test can
// inject a fault while lines are still being published.
func (e *Env) StartPacedProducer(t testing.TB, tenant string, lines []string, rate float64) *Producer {
	t.Helper()
	e.mu.Lock()
	e.producers++
	name := fmt.Sprintf("producer-%d", e.producers)
	e.mu.Unlock()
	body := []byte(strings.Join(lines, "\n") + "\n")
	path := fmt.Sprintf("/in/%s-%s.log", name, tenant)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := []string{"producer", "--input", path, "--tenant", tenant}
	if rate > 0 {
		args = append(args, "--rate", strconv.FormatFloat(rate, 'f', -1, 64))
	}
	n := e.role(ctx, t, name, "producer", args,
		testcontainers.WithFiles(testcontainers.ContainerFile{Reader: bytes.NewReader(body), ContainerFilePath: path, FileMode: 0o644}),
		testcontainers.WithWaitStrategy(wait.ForNop(func(context.Context, wait.StrategyTarget) error { return nil })),
	)
	if n == nil {
		t.FailNow()
	}
	return &Producer{Node: n, Tenant: tenant}
}

// Logs is the last n lines of the node's output.
func (n *Node) Logs(lines int) string { return logTail(n.Container, lines) }

// Running reports whether the producer's container is still running: it
// has not yet published (or not yet seen acked) every line.
func (p *Producer) Running(t testing.TB) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := p.Node.Container.State(ctx)
	if err != nil {
		t.Fatalf("state of %s: %v", p.Node.Name, err)
	}
	return st.Running
}

// Wait waits for the producer to exit and fails the test unless it exited
// 0. A producer resumes from its acked position, so after a failed run
// Wait starts it again (up to twice) and logs it.
func (p *Producer) Wait(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for attempt := 0; ; attempt++ {
		code := waitExit(t, p.Node.Container, time.Until(deadline))
		if code == 0 {
			return
		}
		if attempt == 2 {
			t.Fatalf("%s exited %d:\n%s", p.Node.Name, code, logTail(p.Node.Container, 40))
		}
		t.Logf("%s exited %d; starting it again (it resumes from its acked position):\n%s", p.Node.Name, code, logTail(p.Node.Container, 10))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := p.Node.Container.Start(ctx)
		cancel()
		if err != nil {
			t.Fatalf("restart %s: %v", p.Node.Name, err)
		}
	}
}

func waitExit(t testing.TB, c testcontainers.Container, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := c.State(ctx)
		cancel()
		if err == nil && !st.Running && st.Status == "exited" {
			return st.ExitCode
		}
		if time.Now().After(deadline) {
			t.Fatalf("container did not exit within %s (state %v, %v):\n%s", timeout, st, err, logTail(c, 30))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Publish publishes lines for tenant through a producer container and
// waits until every frame is acked (the producer exited 0).
func (e *Env) Publish(t testing.TB, tenant string, lines []string) {
	t.Helper()
	e.StartProducer(t, tenant, lines).Wait(t, 5*time.Minute)
}

// WALLastSeq is the last sequence of the WAL stream.
func (e *Env) WALLastSeq(t testing.TB) uint64 {
	t.Helper()
	_, js := e.Connect(t)
	var last error
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := js.Stream(ctx, streams.WALStream)
		cancel()
		if err == nil {
			return s.CachedInfo().State.LastSeq
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("WAL stream info: %v", last)
	return 0
}

// HighWater is the lake's committed high-water (0 before the first commit
// or while the store is unreachable).
func (e *Env) HighWater(t testing.TB, store objstore.Store) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hw, _ := lake.HighWater(ctx, store)
	return hw
}

// WaitCommitted waits until the lake's high-water reaches the WAL's last
// sequence, i.e. everything acked so far is committed, and returns it.
func (e *Env) WaitCommitted(t testing.TB, timeout time.Duration) uint64 {
	t.Helper()
	store := e.Store(t)
	last := e.WALLastSeq(t)
	deadline := time.Now().Add(timeout)
	for {
		hw := e.HighWater(t, store)
		if hw >= last {
			return hw
		}
		if time.Now().After(deadline) {
			t.Fatalf("high-water %d did not reach the WAL's last sequence %d within %s", hw, last, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// LakeLines returns every committed line in the lake (raw), sorted.
func (e *Env) LakeLines(t testing.TB) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := laketest.Lines(ctx, e.Store(t))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CheckExactlyOnce fails the test unless the lake holds exactly the
// multiset want (every line once, nothing else) and both Delta logs are
// valid.
func (e *Env) CheckExactlyOnce(t testing.TB, want []string) {
	t.Helper()
	if d := laketest.Diff(e.LakeLines(t), want); d != "" {
		t.Fatalf("lake is not exactly the input: %s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := laketest.ValidLogs(ctx, e.Store(t)); err != nil {
		t.Fatal(err)
	}
}

// Kill kills a container (SIGKILL, no drain).
func (e *Env) Kill(t testing.TB, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.docker.ContainerKill(ctx, n.Container.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatalf("kill %s: %v", n.Name, err)
	}
	waitExit(t, n.Container, time.Minute)
}

// Restart starts a stopped or killed container again (same name, same
// published ports, same files).
func (e *Env) Restart(t testing.TB, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := n.Container.Start(ctx); err != nil {
		t.Fatalf("start %s: %v", n.Name, err)
	}
}

// Disconnect cuts a container off the private network (a partition).
func (e *Env) Disconnect(t testing.TB, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.docker.NetworkDisconnect(ctx, e.Network, client.NetworkDisconnectOptions{Container: n.Container.GetContainerID(), Force: true}); err != nil {
		t.Fatalf("disconnect %s: %v", n.Name, err)
	}
}

// Reconnect heals Disconnect (the container keeps its network alias).
func (e *Env) Reconnect(t testing.TB, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.docker.NetworkConnect(ctx, e.Network, client.NetworkConnectOptions{Container: n.Container.GetContainerID(), EndpointConfig: &mnet.EndpointSettings{Aliases: []string{n.Name}}}); err != nil {
		t.Fatalf("reconnect %s: %v", n.Name, err)
	}
}

// NATSNode returns the NATS node with server name name (nats-0..2).
func (e *Env) NATSNode(name string) *Node {
	for _, n := range e.NATS {
		if n.Name == name {
			return n
		}
	}
	return nil
}
