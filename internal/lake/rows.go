package lake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// TemplateTexts is every committed template version's text of tenant ("" =
// every tenant), as recfile.Encode and recfile.Decode take them.
func (l *Lake) TemplateTexts(ctx context.Context, tenant string) (recfile.Templates, error) {
	set, err := l.loadTemplates(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return set.texts(), nil
}

// ReadRows reads a committed records file of either version as the rows
// recfile.Encode takes, in WAL order, for a rewrite: a v3 file with
// recfile.DecodeRows (texts must hold its templates), a v2 file as stored
// (its attributes, a map in v2, sorted by key).
func (l *Lake) ReadRows(ctx context.Context, a delta.Add, texts recfile.Templates) ([]recfile.Row, error) {
	key := l.records.FileKey(a.Path)
	data, err := l.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	f, err := recfile.OpenParquet(bytes.NewReader(data), int64(len(data)), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("parquet %s: %w", key, err)
	}
	v, err := RecordsFileVersion(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if v >= 3 {
		rows, err := recfile.DecodeRows(data, texts)
		if err != nil {
			if k, missing := missingTemplate(data, texts); missing {
				return nil, fmt.Errorf("records file %s: template %d version %d: %w", a.Path, k.ID, k.Version, ErrTemplateMissing)
			}
			return nil, fmt.Errorf("records file %s: %w", a.Path, err)
		}
		return rows, nil
	}
	r := parquet.NewGenericReader[RecordRow](f)
	defer r.Close()
	out := make([]recfile.Row, 0, r.NumRows())
	buf := make([]RecordRow, 1024)
	for {
		n, err := r.Read(buf)
		for _, v := range buf[:n] {
			row := recfile.Row{WALSeq: uint64(v.WALSeq), Index: uint32(v.RecordIndex), TS: v.TS * 1000,
				TemplateID: uint64(v.TemplateID), TemplateVersion: uint32(v.TemplateVersion), Params: v.Params, Source: v.Source}
			for k, val := range v.Attrs {
				row.Attrs = append(row.Attrs, streams.Attr{Key: k, Value: val})
			}
			sort.Slice(row.Attrs, func(i, j int) bool { return row.Attrs[i].Key < row.Attrs[j].Key })
			out = append(out, row)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].WALSeq != out[j].WALSeq {
			return out[i].WALSeq < out[j].WALSeq
		}
		return out[i].Index < out[j].Index
	})
	return out, nil
}

// CompactFileName is the base name of a records file a compaction writes:
// base is the table version the compaction was planned from, token a
// random word of the process, n the file's number in the compaction. The
// "compact-" prefix never collides with an encoder's "part-" names.
func CompactFileName(base int64, token string, n int) string {
	return fmt.Sprintf("compact-%020d-%s-%d.zstd.parquet", base, token, n)
}

// RetainFileName is the name of the n-th file a retention commit planned
// from table version base wrote (the kept rows of a file it removed), by
// the process with token: like CompactFileName, never an encoder's or a
// compaction's name.
func RetainFileName(base int64, token string, n int) string {
	return fmt.Sprintf("retain-%020d-%s-%d.zstd.parquet", base, token, n)
}
