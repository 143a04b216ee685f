package lake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/pqfile"
	"github.com/quarrylake/quarry/internal/recfile"
)

// AppID is the Delta txn appId under which the committer records the
// high-water: txn(AppID).version = W means every WAL batch at or below W is
// in the table.
const AppID = "quarry"

// ErrTemplateMissing: a committed record names a template version the
// committed templates table does not have.
var ErrTemplateMissing = errors.New("template version not in the templates table")

// ErrNoTable: the lake holds no Delta table (a mistyped lake URL, or a lake
// no committer has created yet).
var ErrNoTable = errors.New("no Delta table")

// Lake reads quarry's lake: only what the Delta logs have committed.
type Lake struct {
	store     objstore.Store
	records   *delta.Table
	templates *delta.Table
	progress  *delta.Table
	cache     *fileCache // nil: nothing kept between searches (EnableCache)
}

// Open returns a reader of the lake in store. It does no I/O.
func Open(store objstore.Store) *Lake {
	return &Lake{
		store:     store,
		records:   delta.OpenTable(store, RecordsTable),
		templates: delta.OpenTable(store, TemplatesTable),
		progress:  delta.OpenTable(store, ProgressTable),
	}
}

// Exists returns an error wrapping ErrNoTable when the records table has
// no Delta log, so that a reader can tell a wrong URL from an empty lake.
func (l *Lake) Exists(ctx context.Context) error {
	snap, err := l.records.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("records snapshot: %w", err)
	}
	if snap.Version < 0 {
		return fmt.Errorf("%w (no %s)", ErrNoTable, l.records.LogDir())
	}
	return nil
}

// Records is the records table.
func (l *Lake) Records() *delta.Table { return l.records }

// TemplatesTable is the templates table.
func (l *Lake) TemplatesTable() *delta.Table { return l.templates }

// HighWater is the records table's txn version for appId "quarry": the WAL
// sequence at or below which every batch is committed. 0 when nothing is.
func (l *Lake) HighWater(ctx context.Context) (uint64, error) {
	snap, err := l.records.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("records snapshot: %w", err)
	}
	v, ok := snap.Txns[AppID]
	if !ok || v < 0 {
		return 0, nil
	}
	return uint64(v), nil
}

// HighWater is (*Lake).HighWater for a store.
func HighWater(ctx context.Context, store objstore.Store) (uint64, error) {
	return Open(store).HighWater(ctx)
}

// openParquet opens a committed data file for parquet-go, returning a reader
// of T rows. T may be a projection of the file's columns.
func openParquet[T any](ctx context.Context, t *delta.Table, rel string) (r *parquet.GenericReader[T], closeFn func() error, err error) {
	f, key, closeFile, err := openFile(ctx, t, rel)
	if err != nil {
		return nil, nil, err
	}
	gr, err := readerOf[T](f, key)
	if err != nil {
		closeFile()
		return nil, nil, err
	}
	return gr, func() error {
		gr.Close()
		return closeFile()
	}, nil
}

// openFile opens a committed data file's footer; closeFn closes the object.
func openFile(ctx context.Context, t *delta.Table, rel string) (f *parquet.File, key string, closeFn func() error, err error) {
	key = t.FileKey(rel)
	ra, size, err := t.Store().Open(ctx, key)
	if err != nil {
		return nil, key, nil, fmt.Errorf("open %s: %w", key, err)
	}
	f, err = recfile.OpenParquet(ra, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		ra.Close()
		return nil, key, nil, fmt.Errorf("parquet %s: %w", key, err)
	}
	return f, key, ra.Close, nil
}

// readerOf is a reader of f's rows as T.
func readerOf[T any](f *parquet.File, key string) (r *parquet.GenericReader[T], err error) {
	defer func() {
		// parquet-go panics on schemas it cannot convert to T.
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("parquet %s: %v", key, p)
		}
	}()
	return parquet.NewGenericReader[T](f), nil
}

// recordsVersionKey is the Parquet key-value metadata key a records v3
// to v8 file carries ("3" to recfile.Version); a file without it is told
// by its columns.
const recordsVersionKey = "quarry.records.version"

// RecordsFileVersion is the records format of a Parquet file: what its
// key-value metadata says (3 to recfile.Version, all read by recfile), else 3 when it has
// a kinds column, 2 when it has a params column, else an error.
func RecordsFileVersion(f *parquet.File) (int, error) {
	if v, ok := f.Lookup(recordsVersionKey); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n > recfile.Version {
			return 0, fmt.Errorf("records file version %q: want 2 to %d", v, recfile.Version)
		}
		return n, nil
	}
	has := func(name string) bool {
		return slices.ContainsFunc(f.Schema().Fields(), func(c parquet.Field) bool { return c.Name() == name })
	}
	switch {
	case has("kinds"):
		return 3, nil
	case has("params"):
		return 2, nil
	}
	return 0, errors.New("not a records file: neither params (v2) nor kinds (v3) column")
}

// openRecords opens a committed records file of either version. A v3 file
// is read whole and decoded with texts, which must hold every template
// version it uses.
func (l *Lake) openRecords(ctx context.Context, a delta.Add, texts recfile.Templates) (rowSource, error) {
	key := l.records.FileKey(a.Path)
	ra, size, err := l.store.Open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	f, err := recfile.OpenParquet(ra, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		ra.Close()
		return nil, fmt.Errorf("parquet %s: %w", key, err)
	}
	v, err := RecordsFileVersion(f)
	if err != nil {
		ra.Close()
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if v == 2 {
		ra.Close()
		r, closeFn, err := openParquet[RecordRow](ctx, l.records, a.Path)
		if err != nil {
			return nil, err
		}
		return &v2Source{r: r, closeFn: closeFn}, nil
	}
	data := make([]byte, size)
	_, err = ra.ReadAt(data, 0)
	ra.Close()
	if err != nil && !(errors.Is(err, io.EOF) && int64(len(data)) == size) {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	recs, err := recfile.Decode(data, texts)
	if err != nil {
		if k, missing := missingTemplate(data, texts); missing {
			return nil, fmt.Errorf("records file %s: template %d version %d: %w", a.Path, k.ID, k.Version, ErrTemplateMissing)
		}
		return nil, fmt.Errorf("records file %s: %w", a.Path, err)
	}
	return &v3Source{recs: recs}, nil
}

// missingTemplate finds a template version a records file uses that texts
// lacks.
func missingTemplate(data []byte, texts recfile.Templates) (recfile.Key, bool) {
	r := parquet.NewGenericReader[templateCount](bytes.NewReader(data))
	defer r.Close()
	buf := make([]templateCount, 1024)
	for {
		n, err := r.Read(buf)
		for _, c := range buf[:n] {
			k := recfile.Key{ID: uint64(c.TemplateID), Version: uint32(c.TemplateVersion)}
			if _, ok := texts[k]; !ok {
				return k, true
			}
		}
		if err != nil || n == 0 {
			return recfile.Key{}, false
		}
	}
}

// readAll reads every row of a committed file.
func readAll[T any](ctx context.Context, t *delta.Table, rel string) ([]T, error) {
	f, key, closeFn, err := openFile(ctx, t, rel)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	return readRows[T](ctx, f, key)
}

// openSmall opens a committed file of a small table (templates, progress)
// read whole, in one request, with its pages checked before parquet-go
// decodes them: page headers within their chunk and at most
// pqfile.MaxPageSize (pqfile.CheckPages), compressed bodies that decode
// to no more than their header states (pqfile.CheckBodies).
func openSmall(ctx context.Context, t *delta.Table, rel string) (*parquet.File, string, error) {
	key := t.FileKey(rel)
	data, err := t.Store().Get(ctx, key)
	if err != nil {
		return nil, key, fmt.Errorf("read %s: %w", key, err)
	}
	f, err := openChecked(data)
	if err != nil {
		return nil, key, fmt.Errorf("parquet %s: %w", key, err)
	}
	return f, key, nil
}

// openChecked opens a file in memory with its page headers and
// compressed bodies checked (openSmall).
func openChecked(data []byte) (*parquet.File, error) {
	f, err := recfile.OpenParquet(bytes.NewReader(data), int64(len(data)), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err == nil {
		err = pqfile.CheckPages(data, f, pqfile.MaxPageSize)
	}
	if err == nil {
		err = pqfile.CheckBodies(data, f)
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// readRows reads every row of f (the object key) as T.
func readRows[T any](ctx context.Context, f *parquet.File, key string) ([]T, error) {
	r, err := readerOf[T](f, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rows := r.NumRows()
	out := make([]T, 0, rows)
	// Never ask for more rows than are left: parquet-go then allocates a
	// page header per missing row and column looking for them (10 MB for
	// the 252 rows of a templates file: most of a count's CPU).
	buf := make([]T, min(1024, max(rows, 1)))
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		left := rows - int64(len(out))
		if left <= 0 {
			return out, nil
		}
		n, err := r.Read(buf[:min(int64(len(buf)), left)])
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) || n == 0 && err == nil {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
	}
}

// TemplateFileRows reads the rows of the templates file at rel (relative to
// the templates table), whatever its column set (templates v1 to v4).
func (l *Lake) TemplateFileRows(ctx context.Context, rel string) ([]TemplateRow, error) {
	return readTemplateRows(ctx, l.templates, rel)
}

// readTemplateRows reads a templates file's rows. A file of flat columns
// (templates v3 or v4 without kinds: no mask made a wildcard) is read
// column by column (readFlatTemplates); another through the struct of
// its columns (TemplateRowLive, TemplateRowMerged): parquet-go converts
// each row of a file whose columns are not T's, which cost more than
// reading it; an older one (a previous column) as TemplateRow.
func readTemplateRows(ctx context.Context, t *delta.Table, rel string) ([]TemplateRow, error) {
	f, key, err := openSmall(ctx, t, rel)
	if err != nil {
		return nil, err
	}
	return templateRowsOf(ctx, f, key)
}

// templateRowsOf reads the rows of f, a templates file (readTemplateRows).
func templateRowsOf(ctx context.Context, f *parquet.File, key string) ([]TemplateRow, error) {
	// A top-level field, leaf or group (kinds is a LIST, which Lookup
	// does not find by its name alone).
	has := func(col string) bool {
		return slices.ContainsFunc(f.Schema().Fields(), func(fld parquet.Field) bool { return fld.Name() == col })
	}
	switch rows, err := readFlatTemplates(ctx, f, key); {
	case !errors.Is(err, errNotFlat):
		return rows, err
	case has("previous"):
		return readRows[TemplateRow](ctx, f, key)
	case has("merged_into"):
		return readAs(ctx, f, key, TemplateRowMerged.row)
	default:
		return readAs(ctx, f, key, TemplateRowLive.row)
	}
}

func readAs[T any](ctx context.Context, f *parquet.File, key string, row func(T) TemplateRow) ([]TemplateRow, error) {
	rows, err := readRows[T](ctx, f, key)
	if err != nil {
		return nil, err
	}
	out := make([]TemplateRow, len(rows))
	for i, r := range rows {
		out[i] = row(r)
	}
	return out, nil
}

// statRange returns the min and max of an integer column from an add's
// stats, if present.
func statRange(stats, col string) (lo, hi int64, ok bool) {
	st, err := delta.ParseStats(stats)
	if err != nil {
		return 0, 0, false
	}
	lo, ok1 := asInt(st.MinValues[col])
	hi, ok2 := asInt(st.MaxValues[col])
	return lo, hi, ok1 && ok2
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		return int64(x), x == float64(int64(x))
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// fileSeqRange is the WAL sequence range a records file covers, from its
// stats or, failing that, its name (part-<first>-<last>-<writer>...).
func fileSeqRange(a delta.Add) (lo, hi int64, ok bool) {
	if lo, hi, ok := statRange(a.Stats, "wal_seq"); ok {
		return lo, hi, true
	}
	name := a.Path[strings.LastIndex(a.Path, "/")+1:]
	parts := strings.SplitN(name, "-", 4)
	if len(parts) == 4 && parts[0] == "part" {
		f, err1 := strconv.ParseInt(parts[1], 10, 64)
		l, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err1 == nil && err2 == nil && f <= l {
			return f, l, true
		}
	}
	return 0, 0, false
}
