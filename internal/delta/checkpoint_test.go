package delta_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
)

func TestCheckpoint(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tbl := create(t, s, "t")
	var adds []delta.Add
	for i, name := range []string{"tenant=a%2Fb/f0.parquet", "f 1.parquet", "f2.parquet"} {
		a := putFile(t, s, tbl, name, 10+i)
		a.Tags = map[string]string{"quarry.report": "r" + name}
		adds = append(adds, a)
		must(t, tbl.Commit(ctx, int64(i+1), []delta.Action{{Add: &a}, {Txn: &delta.Txn{AppID: "quarry", Version: int64(100 + i)}}}))
	}
	must(t, tbl.Commit(ctx, 4, []delta.Action{{Remove: &delta.Remove{Path: adds[1].Path, DeletionTimestamp: 77, DataChange: true,
		ExtendedFileMetadata: true, Size: adds[1].Size, PartitionValues: map[string]string{}, Tags: adds[1].Tags}}}))
	want, err := delta.OpenTable(s, "t").Snapshot(ctx)
	must(t, err)
	v, err := tbl.Checkpoint(ctx)
	if err != nil || v != 4 {
		t.Fatalf("checkpoint: %d, %v", v, err)
	}
	// The checkpoint has the protocol's column names.
	ra, size, err := s.Open(ctx, tbl.CheckpointKey(4))
	must(t, err)
	pf, err := parquet.OpenFile(ra, size)
	must(t, err)
	schema := pf.Schema().String()
	ra.Close()
	for _, col := range []string{"txn", "add", "remove", "metaData", "protocol", "partitionValues", "modificationTime", "dataChange", "appId", "schemaString", "minReaderVersion", "deletionTimestamp"} {
		if !strings.Contains(schema, " "+col+" ") && !strings.Contains(schema, " "+col+";") && !strings.Contains(schema, " "+col+" (") {
			t.Errorf("checkpoint schema lacks %s:\n%s", col, schema)
		}
	}
	// Metadata cleanup: with the checkpoint, earlier commits are not needed.
	for v := int64(0); v <= 4; v++ {
		must(t, s.Delete(ctx, tbl.CommitKey(v)))
	}
	a3 := putFile(t, s, tbl, "f3.parquet", 13)
	must(t, tbl.Commit(ctx, 5, []delta.Action{{Add: &a3}}))
	got, err := delta.OpenTable(s, "t").Snapshot(ctx)
	must(t, err)
	if got.Version != 5 || len(got.Files) != 3 || got.Files[1].Path != "f3.parquet" {
		t.Fatalf("snapshot from checkpoint: %+v", got)
	}
	got.Files = append(got.Files[:1:1], got.Files[2])
	if !reflect.DeepEqual(got.Files, dataChangeFalse(want.Files)) || !reflect.DeepEqual(got.Txns, want.Txns) ||
		!reflect.DeepEqual(got.Metadata, want.Metadata) || !reflect.DeepEqual(got.Protocol, want.Protocol) ||
		len(got.Tombstones) != 1 || got.Tombstones[0].Path != "f 1.parquet" || got.Tombstones[0].DeletionTimestamp != 77 ||
		got.Tombstones[0].Tags["quarry.report"] != "rf 1.parquet" || got.Tombstones[0].Size != adds[1].Size {
		t.Fatalf("snapshot from checkpoint:\n got %+v\nwant %+v", got, want)
	}
	must(t, delta.ValidateLog(ctx, s, "t"))
	refs, err := tbl.ReferencedFiles(ctx)
	if err != nil || len(refs) != 4 || !refs["f 1.parquet"] || !refs["tenant=a%2Fb/f0.parquet"] {
		t.Fatalf("referenced files: %v, %v", refs, err)
	}
	// A damaged checkpoint is an error, not a silently empty table.
	must(t, s.Put(ctx, tbl.CheckpointKey(4), []byte("PAR1 not really")))
	if _, err := delta.OpenTable(s, "t").Snapshot(ctx); !errors.Is(err, delta.ErrCorrupt) {
		t.Fatalf("snapshot with a damaged checkpoint: %v", err)
	}
}

// dataChangeFalse is files as a checkpoint stores them.
func dataChangeFalse(files []delta.Add) []delta.Add {
	out := append([]delta.Add(nil), files...)
	for i := range out {
		out[i].DataChange = false
	}
	return out
}

func TestCheckpointEmptyTable(t *testing.T) {
	v, err := delta.OpenTable(newStore(t), "t").Checkpoint(context.Background())
	if err != nil || v != -1 {
		t.Fatalf("checkpoint of no table: %d, %v", v, err)
	}
}
