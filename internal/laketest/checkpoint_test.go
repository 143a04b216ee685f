package laketest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

// walSeqsWithArrow reads the wal_seq column of a records file with Arrow.
func walSeqsWithArrow(ctx context.Context, t *testing.T, store objstore.Store, key string) []int64 {
	t.Helper()
	ra, size, err := store.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	pf, err := file.NewParquetReader(&readerAtSeeker{ReaderAt: ra, size: size})
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	idx := tbl.Schema().FieldIndices("wal_seq")
	if len(idx) != 1 {
		t.Fatalf("%s: no wal_seq column", key)
	}
	var out []int64
	for _, c := range tbl.Column(idx[0]).Data().Chunks() {
		out = append(out, c.(*array.Int64).Int64Values()...)
	}
	return out
}

// TestIndependentReplayAfterCheckpoints writes a records table of 250
// versions with a checkpoint every 100 (and a file removed between them),
// then reads it with the independent replay and Arrow: every live row
// exactly once, the same files as quarry's reader, before and after the
// JSON commits the checkpoint covers are deleted.
func TestIndependentReplayAfterCheckpoints(t *testing.T) {
	ctx := context.Background()
	store, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.OpenTable(store, lake.RecordsTable)
	if err := tbl.Create(ctx, delta.Metadata{Name: lake.RecordsTable, SchemaString: lake.RecordsSchemaString(),
		PartitionColumns: lake.DatedLayout.PartitionColumns()}); err != nil {
		t.Fatal(err)
	}
	const versions, rowsPerFile, removed = 250, 3, 150
	want := map[int64]int{}
	for v := int64(1); v <= versions; v++ {
		var rows []lake.RecordRow
		for i := range int64(rowsPerFile) {
			rows = append(rows, lake.RecordRow{WALSeq: v*10 + i, TS: 1_767_225_600_000_000, Source: "s"}) // 2026-01-01
		}
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[lake.RecordRow](&buf)
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rel := lake.RecordsFilePath("acme", "2026-01-01", lake.FileName(uint64(v), uint64(v), fmt.Sprint("w", v)))
		if err := store.Put(ctx, tbl.FileKey(rel), buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		actions := []delta.Action{{Add: &delta.Add{Path: rel, Size: int64(buf.Len()), DataChange: true,
			PartitionValues: map[string]string{"tenant": "acme", "date": "2026-01-01"}, ModificationTime: time.Now().UnixMilli(),
			Stats: delta.StatsJSON(rowsPerFile, nil, nil, nil)}}, {Txn: &delta.Txn{AppID: "quarry", Version: v}}}
		if v == removed+1 { // remove the file of version `removed`
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range snap.Files {
				if bytes.Contains([]byte(f.Path), []byte(fmt.Sprintf("w%d", removed))) && f.Path != rel {
					actions = append(actions, delta.Action{Remove: &delta.Remove{Path: f.Path, DataChange: true, DeletionTimestamp: 1}})
					for i := range int64(rowsPerFile) {
						delete(want, removed*10+i)
					}
				}
			}
		}
		if err := tbl.Commit(ctx, v, actions); err != nil {
			t.Fatal(err)
		}
		for i := range int64(rowsPerFile) {
			want[v*10+i] = 1
		}
		if v%100 == 0 {
			if _, err := tbl.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(stage string) {
		t.Helper()
		files, version, err := Replay(ctx, store, lake.RecordsTable)
		if err != nil || version != versions {
			t.Fatalf("%s: independent replay: version %d, %v", stage, version, err)
		}
		got := map[int64]int{}
		for _, f := range files {
			for _, s := range walSeqsWithArrow(ctx, t, store, tbl.FileKey(f.Path)) {
				got[s]++
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d distinct rows, want %d", stage, len(got), len(want))
		}
		for s, n := range got {
			if n != 1 || want[s] != 1 {
				t.Fatalf("%s: row wal_seq %d seen %d times (want %d)", stage, s, n, want[s])
			}
		}
		if err := CheckWithArrow(ctx, store); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
	}
	check("with the whole log")
	for v := int64(0); v <= 200; v++ {
		if err := store.Delete(ctx, tbl.CommitKey(v)); err != nil {
			t.Fatal(err)
		}
	}
	check("with the log the checkpoint covers deleted")
}
