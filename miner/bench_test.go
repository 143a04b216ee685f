package miner

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

// benchFrames builds nframes frames of n typical log lines each.
func benchFrames(nframes, n int) []streams.Frame {
	rng := rand.New(rand.NewPCG(9, 9))
	tenants := []string{"acme", "globex", "initech", "umbrella"}
	users := []string{"alice", "bob", "carol", "dave", "eve"}
	gens := []func() string{
		func() string {
			return fmt.Sprintf("2026-11-29T10:%02d:%02d.%03dZ INFO user %s login from 10.0.%d.%d", rng.IntN(60), rng.IntN(60), rng.IntN(1000),
				users[rng.IntN(len(users))], rng.IntN(256), rng.IntN(256))
		},
		func() string {
			return fmt.Sprintf("GET /api/v1/items/%d?page=%d HTTP/1.1 %d %dms", rng.IntN(100000), rng.IntN(20), []int{200, 404, 500}[rng.IntN(3)], rng.IntN(900))
		},
		func() string {
			return fmt.Sprintf("worker-%d: processed %d jobs in %.3fs (queue=%s)", rng.IntN(8), rng.IntN(5000), rng.Float64()*10, []string{"fast", "slow", "bulk"}[rng.IntN(3)])
		},
		func() string {
			return fmt.Sprintf("kernel: [%8.6f] eth%d: link up, %d Mbps", rng.Float64()*1000, rng.IntN(4), []int{100, 1000, 10000}[rng.IntN(3)])
		},
		func() string {
			return fmt.Sprintf("Connection %x closed by peer %s after %d bytes", rng.Uint32(), users[rng.IntN(len(users))], rng.IntN(1<<20))
		},
	}
	offsets := map[string]uint64{}
	frames := make([]streams.Frame, nframes)
	for i := range frames {
		tenant := tenants[i%len(tenants)]
		src := "src-" + tenant
		f := streams.Frame{Source: src, Tenant: tenant, FirstOffset: offsets[src]}
		for j := 0; j < n; j++ {
			line := gens[rng.IntN(len(gens))]()
			f.Records = append(f.Records, streams.Record{TS: int64(i*n + j), Text: line})
			offsets[src] += uint64(len(line) + 1)
		}
		f.NextOffset = offsets[src]
		frames[i] = f
	}
	return frames
}

// BenchmarkMinerStage measures WAL frames through the whole stage on an
// embedded JetStream server: consume, mine, publish, ack.
func BenchmarkMinerStage(b *testing.B) {
	const nframes, perFrame = 200, 500
	frames := benchFrames(nframes, perFrame)
	var bytesIn int
	for i := range frames {
		for _, r := range frames[i].Records {
			bytesIn += len(r.Text)
		}
	}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newEnv(b)
		publishFrames(b, e.js, frames)
		cfg := testConfig()
		cfg.Mining.MaxLineBytes = 0
		b.StartTimer()
		start := time.Now()
		r := startMiner(b, e.js, cfg)
		var mined time.Duration
		for streamMsgs(b, e.js, streams.MinedStream) != nframes {
			if mined == 0 && testutil.ToFloat64(r.m.metrics.frames) == nframes {
				mined = time.Since(start)
			}
			time.Sleep(2 * time.Millisecond)
		}
		if mined == 0 {
			mined = time.Since(start)
		}
		b.Logf("mined after %s, stored (acked) after %s", mined, time.Since(start))
		total += time.Since(start)
		b.StopTimer()
		if err := r.stop(b); err != nil {
			b.Fatal(err)
		}
	}
	lines := float64(nframes * perFrame * b.N)
	b.ReportMetric(lines/total.Seconds(), "lines/s")
	b.ReportMetric(float64(bytesIn*b.N)/total.Seconds()/1e6, "MB/s")
}

// BenchmarkEngineOnly is the mining engine alone on the same lines, for
// comparison with BenchmarkMinerStage.
func BenchmarkEngineOnly(b *testing.B) {
	frames := benchFrames(200, 500)
	for i := 0; i < b.N; i++ {
		m, err := mining.New(mining.Config{})
		if err != nil {
			b.Fatal(err)
		}
		for j := range frames {
			for _, r := range frames[j].Records {
				m.Mine(frames[j].Tenant, r.Text, nil)
			}
		}
	}
	b.ReportMetric(float64(200*500*b.N)/b.Elapsed().Seconds(), "lines/s")
}
