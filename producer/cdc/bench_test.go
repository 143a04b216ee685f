package cdc

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/sqlserver/memsource"
)

// BenchmarkCDCStream measures what a CDC stream costs, on the in-memory
// source with an embedded JetStream server in the same process (so allocs
// include the server's and the source's share).
//
//   - changes: b.N changes (transactions of 100 rows, ~60-byte messages)
//     through one stream with the default page and frame sizes; ns/op and
//     allocs/op are per change.
//   - idle: 20 caught-up streams; reports goroutines, heap bytes and source
//     queries per stream per poll.
func BenchmarkCDCStream(b *testing.B) {
	b.Run("changes", func(b *testing.B) {
		e := newCDCEnv(b, "orders")
		for i := 0; i < b.N; i += 100 {
			e.insert("orders", i, min(100, b.N-i))
		}
		cfg := cdcTestConfig("dbo_orders")
		cfg.TableDefaults.Bootstrap = BootstrapNever
		cfg.PageSize, cfg.FrameRecords, cfg.SnapshotChunk = 0, 0, 0
		cfg.Publisher = producer.PublisherConfig{}
		b.ReportAllocs()
		b.ResetTimer()
		g, err := Start(context.Background(), cfg, Deps{JS: e.js, Source: e.db})
		if err != nil {
			b.Fatal(err)
		}
		s := g.Streams()[0]
		for s.Stats().Rows < uint64(b.N) {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		g.Stop()
	})
	b.Run("idle", func(b *testing.B) {
		const k = 20
		tables := make([]string, k)
		cis := make([]string, k)
		for i := range tables {
			tables[i] = fmt.Sprintf("t%02d", i)
			cis[i] = "dbo_" + tables[i]
		}
		e := newCDCEnv(b, tables...)
		cfg := cdcTestConfig(cis...)
		cfg.TableDefaults.Bootstrap = BootstrapNever
		cfg.PollInterval = 50 * time.Millisecond
		cfg.HeartbeatInterval = time.Second
		cfg.SchemaCheckInterval = 30 * time.Second
		cfg.PageSize, cfg.FrameRecords, cfg.SnapshotChunk = 0, 0, 0
		cfg.Publisher = producer.PublisherConfig{}
		for i := 0; i < b.N; i++ {
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			g0 := runtime.NumGoroutine()
			g, err := Start(context.Background(), cfg, Deps{JS: e.js, Source: e.db})
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range g.Streams() {
				for s.Ready() != nil {
					time.Sleep(time.Millisecond)
				}
			}
			q0 := cdcQueries(e.db)
			time.Sleep(500 * time.Millisecond) // 10 polls
			q1 := cdcQueries(e.db)
			runtime.GC()
			runtime.ReadMemStats(&m1)
			g1 := runtime.NumGoroutine()
			g.Stop()
			b.ReportMetric(float64(g1-g0)/k, "goroutines/stream")
			b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/k, "heap-bytes/stream")
			b.ReportMetric(float64(q1-q0)/k/10, "queries/stream/poll")
		}
	})
}

func cdcQueries(db *memsource.DB) int {
	n := 0
	for _, m := range []string{memsource.MethodMaxLSN, memsource.MethodMinLSN, memsource.MethodChanges, memsource.MethodCommitTime, memsource.MethodCaptureInstances, memsource.MethodBeginSnapshot, memsource.MethodSnapshotChunk} {
		n += db.Calls(m)
	}
	return n
}
