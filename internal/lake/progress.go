package lake

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
)

// ProgressTable is the root of the progress table, relative to the lake
// root: one row per source with the completeness the lake has reached.
//
//	<lake>/progress/_delta_log/<version:020d>.json
//	<lake>/progress/part-<records version:020d>.parquet
//
// The committer rewrites it (remove the old file, add a new one, in one
// commit) whenever a source's committed finalized_until moves, so the live
// table is always one small file; older states stay readable by time travel.
const ProgressTable = "progress"

// ProgressRow is one row of the progress table.
//
// FinalizedUntil: every record of Source with a time before it is in the
// records table at HighWater (a line source's read time, a CDC source's
// commit time). WALSeq is the WAL sequence the committer associated with the
// progress fact: every frame the fact speaks for is at or below it, and
// HighWater >= WALSeq. Version is the records table version that made the
// fact count; CommittedAt is when the progress table commit was written.
// Tenant is empty when the producer's fact does not name one.
type ProgressRow struct {
	Source         string    `parquet:"source" json:"source"`
	Tenant         string    `parquet:"tenant" json:"tenant"`
	FinalizedUntil time.Time `parquet:"finalized_until,timestamp(microsecond:utc)" json:"finalized_until"`
	WALSeq         int64     `parquet:"wal_seq" json:"wal_seq"`
	HighWater      int64     `parquet:"high_water" json:"high_water"`
	Version        int64     `parquet:"version" json:"version"`
	CommittedAt    time.Time `parquet:"committed_at,timestamp(microsecond:utc)" json:"committed_at"`
}

// ProgressSchemaString is the Delta schemaString of the progress table.
const ProgressSchemaString = `{"type":"struct","fields":[` +
	`{"name":"source","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"tenant","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"finalized_until","type":"timestamp","nullable":false,"metadata":{}},` +
	`{"name":"wal_seq","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"high_water","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"version","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"committed_at","type":"timestamp","nullable":false,"metadata":{}}]}`

// ProgressFilePath is the path (relative to the progress table root) of the
// file written with the progress of records version v at progress table
// version pv: unique per commit, so a retried commit never overwrites a
// referenced file.
func ProgressFilePath(v, pv int64) string {
	return fmt.Sprintf("part-%020d-%020d.parquet", v, pv)
}

// EncodeProgress writes rows (sorted by source) as one Parquet file.
func EncodeProgress(rows []ProgressRow) ([]byte, error) {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b ProgressRow) int {
		if a.Source < b.Source {
			return -1
		} else if a.Source > b.Source {
			return 1
		}
		return 0
	})
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[ProgressRow](&buf, parquet.Compression(&parquet.Zstd), parquet.CreatedBy("quarry", "1", ""))
	if _, err := w.Write(rows); err != nil {
		return nil, fmt.Errorf("write progress rows: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("close progress file: %w", err)
	}
	return buf.Bytes(), nil
}

// ProgressTable is the progress table.
func (l *Lake) ProgressTable() *delta.Table { return l.progress }

// Progress reads the live rows of the progress table, sorted by source,
// and the table's version (-1 and no rows when the table does not exist
// yet: a lake written before progress was recorded).
func (l *Lake) Progress(ctx context.Context) ([]ProgressRow, int64, error) {
	snap, err := l.progress.Snapshot(ctx)
	if err != nil {
		return nil, -1, fmt.Errorf("progress snapshot: %w", err)
	}
	var out []ProgressRow
	for _, f := range snap.Files {
		pf, key, err := openSmall(ctx, l.progress, f.Path)
		if err != nil {
			return nil, snap.Version, err
		}
		rows, err := readRows[ProgressRow](ctx, pf, key)
		if err != nil {
			return nil, snap.Version, err
		}
		out = append(out, rows...)
	}
	slices.SortStableFunc(out, func(a, b ProgressRow) int {
		if a.Source < b.Source {
			return -1
		} else if a.Source > b.Source {
			return 1
		}
		return 0
	})
	for i := range out {
		out[i].FinalizedUntil = out[i].FinalizedUntil.UTC()
		out[i].CommittedAt = out[i].CommittedAt.UTC()
	}
	return out, snap.Version, nil
}
