package recfile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
)

// colVals are one column's values of a row group: dense by row for
// required columns, sparse (the rows that have a value, ascending) for
// optional ones, by row for repeated ones.
type colVals struct {
	c    column
	ints []int64 // integer columns
	// i32: an int32 column's values (record_index, template_version): the
	// pages' own, or copies; ints is then nil. int reads either.
	i32 []int32
	// Byte array columns: value j is data[offs[j]:offs[j+1]], or, for a
	// dictionary-encoded column, dict[idx[j]]. The bytes are the decoded
	// pages' own (never released to parquet-go's pools), not copies.
	data  []byte
	offs  []uint32
	dict  [][]byte
	idx   []int32
	owned bool // data, ints or idx was copied from the pages: append in place
	// pooled: ints, i32, offs, idx and bufs came from slicePools
	// (readInts, readBytes): free gives them back.
	pooled bool
	// bufs are the decompressed pages a byte array column's values point
	// into (readBytes).
	bufs [][]byte
	read bool // the column was read (readColumns)
	// Optional columns: bit r of present is set when row r has a value,
	// rank[w] is how many values the rows before word w hold; present nil:
	// every row has one (value j is row j's).
	present []uint64
	rank    []int32
	// Repeated columns: the items of the rows that have some (value j's
	// row by present and rank, as an optional column's; most rows have
	// none).
	lists [][][]byte
	// pages are the pages read, whose buffers the values may point into:
	// given back to parquet-go's pools by release.
	pages []parquet.Page
	// interned: dictionary columns, the dictionary entries as strings
	// (filled on first use)
	interned []string
}

// int returns integer value j.
func (cv *colVals) int(j int) int64 {
	if cv.i32 != nil {
		return int64(cv.i32[j])
	}
	return cv.ints[j]
}

// widen moves int32 values read so far into ints, for a page that
// appends int64 values after them.
func (cv *colVals) widen() {
	if cv.i32 == nil {
		return
	}
	ints := make([]int64, len(cv.i32))
	for j, x := range cv.i32 {
		ints[j] = int64(x)
	}
	cv.ints, cv.i32, cv.owned = ints, nil, true
}

// nints is the number of values of an integer column.
func (cv *colVals) nints() int { return len(cv.ints) + len(cv.i32) }

// str returns byte array value j.
func (cv *colVals) str(j int) []byte {
	if cv.dict != nil {
		return cv.dict[cv.idx[j]]
	}
	a, b := cv.offs[j], cv.offs[j+1]
	return cv.data[a:b:b]
}

// count is the number of values of a byte array column.
func (cv *colVals) count() int {
	if cv.dict != nil {
		return len(cv.idx)
	}
	return max(len(cv.offs)-1, 0)
}

// appendPage appends the values of a page (its non-null values, in order)
// to cv, without copying the bytes of a column's first page.
func (cv *colVals) appendPage(p parquet.Page, bytesCol bool) error {
	data := p.Data()
	if d := p.Dictionary(); d != nil {
		if data.Kind() != encoding.Int32 {
			return fmt.Errorf("%w: dictionary indexes of kind %v", ErrCorrupt, data.Kind())
		}
		if !bytesCol {
			// An integer column (ts_source): look the values up.
			dv := d.Page().Data()
			var dict []int64
			switch dv.Kind() {
			case encoding.Int32:
				for _, x := range dv.Int32() {
					dict = append(dict, int64(x))
				}
			case encoding.Int64:
				dict = dv.Int64()
			default:
				return fmt.Errorf("%w: dictionary of kind %v", ErrCorrupt, dv.Kind())
			}
			idx := data.Int32()
			cv.widen()
			cv.ints, cv.owned = slices.Grow(cv.ints, len(idx)), true
			for _, x := range idx {
				if x < 0 || int(x) >= len(dict) {
					return fmt.Errorf("%w: dictionary index %d of %d", ErrCorrupt, x, len(dict))
				}
				cv.ints = append(cv.ints, dict[x])
			}
			return nil
		}
		if cv.offs != nil {
			// Plain pages came first (a writer that fell back to plain
			// encoding, in reverse): append this one's values as bytes.
			for _, x := range data.Int32() {
				b, err := dictValue(d, x)
				if err != nil {
					return err
				}
				if !cv.owned {
					cv.data, cv.owned = slices.Clone(cv.data), true
				}
				cv.data = append(cv.data, b...)
				cv.offs = append(cv.offs, uint32(len(cv.data)))
			}
			return nil
		}
		if cv.dict == nil {
			dv := d.Page().Data()
			if dv.Kind() != encoding.ByteArray {
				return fmt.Errorf("%w: dictionary of kind %v", ErrCorrupt, dv.Kind())
			}
			b, offs := dv.ByteArray()
			cv.dict = make([][]byte, max(len(offs)-1, 0))
			for j := range cv.dict {
				cv.dict[j] = b[offs[j]:offs[j+1]:offs[j+1]]
			}
		}
		idx := data.Int32()
		for _, x := range idx {
			if x < 0 || int(x) >= len(cv.dict) {
				return fmt.Errorf("%w: dictionary index %d of %d", ErrCorrupt, x, len(cv.dict))
			}
		}
		if cv.idx == nil {
			cv.idx = idx
		} else {
			if !cv.owned {
				cv.idx, cv.owned = slices.Clone(cv.idx), true
			}
			cv.idx = append(cv.idx, idx...)
		}
		return nil
	}
	if bytesCol {
		if data.Kind() != encoding.ByteArray {
			return fmt.Errorf("%w: byte array column of kind %v", ErrCorrupt, data.Kind())
		}
		b, offs := data.ByteArray()
		if len(offs) == 0 {
			return nil
		}
		if cv.dict != nil {
			// A plain page after dictionary pages (a writer that fell
			// back to plain encoding): the values so far become bytes.
			cv.offs = []uint32{0}
			for _, x := range cv.idx {
				cv.data = append(cv.data, cv.dict[x]...)
				cv.offs = append(cv.offs, uint32(len(cv.data)))
			}
			cv.dict, cv.idx, cv.interned, cv.owned = nil, nil, nil, true
		}
		if cv.offs == nil && offs[0] == 0 {
			cv.data, cv.offs = b, offs
			return nil
		}
		if cv.offs == nil {
			cv.offs = []uint32{0}
		}
		// A later page: copy it behind the earlier ones, into bytes of
		// our own (the first page's buffer is not grown in place).
		if !cv.owned {
			cv.data, cv.owned = slices.Clone(cv.data), true
		}
		base := uint32(len(cv.data)) - offs[0]
		cv.data = append(cv.data, b[offs[0]:offs[len(offs)-1]]...)
		for _, o := range offs[1:] {
			cv.offs = append(cv.offs, o+base)
		}
		return nil
	}
	switch data.Kind() {
	case encoding.Int64:
		v := data.Int64()
		cv.widen()
		if cv.ints == nil {
			cv.ints = v
		} else {
			if !cv.owned {
				cv.ints, cv.owned = slices.Clone(cv.ints), true
			}
			cv.ints = append(cv.ints, v...)
		}
	case encoding.Int32:
		v := data.Int32()
		if cv.ints != nil {
			// After dictionary pages (a writer that fell back to plain
			// encoding): widen this one's values too.
			cv.ints, cv.owned = slices.Grow(cv.ints, len(v)), true
			for _, x := range v {
				cv.ints = append(cv.ints, int64(x))
			}
			return nil
		}
		if cv.i32 == nil {
			cv.i32 = v
		} else {
			if !cv.owned {
				cv.i32, cv.owned = slices.Clone(cv.i32), true
			}
			cv.i32 = append(cv.i32, v...)
		}
	default:
		return fmt.Errorf("%w: integer column of kind %v", ErrCorrupt, data.Kind())
	}
	return nil
}

// dictValue is entry x of a byte array dictionary.
func dictValue(d parquet.Dictionary, x int32) ([]byte, error) {
	dv := d.Page().Data()
	if dv.Kind() != encoding.ByteArray {
		return nil, fmt.Errorf("%w: dictionary of kind %v", ErrCorrupt, dv.Kind())
	}
	b, offs := dv.ByteArray()
	if x < 0 || int(x)+1 >= len(offs) {
		return nil, fmt.Errorf("%w: dictionary index %d of %d", ErrCorrupt, x, max(len(offs)-1, 0))
	}
	return b[offs[x]:offs[x+1]], nil
}

// readPage is pages.ReadPage with a panic of parquet-go's returned as an
// ErrCorrupt: it panics on some damaged files (a schema that puts a group
// where a leaf column belongs: FuzzDecode's ee4131951d23589f), and a
// damaged file must not take the process down. Only chunks quarry does
// not decode itself (chunkPages) come here.
func readPage(pages parquet.Pages) (p parquet.Page, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%w: parquet-go: %v", ErrCorrupt, r)
		}
	}()
	return pages.ReadPage()
}

// readTyped reads a required or optional (not repeated) column from its
// pages' typed buffers: no parquet.Value per value, no copy of the bytes.
func readTyped(pages parquet.Pages, c column, cv *colVals, nrows int) error {
	optional := c.maxDef > 0
	bytesCol := isBytes(c.kind)
	defer pages.Close()
	cv.read = true
	rows := 0
	for {
		p, err := readPage(pages)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		before := cv.nints()
		if bytesCol {
			before = cv.count()
		}
		if err := cv.appendPage(p, bytesCol); err != nil {
			return err
		}
		cv.pages = append(cv.pages, p)
		n := cv.nints() - before
		if bytesCol {
			n = cv.count() - before
		}
		if !optional {
			if int(p.NumNulls()) != 0 {
				return fmt.Errorf("%w: null in a required column", ErrCorrupt)
			}
			rows += n
			continue
		}
		defs := p.DefinitionLevels()
		if rows+len(defs) > nrows {
			return fmt.Errorf("%w: column has more rows than the row group", ErrCorrupt)
		}
		vals := cv.setPresent(defs, rows, c.maxDef)
		rows += len(defs)
		if vals != n {
			return fmt.Errorf("%w: %d values for %d defined levels", ErrCorrupt, n, vals)
		}
	}
	if rows != nrows {
		return fmt.Errorf("%w: %d of %d rows", ErrCorrupt, rows, nrows)
	}
	if optional {
		if cv.rankPresent() == nrows {
			cv.present, cv.rank = nil, nil // dense: value j is row j's
		}
	}
	return nil
}

// valueAt returns the column's value index for row i, -1 when the row has
// none (or the column was not read). Rows are taken in any order.
func (cv *colVals) valueAt(i int) int {
	if !cv.read {
		return -1
	}
	if cv.present == nil {
		return i
	}
	w := i >> 6
	m := uint64(1) << (uint(i) & 63)
	b := cv.present[w]
	if b&m == 0 {
		return -1
	}
	return int(cv.rank[w]) + bits.OnesCount64(b&(m-1))
}

// rowOf is the row whose value is value j (valueAt's inverse), -1 when no
// row has it.
func (cv *colVals) rowOf(j int) int {
	if cv.present == nil {
		return j
	}
	// The word of rows that holds value j: the last w with rank[w] <= j.
	w := sort.Search(len(cv.rank), func(w int) bool { return int(cv.rank[w]) > j }) - 1
	if w < 0 || w >= len(cv.present) {
		return -1
	}
	b := cv.present[w]
	for k := j - int(cv.rank[w]); k > 0 && b != 0; k-- {
		b &= b - 1
	}
	if b == 0 {
		return -1
	}
	return w<<6 | bits.TrailingZeros64(b)
}

// readColumns reads the leaf columns of rg that need selects (every one
// when need is nil) into per-row arrays in out, which has one entry per
// column; the others keep only their column. Values point into the pages
// read, which out keeps until the group's release; a repeated column's
// items of the rows skip marks are left out (skip nil marks none).
func readColumns(rg parquet.RowGroup, src source, cols []column, need []bool, out []colVals, skip []bool) error {
	nrows := int(rg.NumRows())
	chunks := rg.ColumnChunks()
	if len(chunks) != len(cols) {
		return fmt.Errorf("%w: %d column chunks for %d columns", ErrCorrupt, len(chunks), len(cols))
	}
	pagesOf, rawOf, err := src.pagesOf(rg, need)
	if err != nil {
		return err
	}
	for ci, c := range cols {
		cv := &out[ci]
		cv.c = c
		if need != nil && !need[ci] || c.kind == cUnknown {
			continue
		}
		repeated := c.kind == cMore || c.kind == cAttrKey || c.kind == cAttrValue
		if !repeated {
			if ch, ok := rawOf(ci); ok && !isBytes(c.kind) && intDecodable(ch) {
				if err := readInts(ch, c, cv, nrows); err != nil {
					return fmt.Errorf("read records column %d: %w", ci, err)
				}
				continue
			}
			if ch, ok := rawOf(ci); ok && isBytes(c.kind) && bytesDecodable(ch) {
				if err := readBytes(ch, c, cv, nrows); err != nil {
					return fmt.Errorf("read records column %d: %w", ci, err)
				}
				continue
			}
			if err := readTyped(pagesOf(ci), c, cv, nrows); err != nil {
				return fmt.Errorf("read records column %d: %w", ci, err)
			}
			continue
		}
		// Repeated columns (more, attrs): each page's levels walked over
		// its values as the page holds them (no value boxed); the items
		// are the pages' own bytes, kept until release.
		if ch, ok := rawOf(ci); ok && bytesDecodable(ch) {
			if err := readLists(ch, c, cv, nrows, skip); err != nil {
				return fmt.Errorf("read records column %d: %w", ci, err)
			}
			cv.rankPresent()
			continue
		}
		if err := readRepeated(pagesOf(ci), c, cv, nrows, skip); err != nil {
			return fmt.Errorf("read records column %d: %w", ci, err)
		}
		cv.rankPresent() // present stays set even when every row has items
	}
	return nil
}

// readRepeated reads a repeated byte array column (more, attrs) into cv's
// lists: a row's items in order, for the rows that have some and that skip
// does not mark. A row starts at each repetition level 0; an item is a
// level at the column's maximum definition level, the page's next value.
// The items point into the pages' buffers, which cv keeps until release.
func readRepeated(pages parquet.Pages, c column, cv *colVals, nrows int, skip []bool) error {
	defer pages.Close()
	cv.read = true
	cv.present = make([]uint64, (nrows+63)>>6)
	row, last := -1, -1 // last: the row of lists' last entry
	for {
		p, err := readPage(pages)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		cv.pages = append(cv.pages, p)
		reps, defs := p.RepetitionLevels(), p.DefinitionLevels()
		if len(reps) != len(defs) {
			return fmt.Errorf("%w: %d repetition levels for %d definition levels", ErrCorrupt, len(reps), len(defs))
		}
		var b []byte
		var offs []uint32
		data := p.Data()
		if d := p.Dictionary(); d != nil {
			// Indexes into a dictionary: its entries are the values.
			if data.Kind() != encoding.Int32 {
				return fmt.Errorf("%w: dictionary indexes of kind %v", ErrCorrupt, data.Kind())
			}
			offs = []uint32{0}
			for _, x := range data.Int32() {
				v, err := dictValue(d, x)
				if err != nil {
					return err
				}
				b = append(b, v...)
				offs = append(offs, uint32(len(b)))
			}
		} else if data.Kind() == encoding.ByteArray {
			b, offs = data.ByteArray()
		} else if len(defs) > 0 {
			return fmt.Errorf("%w: repeated column of kind %v", ErrCorrupt, data.Kind())
		}
		n := max(len(offs)-1, 0) // the page's values
		v := 0
		for k, d := range defs {
			if reps[k] == 0 {
				row++
				if row >= nrows {
					return fmt.Errorf("%w: column has more rows than the row group", ErrCorrupt)
				}
			}
			if row < 0 {
				return fmt.Errorf("%w: a repeated column's first level continues a row", ErrCorrupt)
			}
			if int(d) != c.maxDef {
				continue
			}
			if v >= n {
				return fmt.Errorf("%w: %d values for more defined levels", ErrCorrupt, n)
			}
			item := b[offs[v]:offs[v+1]:offs[v+1]]
			v++
			if skip != nil && skip[row] {
				continue
			}
			cv.addItem(row, &last, item)
		}
		if v != n {
			return fmt.Errorf("%w: %d values for %d defined levels", ErrCorrupt, n, v)
		}
	}
}

// rankPresent fills rank from present and returns how many rows have a
// addItem appends item to row's list: a list of its own when row is not
// *last (the row of lists' last entry), which it then becomes.
func (cv *colVals) addItem(row int, last *int, item []byte) {
	if row != *last {
		cv.lists = append(cv.lists, nil)
		cv.present[row>>6] |= 1 << (uint(row) & 63)
		*last = row
	}
	cv.lists[len(cv.lists)-1] = append(cv.lists[len(cv.lists)-1], item)
}

// value.
func (cv *colVals) rankPresent() int {
	cv.rank = make([]int32, len(cv.present))
	total := 0
	for w, b := range cv.present {
		cv.rank[w] = int32(total)
		total += bits.OnesCount64(b)
	}
	return total
}

// listAt is row i's items in a repeated column, nil when it has none (or
// the column was not read).
func (cv *colVals) listAt(i int) [][]byte {
	if j := cv.valueAt(i); j >= 0 {
		return cv.lists[j]
	}
	return nil
}

// moreIter walks a row's items of more: the items of the more column's
// list, or those of its more_text value, split at moreSep (records v7).
// It holds no scratch of its own, so renderers of one group may walk rows
// at once.
type moreIter struct {
	list   [][]byte
	text   []byte
	joined bool // text holds one item or more yet
}

// moreOf returns row i's items of more (none when the file has neither
// column, or the row no value).
func (g *group) moreOf(i int) moreIter {
	if c := g.base[cMoreText]; c != nil {
		if v := c.valueAt(i); v >= 0 {
			return moreIter{text: c.str(v), joined: true}
		}
		return moreIter{}
	}
	if c := g.base[cMore]; c != nil {
		return moreIter{list: c.listAt(i)}
	}
	return moreIter{}
}

// left reports whether an item is left.
func (m *moreIter) left() bool { return m.joined || len(m.list) > 0 }

// next returns the next item; left must be true.
func (m *moreIter) next() []byte {
	if !m.joined {
		item := m.list[0]
		m.list = m.list[1:]
		return item
	}
	if k := bytes.IndexByte(m.text, moreSep); k >= 0 {
		item := m.text[:k]
		m.text = m.text[k+1:]
		return item
	}
	item := m.text
	m.text, m.joined = nil, false
	return item
}

// count is how many items are left.
func (m *moreIter) count() int {
	if m.joined {
		return bytes.Count(m.text, []byte{moreSep}) + 1 + len(m.list)
	}
	return len(m.list)
}

func isBytes(kind int) bool {
	switch kind {
	case cSource, cKinds, cResidue, cP, cB, cMoreText:
		return true
	}
	return false
}

// readGroup reads the columns of one row group that d.proj's kept rows
// need (every row when d.proj is nil); nil when it keeps no row.
func (d *decoder) readGroup(rg parquet.RowGroup, cols []column) (*group, error) {
	p := d.proj
	g := &group{nrows: int(rg.NumRows()), vals: make([]colVals, len(cols))}
	base := &g.base
	for i := range cols {
		if k := cols[i].kind; k != cP && k != cN && k != cB && k != cUnknown {
			base[k] = &g.vals[i]
		}
	}
	for _, k := range []int{cWALSeq, cIndex, cTS, cTemplateID, cVersion, cSource, cKinds} {
		if base[k] == nil {
			return nil, fmt.Errorf("%w: a required column is missing", ErrCorrupt)
		}
	}
	lines, source, attrs := p == nil || p.Lines, p == nil || p.Source, p == nil || p.Attrs
	need := make([]bool, len(cols))
	// The template of each row first: it decides which rows are kept.
	for i, c := range cols {
		need[i] = c.kind == cTemplateID || c.kind == cVersion
	}
	if err := readColumns(rg, d.src, cols, need, g.vals, nil); err != nil {
		return nil, err
	}
	kept, err := d.keep(base[cTemplateID], base[cVersion], lines)
	if err != nil {
		return nil, err
	}
	if kept != nil && len(kept) == 0 {
		return nil, nil
	}
	g.kept = kept
	for i, c := range cols {
		switch c.kind {
		case cTemplateID, cVersion:
			need[i] = false // read
		case cSource:
			need[i] = source
		case cAttrKey, cAttrValue:
			need[i] = attrs
		case cKinds, cResidue, cP, cN, cB, cMore, cMoreText:
			need[i] = lines
		case cDate:
			need[i] = false // the UTC day of ts: nothing to read
		case cTSSource:
			need[i] = !d.noTSSource
		default:
			need[i] = true
		}
	}
	if lines && kept != nil {
		// Only some rows are kept: their kinds say which slot columns
		// (and whether ts_residue) they use; the others are not read.
		if err := d.narrowSlots(rg, cols, need, g.vals, kept, base[cKinds], base[cTemplateID], base[cVersion]); err != nil {
			return nil, err
		}
	}
	if lines && p.Needle != nil {
		var err error
		if kept, err = d.needleRows(rg, cols, need, g, kept); err != nil {
			return nil, err
		}
		if kept != nil && len(kept) == 0 {
			g.release()
			return nil, nil
		}
		g.kept = kept
	}
	if err := readColumns(rg, d.src, cols, need, g.vals, skipOf(g.nrows, kept)); err != nil {
		return nil, err
	}
	if lines {
		if err := d.prepareLines(g); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// skipOf is the rows of a row group of n rows that kept leaves out (nil
// when kept is nil: every row is kept).
func skipOf(n int, kept []int32) []bool {
	if kept == nil {
		return nil
	}
	skip := make([]bool, n)
	for i := range skip {
		skip[i] = true
	}
	for _, i := range kept {
		skip[i] = false
	}
	return skip
}

// needleRows is the needle's half of readGroup (Projection.Needle): it
// reads, for the kept rows, the columns a needle is searched in (kinds,
// ts_residue, the p and b slots, more) and clears need for them, and
// returns the kept rows that may hold their version's needle: every row of
// a version without one, and the rows the group search (Needle.search)
// does not rule out. The other columns (wal_seq, record_index, ts, the n
// slots) are then read for those rows alone, and not at all in a row group
// where none is left: a term of an id or a name is in a few rows of a few
// row groups, and reading every column of every row group was most of its
// search. MayHold takes the group searches made here (group.needles).
func (d *decoder) needleRows(rg parquet.RowGroup, cols []column, need []bool, g *group, kept []int32) ([]int32, error) {
	ids, vers := g.base[cTemplateID], g.base[cVersion]
	// The versions of the kept rows (they come by template: one lookup
	// per run); a row group none of whose kept versions has a needle is
	// read in one go, as without one.
	var last Key
	has := false
	for x := 0; x < g.rows() && !has; x++ {
		i := g.row(x)
		if k := (Key{uint64(ids.int(i)), uint32(vers.int(i))}); x == 0 || k != last {
			has, last = d.needleOf(k) != nil, k
		}
	}
	if !has {
		return kept, nil
	}
	first := make([]bool, len(cols))
	for i, c := range cols {
		switch c.kind {
		case cKinds, cResidue, cP, cB, cMore, cMoreText:
			first[i], need[i] = need[i], false
		}
	}
	if err := readColumns(rg, d.src, cols, first, g.vals, skipOf(g.nrows, kept)); err != nil {
		return nil, err
	}
	if err := d.prepareLines(g); err != nil {
		return nil, err
	}
	out := make([]int32, 0, g.rows())
	var n *Needle
	for x := range g.rows() {
		i := g.row(x)
		if k := (Key{uint64(ids.int(i)), uint32(vers.int(i))}); x == 0 || k != last {
			n, last = d.needleOf(k), k
		}
		if n == nil || g.needleSearch(n).mayHold(g, i) {
			out = append(out, int32(i))
		}
	}
	return out, nil
}

// needleOf is d.proj.Needle(k), asked once per version.
func (d *decoder) needleOf(k Key) *Needle {
	n, ok := d.needles[k]
	if !ok {
		n = d.proj.Needle(k)
		if d.needles == nil {
			d.needles = map[Key]*Needle{}
		}
		d.needles[k] = n
	}
	return n
}

// release gives the pages of g's columns back to parquet-go's pools.
func (g *group) release() {
	for i := range g.vals {
		for _, p := range g.vals[i].pages {
			parquet.Release(p)
		}
		g.vals[i].free()
		g.vals[i] = colVals{}
	}
}

// narrowSlots reads the kinds column and clears need for the slot columns
// (p, n, b beyond what the kept rows' kinds count) and ts_residue (when no
// kept row has a timestamp item) that no kept row uses. A kinds value that
// does not parse leaves need as it is (rendering reports it).
func (d *decoder) narrowSlots(rg parquet.RowGroup, cols []column, need []bool, vals []colVals, kept []int32, kinds, ids, vers *colVals) error {
	only := make([]bool, len(cols))
	for i, c := range cols {
		only[i] = c.kind == cKinds
	}
	if err := readColumns(rg, d.src, cols, only, vals, nil); err != nil {
		return err
	}
	var ns, nn, nb int
	timed := false
	// The kept rows' distinct kinds values: by dictionary entry (no string
	// hashed per row), or through a set of the values.
	var distinct []string
	if kinds.dict != nil {
		seen := make([]bool, len(kinds.dict))
		for _, i := range kept {
			if e := kinds.idx[i]; !seen[e] {
				seen[e] = true
				distinct = append(distinct, d.internAt(kinds, int(i)))
			}
		}
	} else {
		seen := map[string]bool{}
		for _, i := range kept {
			if k := d.internAt(kinds, int(i)); !seen[k] {
				seen[k] = true
				distinct = append(distinct, k)
			}
		}
	}
	if slices.Contains(distinct, "") {
		// An empty value stands for as many s items as its row's
		// template has wildcards (records v8): the most of a kept row's.
		wild, last := 0, Key{}
		for x, i := range kept {
			k := Key{uint64(ids.int(int(i))), uint32(vers.int(int(i)))}
			if x > 0 && k == last {
				continue
			}
			last = k
			text, ok := d.tpl[k]
			if !ok {
				return nil // rendering reports it
			}
			wild = max(wild, strings.Count(text, Wildcard))
		}
		distinct = append(distinct, strings.Repeat(string(rune(kindString)), wild))
	}
	for _, k := range distinct {
		slots, ok := d.kinds[k]
		if !ok {
			var err error
			if slots, err = shared.parsed(k); err != nil {
				return nil
			}
			d.kinds[k] = slots
		}
		var s, n, b, runs int // runs: past the last n column of a d item's runs
		for _, sl := range slots {
			switch sl.kind {
			case kindCovered:
			case kindTime:
				timed = true
			case kindInner:
				timed = true
				s++
			case kindInnerW:
				timed = true
				s++
				n += len(sl.shifts)
			case kindString:
				s++
			case kindInnerD:
				timed = true
				s++
				runs = max(runs, sl.nrun+sl.runs)
			case kindDigits:
				s++
				runs = max(runs, sl.nrun+sl.runs)
			case kindBytes:
				b++
			default:
				n++
			}
		}
		ns, nn, nb = max(ns, s), max(nn, n, runs), max(nb, b)
	}
	for i, c := range cols {
		switch c.kind {
		case cKinds:
			need[i] = false // read
		case cResidue:
			need[i] = need[i] && timed
		case cP:
			need[i] = need[i] && c.slot < ns
		case cN:
			need[i] = need[i] && c.slot < nn
		case cB:
			need[i] = need[i] && c.slot < nb
		}
	}
	return nil
}

// keep returns the rows of a row group d.proj keeps, ascending, or nil for
// every row (also when the filter keeps every one). Keep is asked once per template version. A kept version whose
// text d.tpl lacks is a MissingTemplateError when lines are not rendered
// (rendering reports it otherwise, at the row).
func (d *decoder) keep(ids, vers *colVals, lines bool) ([]int32, error) {
	filter := d.proj != nil && d.proj.Keep != nil
	if !filter && lines {
		return nil, nil
	}
	if d.kept == nil {
		d.kept = map[Key]bool{}
	}
	var out []int32
	if filter {
		out = make([]int32, 0, ids.nints())
	}
	var last Key
	lastOK, have := false, false
	for i := range ids.nints() {
		k := Key{uint64(ids.int(i)), uint32(vers.int(i))}
		if !have || k != last {
			ok, seen := d.kept[k]
			if !seen {
				ok = !filter || d.proj.Keep(k)
				d.kept[k] = ok
				if ok && !lines {
					if err := d.known(k); err != nil {
						return nil, err
					}
				}
			}
			last, lastOK, have = k, ok, true
		}
		if filter && lastOK {
			out = append(out, int32(i))
		}
	}
	if filter && len(out) > 0 && len(out) == ids.nints() {
		return nil, nil // every row, as without a filter: no list to follow
	}
	return out, nil
}

// known reports a MissingTemplateError when d.tpl lacks k's text.
func (d *decoder) known(k Key) error {
	if _, ok := d.tpl[k]; !ok {
		return &MissingTemplateError{Key: k}
	}
	return nil
}

// identity is 0, 1, ..., n-1.
func identity(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// walPositions returns each row's index in (wal_seq, record_index) order:
// of every row, or, when rows is not nil, of those rows (pos[x] for
// rows[x]).
func walPositions(seqs, idxs []int64, rows []int32) []int32 {
	n := len(seqs)
	if rows != nil {
		n = len(rows)
	}
	order := make([]int32, n)
	for x := range order {
		order[x] = int32(x)
	}
	row := func(x int32) int32 {
		if rows != nil {
			return rows[x]
		}
		return x
	}
	sorted := true
	for x := 1; x < n && sorted; x++ {
		a, b := row(int32(x-1)), row(int32(x))
		sorted = uint64(seqs[a]) < uint64(seqs[b]) || (seqs[a] == seqs[b] && uint32(idxs[a]) <= uint32(idxs[b]))
	}
	if sorted {
		return order
	}
	// Packed into one uint64 when they fit, (wal_seq - min, record_index,
	// x) sort as plain integers, much faster than through a comparison.
	minSeq, maxSeq, maxIdx := uint64(seqs[row(0)]), uint64(0), uint32(0)
	for x := range n {
		a := row(int32(x))
		minSeq, maxSeq, maxIdx = min(minSeq, uint64(seqs[a])), max(maxSeq, uint64(seqs[a])), max(maxIdx, uint32(idxs[a]))
	}
	xb, ib := bits.Len(uint(n)), bits.Len32(maxIdx)
	if bits.Len64(maxSeq-minSeq)+ib+xb <= 64 {
		keys := make([]uint64, n)
		for x := range n {
			a := row(int32(x))
			keys[x] = (uint64(seqs[a])-minSeq)<<(ib+xb) | uint64(uint32(idxs[a]))<<xb | uint64(x)
		}
		slices.Sort(keys)
		pos := order // reused: order is the identity no longer needed
		mask := uint64(1)<<xb - 1
		for p, k := range keys {
			pos[k&mask] = int32(p)
		}
		return pos
	}
	slices.SortFunc(order, func(x, y int32) int {
		a, b := row(x), row(y)
		if c := cmp.Compare(uint64(seqs[a]), uint64(seqs[b])); c != 0 {
			return c
		}
		return cmp.Compare(uint32(idxs[a]), uint32(idxs[b]))
	})
	pos := make([]int32, n)
	for p, x := range order {
		pos[x] = int32(p)
	}
	return pos
}
