package streams_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/streams"
)

// TestEnsureWaitsForAYoungCluster: a role that starts before its cluster has
// a JetStream meta leader must not hang on its first request, nor give up:
// Ensure retries until the cluster answers.
func TestEnsureWaitsForAYoungCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	ports := make([]int, 3)
	var routes []string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	dir := t.TempDir()
	startNode := func(i int) string {
		s, err := natsutil.StartServer(natsutil.ServerConfig{
			Name: fmt.Sprintf("n%d", i), StoreDir: filepath.Join(dir, fmt.Sprint(i)), SyncAlways: true,
			ClusterName: "young", ClusterPort: ports[i], Routes: routes,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		return s.ClientURL()
	}
	url := startNode(0) // alone: no quorum, no meta leader
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nc, js, err := natsutil.Connect(ctx, natsutil.ConnConfig{URL: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	done := make(chan error, 1)
	go func() { done <- streams.Ensure(ctx, js, streams.Config{Replicas: 3}.Defaults()) }()
	time.Sleep(2 * time.Second)
	startNode(1)
	startNode(2)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Ensure on a cluster that formed after the call: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Ensure did not return")
	}
}
