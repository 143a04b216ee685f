// Package natstest starts embedded JetStream servers and clusters for tests,
// each in its own t.TempDir(), shut down when the test ends.
package natstest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/streams"
)

// Server is a running embedded server.
type Server struct {
	*server.Server
	StoreDir string
	cfg      natsutil.ServerConfig
}

// Restart shuts s down (if it runs) and starts it again on the same store,
// ports and routes, as a process restarted after a crash would be. The
// returned server replaces s.
func (s *Server) Restart(t testing.TB) *Server {
	t.Helper()
	s.Shutdown()
	s.WaitForShutdown()
	srv, err := natsutil.StartServer(s.cfg, nil)
	if err != nil {
		t.Fatalf("restart nats server %s: %v", s.cfg.Name, err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return &Server{Server: srv, StoreDir: s.StoreDir, cfg: s.cfg}
}

// ClusterURL is the comma-separated client URLs of servers, for a client
// that fails over between them.
func ClusterURL(servers []*Server) string {
	var urls []string
	for _, s := range servers {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", s.cfg.Port))
	}
	return strings.Join(urls, ",")
}

// URL is the client URL of s.
func (s *Server) URL() string { return s.ClientURL() }

// RunServer starts a single JetStream server with sync-always in a temp dir.
func RunServer(t testing.TB) *Server {
	t.Helper()
	return RunServerAt(t, t.TempDir(), -1)
}

// RunServerAt starts a server on storeDir and port (-1 for any), so a test can
// restart a server on the same store.
func RunServerAt(t testing.TB, storeDir string, port int) *Server {
	t.Helper()
	cfg := natsutil.ServerConfig{StoreDir: storeDir, Port: port, SyncAlways: true}
	s, err := natsutil.StartServer(cfg, nil)
	if err != nil {
		t.Fatalf("start nats server: %v", err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if cfg.Port < 0 {
		cfg.Port = s.Addr().(*net.TCPAddr).Port
	}
	return &Server{Server: s, StoreDir: storeDir, cfg: cfg}
}

// RunCluster starts an n-node JetStream cluster on loopback, each node
// with sync-always, fixed ports (so Restart keeps them) and its own store,
// and waits until it has a meta leader.
func RunCluster(t testing.TB, n int) []*Server {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	dir := t.TempDir()
	var out []*Server
	for i := 0; i < n; i++ {
		sd := filepath.Join(dir, fmt.Sprintf("n%d", i))
		cfg := natsutil.ServerConfig{
			Name: fmt.Sprintf("n%d", i), StoreDir: sd, Port: freePort(t), SyncAlways: true,
			ClusterName: "quarry-test", ClusterPort: ports[i], Routes: routes,
		}
		s, err := natsutil.StartServer(cfg, nil)
		if err != nil {
			t.Fatalf("start cluster node %d: %v", i, err)
		}
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		out = append(out, &Server{Server: s, StoreDir: sd, cfg: cfg})
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range out {
			if s.JetStreamIsLeader() {
				return out
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("cluster of %d has no JetStream meta leader", n)
	return nil
}

// Connect connects to url and ensures quarry's streams with cfg.
func Connect(t testing.TB, url string, cfg streams.Config) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, js, err := natsutil.Connect(ctx, natsutil.ConnConfig{URL: url, Name: t.Name()}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	if err := streams.Ensure(ctx, js, cfg.Defaults()); err != nil {
		t.Fatalf("ensure streams: %v", err)
	}
	return nc, js
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
