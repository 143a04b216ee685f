package recfile

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/streams"
)

// ErrCorrupt marks a file whose rows do not decode: a kinds string that
// does not parse or does not match its template, a missing value.
var ErrCorrupt = errors.New("recfile: corrupt records file")

// Record is one decoded record: its original line, byte for byte, and its
// columns.
type Record struct {
	WALSeq uint64
	Index  uint32
	TS     int64 // nanoseconds since the epoch (microsecond precision)
	// TSSource says where TS came from (streams.TSSource); files written
	// before the column existed read as streams.TSRead.
	TSSource        streams.TSSource
	TemplateID      uint64
	TemplateVersion uint32
	Source          string
	Attrs           []streams.Attr
	Line            []byte
}

// Decode reads a records v3 file and returns its records in WAL order
// (wal_seq, record_index). tpl must hold every template version the file
// refers to.
func Decode(data []byte, tpl Templates) ([]Record, error) {
	f, err := OpenParquet(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("open records file: %w", err)
	}
	cols := columnsOf(f.Schema())
	d := decoder{tpl: tpl, infos: map[Key][]string{}, kinds: map[string][]slot{}, strs: map[string]string{}}
	out := make([]Record, 0, f.NumRows())
	for _, rg := range f.RowGroups() {
		if out, err = d.rowGroup(out, rg, cols); err != nil {
			return nil, err
		}
	}
	return walOrder(out), nil
}

// walOrder returns recs sorted by (wal_seq, record_index), each record
// moved once at most, in place.
func walOrder(recs []Record) []Record {
	order := WALOrder(recs)
	if order == nil {
		return recs
	}
	// In place, one cycle at a time: a second array of records would be
	// allocated, cleared and scanned by the collector.
	dest := make([]int32, len(recs))
	for r, i := range order {
		dest[i] = int32(r)
	}
	for i := range dest {
		for int(dest[i]) != i {
			j := dest[i]
			recs[i], recs[j] = recs[j], recs[i]
			dest[i], dest[j] = dest[j], dest[i]
		}
	}
	return recs
}

// WALOrder returns the indexes of recs in (wal_seq, record_index) order,
// nil when recs are in that order already. It places each record at a
// slot of its own (slot record_index of its wal_seq's range, the ranges in
// wal_seq order, each as long as that sequence's highest index): records
// of a file are most of their frames' lines, so the slots are few and no
// record is compared (a file's row groups each hold every frame of it: the
// comparison sort this replaced was 15% of a full render). Sparse
// sequences or indexes, or two records at one position, are sorted.
func WALOrder(recs []Record) []int32 {
	sorted := true
	for i := 1; i < len(recs) && sorted; i++ {
		p, r := &recs[i-1], &recs[i]
		sorted = p.WALSeq < r.WALSeq || (p.WALSeq == r.WALSeq && p.Index <= r.Index)
	}
	if sorted {
		return nil
	}
	if order, ok := walSlots(recs); ok {
		return order
	}
	order := make([]int32, len(recs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		x, y := &recs[a], &recs[b]
		return cmp.Or(cmp.Compare(x.WALSeq, y.WALSeq), cmp.Compare(x.Index, y.Index))
	})
	return order
}

// walSlots is WALOrder by slot; false when the slots would be many or two
// records share one.
func walSlots(recs []Record) ([]int32, bool) {
	n := len(recs)
	lo, hi := recs[0].WALSeq, recs[0].WALSeq
	for i := range recs {
		lo, hi = min(lo, recs[i].WALSeq), max(hi, recs[i].WALSeq)
	}
	if hi-lo > uint64(2*n+64) {
		return nil, false
	}
	top := make([]int, hi-lo+2) // top[s+1]: sequence lo+s's highest index + 1
	for i := range recs {
		r := &recs[i]
		if r.Index >= 1<<30 {
			return nil, false
		}
		top[r.WALSeq-lo+1] = max(top[r.WALSeq-lo+1], int(r.Index)+1)
	}
	for s := 1; s < len(top); s++ {
		top[s] += top[s-1]
	}
	if top[len(top)-1] > 4*n+64 {
		return nil, false
	}
	slots := make([]int32, top[len(top)-1]) // a record's index + 1; 0: none
	for i := range recs {
		p := top[recs[i].WALSeq-lo] + int(recs[i].Index)
		if slots[p] != 0 {
			return nil, false
		}
		slots[p] = int32(i + 1)
	}
	k := 0
	for _, x := range slots {
		if x != 0 {
			slots[k] = x - 1
			k++
		}
	}
	return slots[:k], true
}

type decoder struct {
	tpl   Templates
	proj  *Projection  // what to decode; nil for everything
	kept  map[Key]bool // proj.Keep's answers
	infos map[Key][]string
	kinds map[string][]slot
	strs  map[string]string
	line  []byte // arena the lines are cut from
	// per-row scratch
	p    [MaxSlots][]byte
	b    [MaxSlots][]byte
	n    [MaxSlots]int64
	has  [MaxSlots]uint8 // bit 1 p, 2 n, 4 b
	more [][]byte
	// rowDone, when set, sees each record after its line is rendered, with
	// the row's kinds; bounds then holds where each parameter item's text
	// starts in the line (one entry per item that is not covered) and where
	// the last piece starts (DecodeRows).
	rowDone func(rec *Record, kinds string) error
	bounds  []int
	// render's previous template and kinds
	lastKey    Key
	lastPieces []string
	lastKinds  string
	lastSlots  []slot
	// src reads the current row group's column chunks (File.DecodeProjected);
	// zero: through the parquet file's reader.
	src source
}

// finish renders rec's line from the decoder's slot values.
func (d *decoder) finish(rec *Record, kinds string, residue []byte) error {
	if cap(d.line)-len(d.line) < 4<<10 {
		d.line = make([]byte, 0, 256<<10)
	}
	line, err := d.render(d.line[len(d.line):], rec, kinds, residue)
	if err != nil {
		return err
	}
	if cap(line) != cap(d.line)-len(d.line) {
		d.line = line[len(line):] // outgrew the arena: continue in the new array
	} else {
		d.line = d.line[:len(d.line)+len(line)]
	}
	rec.Line = line[:len(line):len(line)]
	return nil
}

// intern returns b as a string, one allocation per distinct value.
func (d *decoder) intern(b []byte) string {
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	d.strs[s] = s
	return s
}

// internAt returns value i of a byte array column as a string, one
// allocation per distinct value (per dictionary entry for a dictionary
// column).
func (d *decoder) internAt(cv *colVals, i int) string {
	if cv.dict == nil {
		return d.intern(cv.str(i))
	}
	if cv.interned == nil {
		cv.interned = make([]string, len(cv.dict))
		for j, b := range cv.dict {
			cv.interned[j] = d.intern(b)
		}
	}
	return cv.interned[cv.idx[i]]
}

// MissingTemplateError: a record names a template version the caller's
// Templates lack.
type MissingTemplateError struct{ Key Key }

func (e *MissingTemplateError) Error() string {
	return fmt.Sprintf("template %d version %d not given", e.Key.ID, e.Key.Version)
}

// render appends the record's line to dst.
func (d *decoder) render(dst []byte, rec *Record, kinds string, residue []byte) ([]byte, error) {
	k := Key{rec.TemplateID, rec.TemplateVersion}
	// Rows come by template: the previous row's pieces and slots are
	// usually this one's (two map lookups a row were 12% of a render).
	pieces := d.lastPieces
	if pieces == nil || k != d.lastKey {
		var ok bool
		if pieces, ok = d.infos[k]; !ok {
			text, found := d.tpl[k]
			if !found {
				return nil, fmt.Errorf("records wal %d index %d: %w", rec.WALSeq, rec.Index, &MissingTemplateError{Key: k})
			}
			pieces = strings.Split(text, Wildcard)
			d.infos[k] = pieces
		}
		d.lastKey, d.lastPieces = k, pieces
	}
	slots := d.lastSlots
	if slots == nil || kinds != d.lastKinds {
		var ok bool
		if slots, ok = d.kinds[kinds]; !ok {
			var err error
			if slots, err = parseKinds(nil, kinds); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
			}
			d.kinds[kinds] = slots
		}
		d.lastKinds, d.lastSlots = kinds, slots
	}
	if len(slots) != len(pieces)-1 {
		return nil, fmt.Errorf("%w: record wal %d index %d: %d kinds for %d wildcards", ErrCorrupt, rec.WALSeq, rec.Index, len(slots), len(pieces)-1)
	}
	more := d.more
	var ks, kn, kb int // the next p, n and b column
	for j, s := range slots {
		if s.kind == kindCovered {
			continue
		}
		dst = append(dst, pieces[j]...)
		if d.bounds != nil {
			d.bounds = append(d.bounds, len(dst))
		}
		var k int
		var need uint8
		switch s.kind {
		case kindTime:
			dst = eventtime.Render(dst, time.UnixMicro(rec.TS/1000), s.layout, residue)
			continue
		case kindString:
			k, need = ks, 1
			ks++
		case kindInner:
			var p []byte
			switch {
			case ks < MaxSlots && d.has[ks]&1 != 0:
				p = d.p[ks]
			case len(more) > 0:
				p, more = more[0], more[1:]
			default:
				return nil, fmt.Errorf("%w: record wal %d index %d: parameter %d of kind u has no text", ErrCorrupt, rec.WALSeq, rec.Index, j)
			}
			ks++
			if s.offset > len(p) {
				return nil, fmt.Errorf("%w: record wal %d index %d: parameter %d: time offset %d past its text", ErrCorrupt, rec.WALSeq, rec.Index, j, s.offset)
			}
			dst = append(dst, p[:s.offset]...)
			dst = eventtime.Render(dst, time.UnixMicro(rec.TS/1000), s.layout, residue)
			dst = append(dst, p[s.offset:]...)
			continue
		case kindBytes:
			k, need = kb, 4
			kb++
		default:
			k, need = kn, 2
			kn++
		}
		if k >= MaxSlots || d.has[k]&need == 0 {
			// No column value: the parameter's exact text is the next item
			// of more.
			if len(more) == 0 {
				return nil, fmt.Errorf("%w: record wal %d index %d: parameter %d of kind %c has no value", ErrCorrupt, rec.WALSeq, rec.Index, j, s.kind)
			}
			dst = append(dst, more[0]...)
			more = more[1:]
			continue
		}
		switch need {
		case 1:
			dst = append(dst, d.p[k]...)
		case 2:
			dst = appendValue(dst, s, d.n[k])
		default:
			dst = append(dst, d.b[k]...)
		}
	}
	if len(more) != 0 {
		return nil, fmt.Errorf("%w: record wal %d index %d: %d values left in more", ErrCorrupt, rec.WALSeq, rec.Index, len(more))
	}
	if d.bounds != nil {
		d.bounds = append(d.bounds, len(dst))
	}
	return append(dst, pieces[len(pieces)-1]...), nil
}

// OpenParquet opens the Parquet file of size bytes at r after checking its
// trailer: the magic and a footer length that fits in the file. parquet-go
// allocates the footer's length before it reads it, so a damaged length
// (up to 4 GiB) would be allocated, not refused; every records and lake
// reader opens files through here. It refuses codecs other than zstd and
// none, which quarry never writes: parquet-go's other codecs allocate a
// damaged page header's uncompressed size before they decode.
func OpenParquet(r io.ReaderAt, size int64, opts ...parquet.FileOption) (*parquet.File, error) {
	var trailer [8]byte
	if size < 12 {
		return nil, fmt.Errorf("%w: %d bytes is too short for a Parquet file", ErrCorrupt, size)
	}
	if _, err := r.ReadAt(trailer[:], size-8); err != nil {
		return nil, fmt.Errorf("read Parquet trailer: %w", err)
	}
	if string(trailer[4:]) != "PAR1" {
		return nil, fmt.Errorf("%w: no Parquet magic at the end", ErrCorrupt)
	}
	if n := int64(binary.LittleEndian.Uint32(trailer[:4])); n > size-12 {
		return nil, fmt.Errorf("%w: footer of %d bytes in a file of %d", ErrCorrupt, n, size)
	}
	f, err := parquet.OpenFile(r, size, opts...)
	if err != nil {
		return nil, err
	}
	for i, rg := range f.Metadata().RowGroups {
		for j, c := range rg.Columns {
			if k := c.MetaData.Codec; k != format.Uncompressed && k != format.Zstd {
				return nil, fmt.Errorf("%w: row group %d column %d compressed with %v (quarry writes zstd or nothing)", ErrCorrupt, i, j, k)
			}
		}
	}
	return f, nil
}
