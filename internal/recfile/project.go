package recfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Projection chooses what DecodeProjected returns.
type Projection struct {
	// Keep is asked once per template version of the file; the rows of a
	// version it rejects are dropped. nil keeps every row.
	Keep func(Key) bool
	// Lines keeps Line; without it Line is nil.
	Lines bool
	// Source keeps Source, Attrs keeps Attrs.
	Source, Attrs bool
	// FileOrder returns the records in the order the file holds them (by
	// template), not in WAL order: WALOrder gives that order, for a caller
	// that moves each record anyway (the lake's search).
	FileOrder bool
	// Needle, when not nil, is asked once per template version kept; a
	// row of a version it gives a Needle for is dropped, its line never
	// rendered, when no parameter of it may hold the needle
	// (Lines.MayHold): a search whose query requires a phrase only a
	// parameter of the version can hold. DecodeLines drops the rows the
	// search of their row group's text columns rules out (the columns
	// that render nothing else, wal_seq, ts and the numbers, are then
	// read for the rows left only, and a row group with none left is not
	// read further) and leaves the others to its caller's MayHold, which
	// takes the same searches; DecodeProjected drops every row MayHold
	// rules out.
	Needle func(Key) *Needle
}

// DecodeProjected is Decode with the records of the versions p.Keep takes,
// in WAL order (wal_seq, record_index), and only the fields p asks for.
// With p = Projection{Lines: true, Source: true, Attrs: true} it returns
// what Decode returns.
//
// It reads template_id and template_version first, then only the columns
// the kept rows need: wal_seq, record_index, ts and ts_source always;
// source with p.Source; attrs with p.Attrs; kinds, ts_residue, the slot
// columns and more with p.Lines. It renders the lines of kept rows only.
// A kept version whose text tpl lacks is a MissingTemplateError, lines or
// not; a rejected one needs no text.
func DecodeProjected(data []byte, tpl Templates, p Projection) ([]Record, error) {
	// Read as a Reader over the bytes, so that the column chunks it reads,
	// and only those, have their page headers checked (pagesOf).
	r, err := OpenAt(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("open records file: %w", err)
	}
	return decodeProjected(r.f, r, tpl, p)
}

// Reader is a records file opened at an io.ReaderAt (an object in a store):
// its footer is read once, and DecodeProjected reads only the column chunks
// it needs, each run of adjacent ones with one ReadAt, never the whole file.
type Reader struct {
	f    *parquet.File
	r    io.ReaderAt
	size int64
}

// OpenAt reads the footer of the Parquet file of size bytes at r.
func OpenAt(r io.ReaderAt, size int64) (*Reader, error) {
	f, err := OpenParquet(r, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, err
	}
	return &Reader{f: f, r: r, size: size}, nil
}

// ReaderOf is a Reader of the file of size bytes at r whose footer f was
// read before (by OpenAt of the same bytes, at another handle): a reader
// that keeps footers between reads. Reading rows goes through r only.
func ReaderOf(f *parquet.File, r io.ReaderAt, size int64) *Reader {
	return &Reader{f: f, r: r, size: size}
}

// Parquet is the opened file (its footer: metadata, schema, key-value
// entries).
func (r *Reader) Parquet() *parquet.File { return r.f }

// DecodeProjected is the package's DecodeProjected of the file at r: the
// same records, reading only the column chunks the kept rows need.
func (r *Reader) DecodeProjected(tpl Templates, p Projection) ([]Record, error) {
	return decodeProjected(r.f, r, tpl, p)
}

func decodeProjected(f *parquet.File, r *Reader, tpl Templates, p Projection) ([]Record, error) {
	l, err := decodeLines(f, r, tpl, p)
	if err != nil {
		return nil, err
	}
	defer l.Release() // records hold copies
	return l.records()
}

// keptRows is how many rows of f d.proj keeps, by the file's summary (its
// Keep asked as the row groups would ask it); the file's rows without a
// summary or a Keep. Only a capacity: the rows decide. whole is how many
// of them are of versions no needle narrows (Projection.Needle): those
// rows are all kept, where a needle keeps few of its versions' rows; with
// no Needle, whole is n. A kept version whose text d.tpl lacks is a
// MissingTemplateError without lines, as keep reports it.
func keptRows(f *parquet.File, d *decoder) (n, whole int64, err error) {
	if d.proj == nil || d.proj.Keep == nil {
		if d.proj != nil && d.proj.Needle != nil {
			return f.NumRows(), 0, nil
		}
		return f.NumRows(), f.NumRows(), nil
	}
	sum, err := FileSummary(f)
	if err != nil || sum == nil {
		return 0, 0, nil
	}
	if d.kept == nil {
		d.kept = map[Key]bool{}
	}
	for _, t := range sum {
		k, asked := d.kept[t.Key]
		if !asked {
			k = d.proj.Keep(t.Key)
			d.kept[t.Key] = k
			if k && !d.proj.Lines {
				if err := d.known(t.Key); err != nil {
					return 0, 0, err
				}
			}
		}
		if !k {
			continue
		}
		n += t.Rows
		if d.proj.Needle == nil || d.needleOf(t.Key) == nil {
			whole += t.Rows
		}
	}
	return min(n, f.NumRows()), min(whole, f.NumRows()), nil
}

// TailKey is the footer key-value entry of a file whose last row group
// holds the rows of its rare versions (encode's rareLast): its value N says
// that the last row group holds exactly the rows of the versions with
// fewer than N rows in the file (by the summary), and no other row group
// holds any of them.
const TailKey = "quarry.records.tail"

// tailRows is the N of f's TailKey; 0 without one (or one that does not
// parse, or a file of one row group).
func tailRows(f *parquet.File) int64 {
	v, ok := f.Lookup(TailKey)
	if !ok || len(f.RowGroups()) < 2 {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// rowGroupSkipper returns whether row group i holds no row d.proj keeps,
// by the template_id bounds of its column chunk statistics and the file's
// summary: a row group none of whose file's template versions with an id
// in its bounds is kept is skipped unread. With a TailKey, a rare version
// is looked for in the last row group only and the others everywhere else.
// A file written as one row group (or with template groups cut into row
// groups, docs/formats.md) is read either way; a file without a summary or
// statistics is never skipped.
func rowGroupSkipper(f *parquet.File, cols []column, d *decoder) func(int, parquet.RowGroup) (bool, error) {
	never := func(int, parquet.RowGroup) (bool, error) { return false, nil }
	if d.proj == nil || d.proj.Keep == nil || len(f.RowGroups()) < 2 {
		return never
	}
	sum, err := FileSummary(f)
	if err != nil || sum == nil {
		return never
	}
	tid := -1
	for i, c := range cols {
		if c.kind == cTemplateID {
			tid = i
		}
	}
	if tid < 0 {
		return never
	}
	if d.kept == nil {
		d.kept = map[Key]bool{}
	}
	tail, last := tailRows(f), len(f.RowGroups())-1
	meta := f.Metadata().RowGroups
	return func(i int, rg parquet.RowGroup) (bool, error) {
		if i >= len(meta) || tid >= len(meta[i].Columns) {
			return false, nil
		}
		lo, hi, ok := int64Bounds(&meta[i].Columns[tid].MetaData)
		if !ok {
			return false, nil
		}
		for _, t := range sum {
			if id := int64(t.Key.ID); id < lo || id > hi {
				continue
			}
			if tail > 0 && (t.Rows < tail) != (i == last) {
				continue // in the other part
			}
			// Keep is asked once per version: keep (columns.go) reuses
			// the answer, so the text of a kept version is checked here.
			k, asked := d.kept[t.Key]
			if !asked {
				k = d.proj.Keep(t.Key)
				d.kept[t.Key] = k
				if k && !d.proj.Lines {
					if err := d.known(t.Key); err != nil {
						return false, err
					}
				}
			}
			if k {
				return false, nil
			}
		}
		return true, nil
	}
}

// int64Bounds is the minimum and maximum an INT64 column chunk's
// statistics state; false without both, or when they are not 8 bytes
// each or the chunk is not INT64. (parquet-go's FileColumnChunk.Bounds
// panics on statistics of another length, or of a type it does not know:
// a damaged footer, FuzzDecode's 61105129007c87eb.)
func int64Bounds(m *format.ColumnMetaData) (lo, hi int64, ok bool) {
	st := &m.Statistics
	if m.Type != format.Int64 || len(st.MinValue) != 8 || len(st.MaxValue) != 8 {
		return 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(st.MinValue)), int64(binary.LittleEndian.Uint64(st.MaxValue)), true
}

// maxGroupRows is the most rows a row group may state: quarry's writer cuts
// files into row groups of a few thousand to a few hundred thousand rows.
const maxGroupRows = 1 << 26

// checkGroupRows refuses a row group whose row count (its columns' arrays
// are sized by it) is more than its bytes can hold: at most maxGroupRows,
// and at most 64 rows a byte of its chunks uncompressed (record_index
// alone, DELTA_BINARY_PACKED, takes at least 5 bytes a block of 128 rows,
// whatever their values). A damaged footer stating 2^40 rows made the
// decoder ask for arrays of 2^40 values (FuzzDecode's 70e5daf4c5693b55).
func checkGroupRows(rg *format.RowGroup) error {
	var size int64
	for i := range rg.Columns {
		size += max(rg.Columns[i].MetaData.TotalUncompressedSize, 0)
	}
	if limit := min(maxGroupRows, 64*size+1024); rg.NumRows < 0 || rg.NumRows > limit {
		return fmt.Errorf("%w: a row group of %d rows in %d bytes", ErrCorrupt, rg.NumRows, size)
	}
	return nil
}
