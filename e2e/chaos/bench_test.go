//go:build chaos

package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/streams"

	"github.com/quarrylake/quarry/internal/quarrybin"
)

var (
	benchEncoders = flag.String("bench-encoders", "", "run TestBenchEncoders for these encoder process counts, e.g. 1,2,4")
	benchLines    = flag.Int("bench-lines", 100000, "TestBenchEncoders: generated lines per tenant")
)

// TestBenchEncoders measures the encoder stage scaling out: for each count
// N it preloads the WAL (producer --generate) and the work queue (the
// miner), starts the committer, then N encoder processes, and times from
// their start until the lake's high-water covers the whole WAL. It prints a
// markdown table (scripts/bench-encoders.sh).
func TestBenchEncoders(t *testing.T) {
	if *benchEncoders == "" {
		t.Skip("-bench-encoders not set")
	}
	bin := quarrybin.Path(t, t.TempDir()) // $QUARRY_BIN, else built here
	fmt.Println("| encoder processes | lines | seconds | lines/s |")
	fmt.Println("|---:|---:|---:|---:|")
	for _, f := range strings.Split(*benchEncoders, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("-bench-encoders %q: want positive counts", *benchEncoders)
		}
		lines, secs, err := benchOnce(t, bin, n)
		if err != nil {
			t.Fatalf("%d encoders: %v", n, err)
		}
		fmt.Printf("| %d | %d | %.1f | %.0f |\n", n, lines, secs, float64(lines)/secs)
	}
}

func benchOnce(t *testing.T, bin string, n int) (int, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		return 0, 0, err
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	lakeDir := filepath.Join(dir, "lake")
	cfg := filepath.Join(dir, "quarry.yaml")
	if err := os.WriteFile(cfg, []byte("encoder:\n  workers: 1\n  max_age: 300ms\ncommitter:\n  commit_interval: 500ms\n"), 0o644); err != nil {
		return 0, 0, err
	}
	var slots []*slot
	defer func() {
		for i := len(slots) - 1; i >= 0; i-- {
			slots[i].stop(20 * time.Second)
		}
	}()
	run := func(name string, args ...string) *slot {
		s := newSlot(dir, bin, name, args, nil)
		slots = append(slots, s)
		s.start()
		return s
	}
	run("nats", "server", "--data", filepath.Join(dir, "nats"), "--port", fmt.Sprint(port))
	nc, js, err := natsutil.Connect(ctx, natsutil.ConnConfig{URL: url}, nil)
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	common := []string{"--nats", url, "--config", cfg}
	prod := newSlot(dir, bin, "producer", append([]string{"producer", "--generate", fmt.Sprint(*benchLines), "--tenants", strings.Join(tenants, ",")}, common...), nil)
	prod.oneShot = true
	prod.start()
	select {
	case <-prod.finished:
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("producer: %v\n%s", prod.exitLog(), prod.tail(2000))
	}
	last, err := walLast(ctx, js)
	if err != nil {
		return 0, 0, err
	}
	run("miner", append([]string{"miner"}, common...)...)
	for {
		s, err := js.Stream(ctx, streams.MinedStream)
		if err == nil && s.CachedInfo().State.Msgs >= last {
			break
		}
		if ctx.Err() != nil {
			return 0, 0, fmt.Errorf("work queue never filled")
		}
		time.Sleep(200 * time.Millisecond)
	}
	port2, _ := freePort()
	cm := run("committer", append([]string{"committer", "--lake", lakeDir, "--http", fmt.Sprintf("127.0.0.1:%d", port2)}, common...)...)
	cm.httpURL = fmt.Sprintf("http://127.0.0.1:%d", port2)
	for {
		if code, _, err := cm.readyz(); err == nil && code == 200 {
			break
		}
		if ctx.Err() != nil {
			return 0, 0, fmt.Errorf("committer never ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
	store, err := objstore.Open(ctx, lakeDir, objstore.S3Options{})
	if err != nil {
		return 0, 0, err
	}
	lk := lake.Open(store)
	start := time.Now()
	for i := range n {
		run(fmt.Sprintf("encoder-%d", i+1), append([]string{"encoder", "--lake", lakeDir, "--name", fmt.Sprintf("e%d", i+1)}, common...)...)
	}
	for {
		if hw, err := lk.HighWater(ctx); err == nil && hw >= last {
			break
		}
		if ctx.Err() != nil {
			return 0, 0, fmt.Errorf("high-water never reached %d", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return *benchLines * len(tenants), time.Since(start).Seconds(), nil
}
