package encoder

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// writerOptions are the Parquet settings of templates files and of records
// v2 files (the fallback; records v3 files are written by internal/recfile):
// zstd, page and column-chunk statistics, one row group per file (files are
// bounded by Config.TargetFileBytes).
func writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.Compression(recfile.Zstd),
		parquet.DataPageStatistics(true),
		parquet.CreatedBy("quarry", "1", ""),
	}
}

// v2Rows converts rows to records v2 rows, the fallback format.
func v2Rows(rows []recfile.Row) []lake.RecordRow {
	out := make([]lake.RecordRow, len(rows))
	for i := range rows {
		r := &rows[i]
		var attrs map[string]string
		if len(r.Attrs) > 0 {
			attrs = make(map[string]string, len(r.Attrs))
			for _, a := range r.Attrs {
				attrs[a.Key] = a.Value
			}
		}
		out[i] = lake.RecordRow{
			WALSeq:          int64(r.WALSeq),
			RecordIndex:     int32(r.Index),
			TS:              floorDiv(r.TS, 1000),
			TemplateID:      int64(r.TemplateID),
			TemplateVersion: int32(r.TemplateVersion),
			Params:          r.Params,
			Source:          r.Source,
			Attrs:           attrs,
		}
	}
	return out
}

// templateRows converts a batch's template definitions to template rows.
func templateRows(b *streams.MinedBatch) []lake.TemplateRow {
	out := make([]lake.TemplateRow, 0, len(b.Templates))
	for _, t := range b.Templates {
		out = append(out, lake.TemplateRow{
			TemplateID: int64(t.ID),
			Tenant:     t.Tenant,
			Version:    int32(t.Version),
			Template:   t.Text,
			Kind:       t.Kind.String(),
			// Previous is not stored (templates v2): the text of a
			// version the table already has (lake.TemplateRow).
			MergedInto: int64(t.Into),
			WALSeq:     int64(b.WALSeq),
			Kinds:      t.Kinds,
		})
	}
	return out
}

// sortRecordRows orders rows by (wal_seq, record_index).
func sortRecordRows(rows []lake.RecordRow) {
	slices.SortFunc(rows, func(a, b lake.RecordRow) int {
		if a.WALSeq != b.WALSeq {
			return cmpInt(a.WALSeq, b.WALSeq)
		}
		return cmpInt(a.RecordIndex, b.RecordIndex)
	})
}

func cmpInt[T int32 | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// encodeParquet writes rows as one Parquet file.
func encodeParquet[T any](rows []T) ([]byte, error) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, writerOptions()...)
	if _, err := w.Write(rows); err != nil {
		return nil, fmt.Errorf("write parquet rows: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("close parquet writer: %w", err)
	}
	return buf.Bytes(), nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
