package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/syncbuf"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

// reportConsumerHost is the cluster node that hosts a consumer of the
// report stream: the committer's ordered consumer, an R1 consumer that
// lives on one node only.
func reportConsumerHost(ctx context.Context, js jetstream.JetStream) string {
	st, err := js.Stream(ctx, streams.ReportStream)
	if err != nil {
		return ""
	}
	lister := st.ListConsumers(ctx)
	for info := range lister.Info() {
		if info.Cluster != nil && info.Cluster.Leader != "" {
			return info.Cluster.Leader
		}
	}
	return ""
}

// TestClusterNodeLoss runs the miner, two encoders and the committer
// against a 3-node embedded JetStream cluster with R3 streams and
// sync-always. Halfway through two producers' input, the node that hosts
// the committer's report consumer is shut down: the committer must commit
// the second half without it (a new consumer on a live node), before the
// node comes back. Afterwards the lake holds every line exactly once and both
// Delta logs are valid.
func TestClusterNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster test")
	}
	nodes := natstest.RunCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	defer func() {
		if t.Failed() {
			t.Logf("stage logs:\n%s", logs.Tail(20000))
		}
	}()
	cfg := Config{NATS: NATSConfig{URL: natstest.ClusterURL(nodes)}, Server: ServerConfig{DataDir: t.TempDir(), Encoders: 2}}
	cfg.Streams.Replicas = 3
	cfg.Committer.LeaseTTL = 3 * time.Second
	cfg.Committer.CommitInterval = 200 * time.Millisecond
	cfg.Encoder.MaxAge = 300 * time.Millisecond
	p, err := Start(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// Each producer reads a pipe: the first half of its lines before the
	// node loss, the rest only after it, so the loss is mid-stream by
	// construction and the second half must be committed without the node.
	tenants := []string{"acme", "globex"}
	gen := producer.NewGenerator(5, tenants)
	var want []string
	var wg sync.WaitGroup
	prodErr := make(chan error, 2*len(tenants))
	resume := make(chan struct{})
	for _, tn := range tenants {
		lines := gen.Lines(tn, 8000)
		want = append(want, lines...)
		pr, pw := io.Pipe()
		l, err := producer.NewReader(producer.Config{Tenant: tn, FrameMaxRecords: 200},
			producer.Deps{JS: p.JS, Log: log.With("producer", tn)}, pr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := l.Run(ctx); err != nil {
				prodErr <- err
			}
		}()
		go func() {
			defer wg.Done()
			half := len(lines) / 2
			_, err := io.WriteString(pw, strings.Join(lines[:half], "\n")+"\n")
			if err == nil {
				select {
				case <-resume:
				case <-ctx.Done():
				}
				_, err = io.WriteString(pw, strings.Join(lines[half:], "\n")+"\n")
			}
			if err != nil {
				prodErr <- fmt.Errorf("feed %s: %w", tn, err)
			}
			pw.Close()
		}()
	}

	var host string
	for p.HighWater() == 0 || host == "" {
		host = reportConsumerHost(ctx, p.JS)
		if ctx.Err() != nil {
			t.Fatalf("nothing committed, or no report consumer (host %q)", host)
		}
		time.Sleep(50 * time.Millisecond)
	}
	idx := slices.IndexFunc(nodes, func(s *natstest.Server) bool { return s.Name() == host })
	if idx < 0 {
		t.Fatalf("report consumer on %q, not a node of the cluster", host)
	}
	hw := p.HighWater()
	t.Logf("shutting down %s (hosts the committer's report consumer) at high-water %d", host, hw)
	nodes[idx].Shutdown()
	nodes[idx].WaitForShutdown()
	close(resume)

	// Without the node, the committer must commit again: the lines the
	// producers publish from now on are above hw.
	deadline := time.Now().Add(90 * time.Second)
	for p.HighWater() <= hw {
		if time.Now().After(deadline) {
			t.Fatalf("high-water stuck at %d for 90s after %s went down", hw, host)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("high-water %d without %s", p.HighWater(), host)
	nodes[idx] = nodes[idx].Restart(t)

	restarted := time.Now()
	wg.Wait()
	t.Logf("producers done %s after the restart", time.Since(restarted).Round(time.Millisecond))
	close(prodErr)
	for err := range prodErr {
		t.Fatalf("producer: %v", err)
	}
	last, err := p.WALLastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitCommitted(ctx, last, 0, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("WAL last sequence %d committed %s after the restart", last, time.Since(restarted).Round(time.Millisecond))
	laketest.ExactlyOnce(t, p.Store, want)
}
