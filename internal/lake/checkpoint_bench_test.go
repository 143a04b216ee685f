package lake_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

// BenchmarkLongLog measures opening a lake (both tables' snapshots, from
// scratch) and a full query of it when its logs are 10, 10,000 and 100,000
// versions long with a checkpoint every 100 versions, as the committer
// writes them. The data is the same at every length (10 records files of
// 100 rows, added in versions 1..10; the later versions are high-water
// advances with a txn and no file), so the figures show what the log's
// length costs: with checkpoints, nothing. BENCH_LONG_LOG_VERSIONS (comma
// separated) overrides the lengths; "nocp" in it adds a 10,000-version lake
// without checkpoints for contrast. BENCH_LONG_LOG_DIR keeps the built lakes
// in that folder for the next run. Each result has cpu-ns/op, the process's
// CPU time per operation, beside the wall time.
func BenchmarkLongLog(b *testing.B) {
	sizes := []string{"10", "10000", "100000"}
	if s := os.Getenv("BENCH_LONG_LOG_VERSIONS"); s != "" {
		sizes = bytes2strings(s)
	}
	for _, size := range sizes {
		versions, checkpoints := int64(10000), false
		if size != "nocp" {
			n, err := strconv.ParseInt(size, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			versions, checkpoints = n, true
		}
		store := longLogStore(b, versions, checkpoints)
		name := fmt.Sprintf("versions=%d", versions)
		if !checkpoints {
			name += "/no-checkpoints"
		}
		ctx := context.Background()
		b.Run(name+"/open", func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				l := lake.Open(store)
				for _, t := range []*delta.Table{l.Records(), l.TemplatesTable()} {
					snap, err := t.Snapshot(ctx)
					if err != nil || snap.Version != versions {
						b.Fatalf("%s: version %d, %v", t.Root(), snap.Version, err)
					}
				}
			}
		})
		b.Run(name+"/query", func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				n := 0
				err := lake.Open(store).Query(ctx, lake.Filter{}, func(lake.Record) error { n++; return nil })
				if err != nil || n != 1000 {
					b.Fatalf("query: %d rows, %v", n, err)
				}
			}
		})
	}
}

func bytes2strings(s string) []string {
	var out []string
	for _, f := range bytes.Split([]byte(s), []byte(",")) {
		if len(f) > 0 {
			out = append(out, string(f))
		}
	}
	return out
}

// reportCPU reports the process's user+system CPU time per operation
// ("cpu-ns/op") from the call until the returned function runs: on a
// machine shared with other work, wall time per op measures the load as
// much as the code.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// longLogStore is buildLongLog's lake, kept under $BENCH_LONG_LOG_DIR
// (one folder per length) when that is set, so that profiling runs do not
// rebuild 100,000 versions each time.
func longLogStore(b *testing.B, versions int64, checkpoints bool) objstore.Store {
	b.Helper()
	cache := os.Getenv("BENCH_LONG_LOG_DIR")
	if cache == "" {
		return buildLongLog(b, b.TempDir(), versions, checkpoints)
	}
	dir := filepath.Join(cache, fmt.Sprintf("v%d-cp%v", versions, checkpoints))
	done := filepath.Join(dir, "built")
	if _, err := os.Stat(done); err == nil {
		store, err := objstore.NewLocal(dir)
		if err != nil {
			b.Fatal(err)
		}
		return store
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	store := buildLongLog(b, dir, versions, checkpoints)
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return store
}

// buildLongLog writes a lake whose two tables have versions versions. The
// commit files are encoded by internal/delta and written straight to disk
// (no fsync, no NATS) so that 100,000 versions take seconds; checkpoints go
// through (*delta.Table).Checkpoint every 100 versions.
func buildLongLog(b *testing.B, dir string, versions int64, checkpoints bool) objstore.Store {
	b.Helper()
	ctx := context.Background()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	rec, tpl := delta.OpenTable(store, lake.RecordsTable), delta.OpenTable(store, lake.TemplatesTable)
	if err := rec.Create(ctx, delta.Metadata{Name: lake.RecordsTable, SchemaString: lake.RecordsSchemaString(),
		PartitionColumns: lake.DatedLayout.PartitionColumns()}); err != nil {
		b.Fatal(err)
	}
	if err := tpl.Create(ctx, delta.Metadata{Name: lake.TemplatesTable, SchemaString: lake.TemplatesSchemaString}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for v := int64(1); v <= versions; v++ {
		for _, t := range []*delta.Table{rec, tpl} {
			actions := []delta.Action{{CommitInfo: delta.CommitInfo{"operation": "WRITE", "timestamp": v}},
				{Txn: &delta.Txn{AppID: "quarry", Version: v}}}
			if t == rec && v <= 10 {
				actions = append(actions, delta.Action{Add: benchRecordsFile(b, store, rec, v)})
			}
			if t == tpl && v == 1 {
				actions = append(actions, delta.Action{Add: benchTemplatesFile(b, store, tpl)})
			}
			data, err := delta.EncodeCommit(actions)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(t.CommitKey(v))), data, 0o644); err != nil {
				b.Fatal(err)
			}
			if checkpoints && v%100 == 0 {
				if _, err := t.Checkpoint(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Logf("built %d versions (checkpoints %v) in %s", versions, checkpoints, time.Since(start).Round(time.Millisecond))
	return store
}

func benchRecordsFile(b *testing.B, store objstore.Store, rec *delta.Table, v int64) *delta.Add {
	rows := make([]lake.RecordRow, 100)
	for i := range rows {
		seq := v*1000 + int64(i)
		rows[i] = lake.RecordRow{WALSeq: seq, TS: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() + seq,
			TemplateID: 1, TemplateVersion: 1, Params: []string{fmt.Sprint("u", i)}, Source: "s"}
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[lake.RecordRow](&buf, parquet.Compression(&parquet.Zstd))
	if _, err := w.Write(rows); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	rel := lake.RecordsFilePath("acme", "2026-01-01", lake.FileName(uint64(v*1000), uint64(v*1000+99), "bench"))
	if err := store.Put(context.Background(), rec.FileKey(rel), buf.Bytes()); err != nil {
		b.Fatal(err)
	}
	return &delta.Add{Path: rel, PartitionValues: map[string]string{"tenant": "acme", "date": "2026-01-01"},
		Size: int64(buf.Len()), ModificationTime: time.Now().UnixMilli(), DataChange: true,
		Stats: delta.StatsJSON(100, map[string]any{"wal_seq": v * 1000}, map[string]any{"wal_seq": v*1000 + 99}, nil)}
}

func benchTemplatesFile(b *testing.B, store objstore.Store, tpl *delta.Table) *delta.Add {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[lake.TemplateRow](&buf, parquet.Compression(&parquet.Zstd))
	if _, err := w.Write([]lake.TemplateRow{{TemplateID: 1, Tenant: "acme", Version: 1, Template: "user <*>", Kind: "created", WALSeq: 1}}); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	rel := lake.FileName(1, 1, "bench")
	if err := store.Put(context.Background(), tpl.FileKey(rel), buf.Bytes()); err != nil {
		b.Fatal(err)
	}
	return &delta.Add{Path: rel, PartitionValues: map[string]string{}, Size: int64(buf.Len()),
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: delta.StatsJSON(1, nil, nil, nil)}
}
