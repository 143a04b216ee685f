package laketest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

// readerAtSeeker adapts an objstore reader to arrow's ReaderAtSeeker.
type readerAtSeeker struct {
	io.ReaderAt
	size int64
	off  int64
}

func (r *readerAtSeeker) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.off)
	r.off += int64(n)
	return n, err
}

func (r *readerAtSeeker) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, fmt.Errorf("seek: whence %d", whence)
	}
	if offset < 0 {
		return 0, errors.New("seek: negative offset")
	}
	r.off = offset
	return offset, nil
}

// CheckWithArrow is a test fixture (it links Apache Arrow, so it lives here,
// out of the product binary). It replays both logs independently (Replay:
// from _last_checkpoint's checkpoint, read with Arrow, then the JSON
// commits) and checks the live files equal quarry's snapshot; it reads every committed file of both tables with Apache
// Arrow's Parquet implementation (an independent reader) and checks that it
// decodes whole, that its row count equals the add action's
// stats.numRecords and that its columns are the table schema's non-partition
// columns: every column of the file is in the schema and every column the
// schema does not allow to be null is in the file (a records v3 file holds
// only the optional columns it uses, a v2 file none of v3's; Delta readers
// read a column a file lacks as null). For the records table it also
// checks, without lake.Layout, each file's partition values against the
// table's partition columns (and its path against them), and every row's
// UTC day of ts against its date column (tables partitioned by tenant) or
// its date partition (tables partitioned by tenant and date). It returns
// every mismatch joined.
func CheckWithArrow(ctx context.Context, store objstore.Store) error {
	l := lake.Open(store)
	var problems []error
	for _, t := range []*delta.Table{l.Records(), l.TemplatesTable()} {
		snap, err := t.Snapshot(ctx)
		if err != nil {
			return fmt.Errorf("%s snapshot: %w", t.Root(), err)
		}
		// The file list from a replay that shares no code with quarry's.
		indep, version, err := Replay(ctx, store, t.Root())
		if err != nil {
			return fmt.Errorf("%s independent replay: %w", t.Root(), err)
		}
		if version != snap.Version {
			return fmt.Errorf("%s: independent replay reached version %d, quarry %d", t.Root(), version, snap.Version)
		}
		if len(indep) != len(snap.Files) {
			problems = append(problems, fmt.Errorf("%s: independent replay has %d live files, quarry %d", t.Root(), len(indep), len(snap.Files)))
		} else {
			for i, f := range snap.Files {
				if indep[i].Path != f.Path || indep[i].Size != f.Size {
					problems = append(problems, fmt.Errorf("%s: live file %d is %s (%d bytes) independently, %s (%d bytes) in quarry",
						t.Root(), i, indep[i].Path, indep[i].Size, f.Path, f.Size))
				}
			}
		}
		if snap.Version < 0 {
			continue
		}
		want, err := schemaColumns(snap.Metadata)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Root(), err)
		}
		for _, f := range snap.Files {
			if t == l.Records() {
				if err := checkPartition(snap.Metadata.PartitionColumns, f); err != nil {
					problems = append(problems, fmt.Errorf("%s/%s: %w", t.Root(), f.Path, err))
				}
			}
			if err := checkFileWithArrow(ctx, t, f, want); err != nil {
				problems = append(problems, fmt.Errorf("%s/%s: %w", t.Root(), f.Path, err))
			}
		}
	}
	return errors.Join(problems...)
}

func checkFileWithArrow(ctx context.Context, t *delta.Table, f delta.Add, want []schemaColumn) error {
	st, err := delta.ParseStats(f.Stats)
	if err != nil {
		return err
	}
	ra, size, err := t.Store().Open(ctx, t.FileKey(f.Path))
	if err != nil {
		return err
	}
	defer ra.Close()
	if size != f.Size {
		return fmt.Errorf("%d bytes, add says %d", size, f.Size)
	}
	pf, err := file.NewParquetReader(&readerAtSeeker{ReaderAt: ra, size: size})
	if err != nil {
		return fmt.Errorf("arrow parquet reader: %w", err)
	}
	defer pf.Close()
	if pf.NumRows() != st.NumRecords {
		return fmt.Errorf("%d rows in the footer, stats.numRecords is %d", pf.NumRows(), st.NumRecords)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("pqarrow: %w", err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		return fmt.Errorf("arrow read: %w", err)
	}
	defer tbl.Release()
	if tbl.NumRows() != st.NumRecords {
		return fmt.Errorf("arrow decoded %d rows, stats.numRecords is %d", tbl.NumRows(), st.NumRecords)
	}
	var got []string
	for _, fld := range tbl.Schema().Fields() {
		got = append(got, fld.Name)
	}
	var problems []string
	if t.Root() == lake.RecordsTable {
		if err := checkDates(tbl, f.PartitionValues["date"]); err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, c := range got {
		if !slices.ContainsFunc(want, func(w schemaColumn) bool { return w.name == c }) {
			problems = append(problems, "column "+c+" is not in the table schema")
		}
	}
	for _, w := range want {
		if !w.nullable && !slices.Contains(got, w.name) {
			problems = append(problems, "column "+w.name+" (not nullable) is missing")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("columns %v: %s", got, strings.Join(problems, "; "))
	}
	return nil
}

// checkPartition checks a records file's partition values against the
// table's partition columns, independently of quarry's lake.Layout: the
// same keys, none empty, a date that is a day, and the file in the
// Hive-style directory of those values (col=value, path-escaped, in the
// order of the columns).
func checkPartition(cols []string, f delta.Add) error {
	keys := slices.Sorted(maps.Keys(f.PartitionValues))
	if !slices.Equal(keys, slices.Sorted(slices.Values(cols))) {
		return fmt.Errorf("partition values %v, the table's partition columns are %v", f.PartitionValues, cols)
	}
	dir := ""
	for _, c := range cols {
		v := f.PartitionValues[c]
		if v == "" {
			return fmt.Errorf("partition value %s is empty", c)
		}
		if c == "date" {
			if _, err := time.Parse(time.DateOnly, v); err != nil {
				return fmt.Errorf("partition value date %q: %v", v, err)
			}
		}
		dir += c + "=" + url.PathEscape(v) + "/"
	}
	if !strings.HasPrefix(f.Path, dir) || strings.Contains(f.Path[len(dir):], "/") {
		return fmt.Errorf("path is not in its partition's directory %s", dir)
	}
	return nil
}

// checkDates checks, with Arrow's decoding, that every row's UTC day of ts
// is its date: the file's date column when it has one (a table partitioned
// by tenant only), else its date partition value (part, the layout before).
// A file must have exactly one of the two.
func checkDates(tbl arrow.Table, part string) error {
	var tsCol, dateCol *arrow.Column
	for i, fld := range tbl.Schema().Fields() {
		switch fld.Name {
		case "ts":
			tsCol = tbl.Column(i)
		case "date":
			dateCol = tbl.Column(i)
		}
	}
	switch {
	case tsCol == nil:
		return errors.New("no ts column")
	case dateCol == nil && part == "":
		return errors.New("neither a date column nor a date partition")
	case dateCol != nil && part != "":
		return fmt.Errorf("a date column and the date partition %s", part)
	}
	tsType, ok := tsCol.DataType().(*arrow.TimestampType)
	if !ok {
		return fmt.Errorf("ts is %s, not a timestamp", tsCol.DataType())
	}
	var days []string
	for _, ch := range tsCol.Data().Chunks() {
		a := ch.(*array.Timestamp)
		for i := 0; i < a.Len(); i++ {
			days = append(days, a.Value(i).ToTime(tsType.Unit).UTC().Format(time.DateOnly))
		}
	}
	if dateCol == nil {
		for i, d := range days {
			if d != part {
				return fmt.Errorf("row %d: ts on %s in date partition %s", i, d, part)
			}
		}
		return nil
	}
	if dateCol.DataType().ID() != arrow.DATE32 {
		return fmt.Errorf("date column is %s, not date32", dateCol.DataType())
	}
	row := 0
	for _, ch := range dateCol.Data().Chunks() {
		a := ch.(*array.Date32)
		for i := 0; i < a.Len(); i++ {
			if a.IsNull(i) {
				return fmt.Errorf("row %d: date is null", row)
			}
			if got := a.Value(i).ToTime().UTC().Format(time.DateOnly); row >= len(days) || got != days[row] {
				return fmt.Errorf("row %d: date %s, ts on %v", row, got, days[min(row, len(days)-1)])
			}
			row++
		}
	}
	if row != len(days) {
		return fmt.Errorf("%d dates for %d rows", row, len(days))
	}
	return nil
}

// schemaColumn is a top-level column of a Delta schema.
type schemaColumn struct {
	name     string
	nullable bool
}

// schemaColumns is the top-level column names of a Delta schemaString,
// without the partition columns (those live in the log, not the files).
func schemaColumns(md delta.Metadata) ([]schemaColumn, error) {
	var s struct {
		Type   string `json:"type"`
		Fields []struct {
			Name     string `json:"name"`
			Nullable bool   `json:"nullable"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(md.SchemaString), &s); err != nil {
		return nil, fmt.Errorf("schemaString: %w", err)
	}
	if s.Type != "struct" {
		return nil, fmt.Errorf("schemaString: type %q, want struct", s.Type)
	}
	var out []schemaColumn
	for _, f := range s.Fields {
		if !slices.Contains(md.PartitionColumns, f.Name) {
			out = append(out, schemaColumn{f.Name, f.Nullable})
		}
	}
	return out, nil
}
