// Package process runs quarry's roles as separate OS processes against one
// NATS server process and checks the lake afterwards, with nothing but the
// lake. It needs no Docker and runs in `make test`.
package process

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/quarrybin"
	"github.com/quarrylake/quarry/internal/syncbuf"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{} // closed when the process has exited; err is then set
	err  error
}

func start(t *testing.T, bin, name string, args ...string) *proc {
	t.Helper()
	return startEnv(t, bin, name, nil, args...)
}

// startEnv starts bin with args and, added to this process's environment,
// env ("K=V" entries).
func startEnv(t *testing.T, bin, name string, env []string, args ...string) *proc {
	t.Helper()
	return startCmd(t, bin, name, env, nil, args...)
}

// startCmd is startEnv with setup, if not nil, called on the command
// before it starts.
func startCmd(t *testing.T, bin, name string, env []string, setup func(*exec.Cmd), args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if setup != nil {
		setup(cmd)
	}
	out := &syncbuf.Buffer{}
	cmd.Stdout = out
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- %s output:\n%s", name, out.Tail(4000))
		}
	})
	return p
}

// TestMultiProcessEncoderKilled runs a NATS server, a committer, the miner,
// two encoders and two producers as separate processes, SIGKILLs one encoder
// while it holds fetched, unacknowledged batches and checks that the lake
// holds every input line exactly once.
//
// The kill lands mid-stream by construction, not by timing: the producers
// read stdin and get the second half of their lines only after the kill,
// and encoder a runs with an object store whose uploads hang
// (QUARRY_FAULTS), so the batches it fetches can only reach the lake
// through redelivery after the kill, and the high-water cannot pass them
// before it.
func TestMultiProcessEncoderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test builds the binary and runs for about a minute")
	}
	dir := t.TempDir()
	bin := quarrybin.Path(t, dir)
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	lakeDir := filepath.Join(dir, "lake")
	cfgFile := filepath.Join(dir, "quarry.yaml")
	// A short ack wait so the killed encoder's batches come back quickly.
	if err := os.WriteFile(cfgFile, []byte("encoder:\n  ack_wait: 4s\n  max_age: 300ms\ncommitter:\n  lease_ttl: 3s\n  commit_interval: 200ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := start(t, bin, "server", "server", "--data", filepath.Join(dir, "nats"), "--port", fmt.Sprint(port))
	// Generous: the deadline only bounds polls that end as soon as their
	// condition holds, on a machine that may be loaded.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nc, js, err := natsutil.Connect(ctx, natsutil.ConnConfig{URL: url}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, srv.out.String())
	}
	defer nc.Close()

	common := []string{"--nats", url, "--config", cfgFile}
	start(t, bin, "committer", append([]string{"committer", "--lake", lakeDir}, common...)...)
	start(t, bin, "miner", append([]string{"miner"}, common...)...)
	encA := startEnv(t, bin, "encoder-a", []string{"QUARRY_FAULTS=put.delay=1h"},
		append([]string{"encoder", "--lake", lakeDir, "--name", "a"}, common...)...)

	// The producers read stdin: the first half of their lines now, the
	// rest once encoder a is killed.
	tenants := []string{"acme", "globex"}
	gen := producer.NewGenerator(3, tenants)
	var want []string
	var prods []*proc
	resume := make(chan struct{})
	feedErr := make(chan error, len(tenants))
	for _, tn := range tenants {
		lines := gen.Lines(tn, 30000)
		want = append(want, lines...)
		p, stdin := startStdin(t, bin, "producer-"+tn, append([]string{"producer", "--input", "-", "--tenant", tn}, common...)...)
		prods = append(prods, p)
		half := len(lines) / 2
		go func() { feedErr <- feed(stdin, lines[:half], resume, lines[half:]) }()
	}

	// Encoder a is the only encoder: wait until it holds batches. It keeps
	// them (its uploads hang, it extends their ack deadline) until killed.
	consumerInfo := func() *jetstream.ConsumerInfo {
		c, err := js.Consumer(ctx, streams.MinedStream, streams.EncoderConsumer)
		if err != nil {
			return nil
		}
		info, err := c.Info(ctx)
		if err != nil {
			return nil
		}
		return info
	}
	var held int
	for {
		if info := consumerInfo(); info != nil && info.NumAckPending > 0 {
			held = info.NumAckPending
			break
		}
		if ctx.Err() != nil {
			t.Fatal("encoder a never fetched a batch")
		}
		time.Sleep(50 * time.Millisecond)
	}
	start(t, bin, "encoder-b", append([]string{"encoder", "--lake", lakeDir, "--name", "b"}, common...)...)
	store, err := objstore.Open(ctx, lakeDir, objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	lk := lake.Open(store)
	killedAt, _ := lk.HighWater(ctx)
	if err := encA.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-encA.done
	t.Logf("encoder a killed holding %d batches at high-water %d; releasing the second half", held, killedAt)
	close(resume)
	for range tenants {
		select {
		case err := <-feedErr:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("the producers did not read their input")
		}
	}
	for _, p := range prods {
		select {
		case <-p.done:
			if p.err != nil {
				t.Fatalf("%s: %v\n%s", p.name, p.err, p.out.String())
			}
		case <-ctx.Done():
			t.Fatalf("%s did not finish", p.name)
		}
	}
	wal, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		t.Fatal(err)
	}
	last := wal.CachedInfo().State.LastSeq
	for {
		hw, _ := lk.HighWater(ctx)
		if hw >= last {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("high-water %d never reached WAL last seq %d", hw, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := exec.Command(bin, "query", "--lake", lakeDir, "--format", "raw").Output()
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if d := laketest.Diff(got, want); d != "" {
		t.Fatalf("quarry query --format raw is not exactly the input: %s", d)
	}
	if err := laketest.ValidLogs(ctx, store); err != nil {
		t.Fatal(err)
	}
}

// startStdin is start with a pipe to the process's stdin.
func startStdin(t *testing.T, bin, name string, args ...string) (*proc, io.WriteCloser) {
	t.Helper()
	var stdin io.WriteCloser
	p := startCmd(t, bin, name, nil, func(cmd *exec.Cmd) {
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdin = w
	}, args...)
	return p, stdin
}

// feed writes first to w, waits until resume is closed, writes rest and
// closes w.
func feed(w io.WriteCloser, first []string, resume <-chan struct{}, rest []string) error {
	defer w.Close()
	if _, err := io.WriteString(w, strings.Join(first, "\n")+"\n"); err != nil {
		return fmt.Errorf("feed: %w", err)
	}
	<-resume
	if _, err := io.WriteString(w, strings.Join(rest, "\n")+"\n"); err != nil {
		return fmt.Errorf("feed: %w", err)
	}
	return w.Close()
}

// TestMultiProcessRolePermissions runs every role as its own NATS user with
// exactly the permissions of deploy/nats/auth.conf (the file the compose and
// Kubernetes deployments include) and checks the lake: a permission a role
// lacks shows up here, without Docker.
func TestMultiProcessRolePermissions(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	bin := quarrybin.Path(t, dir)
	_, file, _, _ := runtime.Caller(0)
	auth, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "nats", "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "auth.conf"), auth, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(conf, []byte("include ./auth.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	users := []string{"admin", "producer", "miner", "encoder", "committer", "reader"}
	var serverEnv []string
	pw := map[string]string{}
	for _, u := range users {
		pw[u] = "pw-" + u
		serverEnv = append(serverEnv, fmt.Sprintf("QUARRY_%s_PASSWORD=%s", strings.ToUpper(u), pw[u]))
	}
	as := func(u string) []string {
		return []string{"QUARRY_NATS_USER=" + u, "QUARRY_NATS_PASSWORD=" + pw[u]}
	}
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	lakeDir := filepath.Join(dir, "lake")
	cfgFile := filepath.Join(dir, "quarry.yaml")
	if err := os.WriteFile(cfgFile, []byte("encoder:\n  max_age: 300ms\ncommitter:\n  commit_interval: 200ms\n  purge_wal: true\n  purge_reports: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startEnv(t, bin, "server", serverEnv, "server", "--data", filepath.Join(dir, "nats"), "--port", fmt.Sprint(port), "--nats-config", conf)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The admin user creates the streams first, as a deployment's setup job
	// would; every role then checks them with its own user.
	nc, js, err := natsutil.Connect(ctx, natsutil.ConnConfig{URL: url, User: "admin", Password: pw["admin"]}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, srv.out.String())
	}
	defer nc.Close()
	if err := streams.Ensure(ctx, js, streams.Config{}.Defaults()); err != nil {
		t.Fatal(err)
	}
	common := []string{"--nats", url, "--config", cfgFile}
	start := func(name, user string, args ...string) *proc {
		return startEnv(t, bin, name, as(user), append(args, common...)...)
	}
	start("committer", "committer", "committer", "--lake", lakeDir)
	start("miner", "miner", "miner")
	start("encoder", "encoder", "encoder", "--lake", lakeDir)
	gen := producer.NewGenerator(5, []string{"acme"})
	lines := gen.Lines("acme", 20000)
	f := filepath.Join(dir, "acme.log")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two producer runs on one source: the second resumes (reads its
	// position and scans its WAL subject) with the producer's permissions.
	for i, part := range [][]string{lines[:10000], lines} {
		if err := os.WriteFile(f, []byte(strings.Join(part, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := start(fmt.Sprintf("producer-%d", i), "producer", "producer", "--input", f, "--tenant", "acme")
		select {
		case <-p.done:
			if p.err != nil {
				t.Fatalf("%s: %v\n%s", p.name, p.err, p.out.String())
			}
		case <-ctx.Done():
			t.Fatalf("%s did not finish", p.name)
		}
	}
	wal, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		t.Fatal(err)
	}
	last := wal.CachedInfo().State.LastSeq
	store, err := objstore.Open(ctx, lakeDir, objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	lk := lake.Open(store)
	for {
		hw, _ := lk.HighWater(ctx)
		if hw >= last {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("high-water %d never reached WAL last seq %d\n%s", hw, last, srv.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := exec.Command(bin, "query", "--lake", lakeDir, "--format", "raw").Output()
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if got := strings.Count(string(out), "\n"); got != len(lines) {
		t.Fatalf("lake holds %d lines, input had %d", got, len(lines))
	}
	if strings.Contains(srv.out.String(), "Permissions Violation") {
		t.Fatalf("the server logged a permissions violation:\n%s", srv.out.String())
	}
}
