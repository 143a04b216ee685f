package recfile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/internal/pqfile"
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
	f, err := openBytes(data)
	if err != nil {
		return nil, fmt.Errorf("open records file: %w", err)
	}
	return decodeProjected(f, inMemory(f, data), tpl, Projection{Lines: true, Source: true, Attrs: true})
}

// inMemory is a Reader of f, a file opened from data: its column chunks
// are read as a Reader's are (integer chunks by readInts).
func inMemory(f *parquet.File, data []byte) *Reader {
	return &Reader{f: f, r: bytes.NewReader(data), size: int64(len(data))}
}

// WALOrder returns the indexes of recs in (wal_seq, record_index) order,
// nil when recs are in that order already (walPerm).
func WALOrder(recs []Record) []int32 {
	return walPerm(len(recs), func(i int) (uint64, uint32) { return recs[i].WALSeq, recs[i].Index })
}

// walPerm returns the indexes of the positions at(0) to at(n-1) in
// (wal_seq, record_index) order, nil when they are in that order already.
// It places each at a slot of its own (slot record_index of its wal_seq's
// range, the ranges in wal_seq order, each as long as that sequence's
// highest index): rows of a file are most of their frames' lines, so the
// slots are few and no row is compared (a file's row groups each hold
// every frame of it: the comparison sort this replaced was 15% of a full
// render). Sparse sequences or indexes, or two rows at one position, are
// sorted. at reads the positions where they are: no copy of them.
func walPerm(n int, at func(int) (uint64, uint32)) []int32 {
	sorted := true
	if n > 0 {
		ps, pi := at(0)
		for i := 1; i < n && sorted; i++ {
			s, x := at(i)
			sorted = ps < s || (ps == s && pi <= x)
			ps, pi = s, x
		}
	}
	if sorted {
		return nil
	}
	if order, ok := walSlots(n, at); ok {
		return order
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		sa, ia := at(int(a))
		sb, ib := at(int(b))
		return cmp.Or(cmp.Compare(sa, sb), cmp.Compare(ia, ib))
	})
	return order
}

// walSlots is walPerm by slot; false when the slots would be many or two
// positions share one.
func walSlots(n int, at func(int) (uint64, uint32)) ([]int32, bool) {
	lo, _ := at(0)
	hi := lo
	for i := range n {
		s, _ := at(i)
		lo, hi = min(lo, s), max(hi, s)
	}
	if hi-lo > uint64(2*n+64) {
		return nil, false
	}
	top := make([]int, hi-lo+2) // top[s+1]: sequence lo+s's highest index + 1
	for i := range n {
		s, x := at(i)
		if x >= 1<<30 {
			return nil, false
		}
		top[s-lo+1] = max(top[s-lo+1], int(x)+1)
	}
	for s := 1; s < len(top); s++ {
		top[s] += top[s-1]
	}
	if top[len(top)-1] > 4*n+64 {
		return nil, false
	}
	slots := make([]int32, top[len(top)-1]) // a row's index + 1; 0: none
	for i := range n {
		s, x := at(i)
		p := top[s-lo] + int(x)
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
	tpl  Templates
	proj *Projection  // what to decode; nil for everything
	kept map[Key]bool // proj.Keep's answers
	// needles are proj.Needle's answers (needleOf).
	needles map[Key]*Needle
	// tplIndex: the index in pieces of a template version's text, split on
	// its wildcards
	tplIndex map[Key]int32
	pieces   [][]string
	keys     []Key // the template version of each entry of pieces
	kinds    map[string][]slot
	strs     map[string]string
	line     []byte // arena the records' lines are cut from
	// bounds, when not nil, receives where each parameter item's text
	// starts in a line appendLine renders (DecodeRows).
	bounds []int
	// src reads the current row group's column chunks (File.DecodeProjected);
	// zero: through the parquet file's reader.
	src source
	// times renders the rows' timestamps, the text of a second once.
	times eventtime.Renderer
	// noTSSource: ts_source is not read (Reader.DecodeLines).
	noTSSource bool
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

// OpenParquet opens the Parquet file of size bytes at r through pqfile,
// which checks its trailer and footer before parquet-go allocates what they
// state, and refuses codecs other than zstd and none, which quarry never
// writes (the others allocate a damaged page header's uncompressed size).
// Every records and lake reader opens files through here.
func OpenParquet(r io.ReaderAt, size int64, opts ...parquet.FileOption) (*parquet.File, error) {
	f, err := pqfile.Open(r, size, []format.CompressionCodec{format.Uncompressed, format.Zstd}, opts...)
	if errors.Is(err, pqfile.ErrCorrupt) {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return f, err
}

// openBytes opens a file held in memory: OpenParquet, and its page headers
// checked (pqfile.CheckPages), which is cheap when the bytes are at hand.
func openBytes(data []byte, opts ...parquet.FileOption) (*parquet.File, error) {
	f, err := OpenParquet(bytes.NewReader(data), int64(len(data)), opts...)
	if err != nil {
		return nil, err
	}
	if err := pqfile.CheckPages(data, f, pqfile.MaxPageSize); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return f, nil
}
