package lake

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/pqfile"
)

// flatTemplateColumns are the columns readFlatTemplates reads, each with
// the physical type it must have and where its value goes. A templates
// file without kinds and previous (EncodeTemplates' file when no mask made
// a wildcard: the default mining config) has only these.
var flatTemplateColumns = map[string]struct {
	kind parquet.Kind
	set  func(r *TemplateRow, v parquet.Value)
}{
	"template_id": {parquet.Int64, func(r *TemplateRow, v parquet.Value) { r.TemplateID = v.Int64() }},
	"tenant":      {parquet.ByteArray, func(r *TemplateRow, v parquet.Value) { r.Tenant = string(v.ByteArray()) }},
	"version":     {parquet.Int32, func(r *TemplateRow, v parquet.Value) { r.Version = v.Int32() }},
	"template":    {parquet.ByteArray, func(r *TemplateRow, v parquet.Value) { r.Template = string(v.ByteArray()) }},
	"kind":        {parquet.ByteArray, func(r *TemplateRow, v parquet.Value) { r.Kind = string(v.ByteArray()) }},
	"merged_into": {parquet.Int64, func(r *TemplateRow, v parquet.Value) { r.MergedInto = v.Int64() }},
	"wal_seq":     {parquet.Int64, func(r *TemplateRow, v parquet.Value) { r.WALSeq = v.Int64() }},
}

// errNotFlat: a templates file has a column readFlatTemplates does not
// read, or one of another type; readTemplateRows reads it through
// parquet-go's generic reader instead.
var errNotFlat = errors.New("not a flat templates file")

// readFlatTemplates reads a templates file of flatTemplateColumns column
// by column, a missing column as zero values (as the generic reader reads
// it). parquet-go's generic reader builds its row reader by reflection,
// once a process and type: in a short query (quarry query's count) that
// was most of loading the templates, which is a tenth of the query's CPU.
func readFlatTemplates(ctx context.Context, f *parquet.File, key string) (out []TemplateRow, err error) {
	defer func() {
		// parquet-go may panic on a damaged page, as it does on damaged
		// schemas (readerOf).
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("read %s: %w: %v", key, pqfile.ErrCorrupt, p)
		}
	}()
	leaves := f.Schema().Columns()
	if len(leaves) == 0 {
		return nil, errNotFlat
	}
	for _, path := range leaves {
		if len(path) != 1 {
			return nil, errNotFlat
		}
		if _, ok := flatTemplateColumns[path[0]]; !ok {
			return nil, errNotFlat
		}
	}
	var buf [256]parquet.Value
	for _, rg := range f.RowGroups() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A damaged footer may claim any number of rows: rows grow with
		// the values the first column holds, and every column must hold n.
		n := int(rg.NumRows())
		base := len(out)
		chunks := rg.ColumnChunks()
		if len(chunks) != len(leaves) {
			return nil, fmt.Errorf("read %s: %w: %d column chunks for %d columns", key, pqfile.ErrCorrupt, len(chunks), len(leaves))
		}
		for ci, path := range leaves {
			col := flatTemplateColumns[path[0]]
			if chunks[ci].Type().Kind() != col.kind {
				return nil, errNotFlat
			}
			var got int
			out, got, err = readColumnInto(chunks[ci].Pages(), out, base, n, ci == 0, col.set, buf[:])
			if err != nil {
				return nil, fmt.Errorf("read %s column %s: %w", key, path[0], err)
			}
			if got != n {
				return nil, fmt.Errorf("read %s column %s: %w: %d values for %d rows", key, path[0], pqfile.ErrCorrupt, got, n)
			}
		}
	}
	return out, nil
}

// readColumnInto reads a flat column's values into rows[base:], in
// order, appending a row for each value when grow is set, and returns rows
// and how many values it read, at most n+1 (a null leaves its row's field
// zero).
func readColumnInto(pages parquet.Pages, rows []TemplateRow, base, n int, grow bool, set func(*TemplateRow, parquet.Value), buf []parquet.Value) ([]TemplateRow, int, error) {
	defer pages.Close()
	i := 0
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return rows, i, nil
		}
		if err != nil {
			return rows, i, err
		}
		vals := p.Values()
		for {
			k, err := vals.ReadValues(buf)
			for _, v := range buf[:k] {
				if i == n {
					return rows, i + 1, nil // more values than rows: the caller's count check
				}
				if grow {
					rows = append(rows, TemplateRow{})
				} else if base+i >= len(rows) {
					return rows, i, nil // fewer rows than the first column held: the caller's count check
				}
				if !v.IsNull() {
					set(&rows[base+i], v)
				}
				i++
			}
			if errors.Is(err, io.EOF) || k == 0 && err == nil {
				break
			}
			if err != nil {
				return rows, i, err
			}
		}
	}
}
