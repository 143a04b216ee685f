package delta_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
)

// foreignRow is a checkpoint row as another writer may lay it out: the
// action columns in another order, fewer fields, an extra column.
type foreignRow struct {
	Protocol *struct {
		MinReaderVersion *int32 `parquet:"minReaderVersion,optional"`
		MinWriterVersion *int32 `parquet:"minWriterVersion,optional"`
	} `parquet:"protocol,optional"`
	MetaData *struct {
		ID               *string  `parquet:"id,optional"`
		SchemaString     *string  `parquet:"schemaString,optional"`
		PartitionColumns []string `parquet:"partitionColumns,optional,list"`
		Format           *struct {
			Provider *string `parquet:"provider,optional"`
		} `parquet:"format,optional"`
	} `parquet:"metaData,optional"`
	Add *struct {
		Path            *string           `parquet:"path,optional"`
		PartitionValues map[string]string `parquet:"partitionValues,optional"`
		Size            *int64            `parquet:"size,optional"`
		DataChange      *bool             `parquet:"dataChange,optional"`
	} `parquet:"add,optional"`
	Txn *struct {
		AppID   *string `parquet:"appId,optional"`
		Version *int64  `parquet:"version,optional"`
	} `parquet:"txn,optional"`
	CommitInfo *struct {
		Operation *string `parquet:"operation,optional"`
	} `parquet:"commitInfo,optional"`
}

func p[T any](v T) *T { return &v }

// TestForeignCheckpoint reads a checkpoint whose schema is not the one
// quarry writes (the generic, converting path of the reader).
func TestForeignCheckpoint(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tbl := create(t, s, "t")
	rows := []foreignRow{{}, {}, {}, {}}
	rows[0].Protocol = &struct {
		MinReaderVersion *int32 `parquet:"minReaderVersion,optional"`
		MinWriterVersion *int32 `parquet:"minWriterVersion,optional"`
	}{p(int32(1)), p(int32(2))}
	rows[1].MetaData = &struct {
		ID               *string  `parquet:"id,optional"`
		SchemaString     *string  `parquet:"schemaString,optional"`
		PartitionColumns []string `parquet:"partitionColumns,optional,list"`
		Format           *struct {
			Provider *string `parquet:"provider,optional"`
		} `parquet:"format,optional"`
	}{ID: p("id-1"), SchemaString: p(schema), PartitionColumns: []string{"tenant"}, Format: &struct {
		Provider *string `parquet:"provider,optional"`
	}{p("parquet")}}
	rows[2].Add = &struct {
		Path            *string           `parquet:"path,optional"`
		PartitionValues map[string]string `parquet:"partitionValues,optional"`
		Size            *int64            `parquet:"size,optional"`
		DataChange      *bool             `parquet:"dataChange,optional"`
	}{p("tenant=a/f.parquet"), map[string]string{"tenant": "a"}, p(int64(8)), p(false)}
	rows[3].Txn = &struct {
		AppID   *string `parquet:"appId,optional"`
		Version *int64  `parquet:"version,optional"`
	}{p("quarry"), p(int64(42))}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[foreignRow](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	must(t, w.Close())
	must(t, s.Put(ctx, tbl.CheckpointKey(0), buf.Bytes()))
	must(t, s.Put(ctx, tbl.LastCheckpointKey(), []byte(`{"version":0,"size":4}`)))
	must(t, s.Delete(ctx, tbl.CommitKey(0))) // only the checkpoint can tell
	snap, err := delta.OpenTable(s, "t").Snapshot(ctx)
	must(t, err)
	if snap.Version != 0 || len(snap.Files) != 1 || snap.Files[0].Path != "tenant=a/f.parquet" || snap.Files[0].Size != 8 ||
		snap.Txns["quarry"] != 42 || snap.Metadata.ID != "id-1" || snap.Protocol.MinWriterVersion != 2 {
		t.Fatalf("foreign checkpoint read as %+v", snap)
	}
}
