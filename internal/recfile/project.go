package recfile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/quarrylake/quarry/streams"
)

// Projection chooses what DecodeProjected reads and renders.
type Projection struct {
	// Keep is asked once per template version of the file; the rows of a
	// version it rejects are skipped: not rendered and not returned. nil
	// keeps every row.
	Keep func(Key) bool
	// Lines renders Line, reading kinds, ts_residue and the parameter
	// columns. Without it only wal_seq, record_index, ts, template_id and
	// template_version are read (and source and attrs when asked).
	Lines bool
	// Source reads Source, Attrs reads Attrs.
	Source, Attrs bool
}

// DecodeProjected is Decode reading column by column and only what p asks
// for: the records of the versions p.Keep takes, in WAL order (wal_seq,
// record_index), with Line set only under p.Lines. With p = Projection{Lines:
// true, Source: true, Attrs: true} it returns what Decode returns.
func DecodeProjected(data []byte, tpl Templates, p Projection) ([]Record, error) {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("open records file: %w", err)
	}
	cols := columnsOf(f.Schema())
	d := decoder{tpl: tpl, infos: map[Key][]string{}, kinds: map[string][]slot{}, strs: map[string]string{}}
	var out []Record
	md := f.Metadata()
	for i, rg := range f.RowGroups() {
		var size int64 // uncompressed: more than the values' bytes, an upper bound for the arena
		if i < len(md.RowGroups) {
			size = md.RowGroups[i].TotalByteSize
		}
		if out, err = d.projectRowGroup(out, cols, rg, &p, size); err != nil {
			return nil, err
		}
	}
	if len(f.RowGroups()) > 1 {
		slices.SortFunc(out, func(a, b Record) int {
			return cmp.Or(cmp.Compare(a.WALSeq, b.WALSeq), cmp.Compare(a.Index, b.Index))
		})
	}
	return out, nil
}

// span is a value's bytes in an arena; start < 0 is null.
type span struct{ start, end int32 }

// projCols are one row group's columns as read.
type projCols struct {
	n        int
	seq, ts  []int64
	tid      []int64
	idx, ver []int32
	keep     []bool
	source   []string
	kinds    []string
	arena    []byte
	residue  []span
	p        [MaxSlots][]span // p<j>
	b        [MaxSlots][]span // b<j>
	n64      [MaxSlots][]int64
	nHas     [MaxSlots][]bool
	more     [][]span
	attrKeys [][]string
	attrVals [][]string
	active   []int // slots with a p, b or n column
}

// eachValue calls fn for every value of a column chunk with the row the
// value belongs to.
func eachValue(chunk parquet.ColumnChunk, fn func(row int, v *parquet.Value)) error {
	pages := chunk.Pages()
	defer pages.Close()
	buf := make([]parquet.Value, 1024)
	row := -1
	for {
		page, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read records page: %w", err)
		}
		vr := page.Values()
		for {
			n, err := vr.ReadValues(buf)
			for i := range buf[:n] {
				if buf[i].RepetitionLevel() == 0 {
					row++
				}
				fn(row, &buf[i])
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read records values: %w", err)
			}
		}
	}
}

// visitor takes the values of a column that is not repeated, by row; a
// nil func is never called for a column of that type.
type visitor struct {
	i64  func(r int, v int64)
	i32  func(r int, v int32)
	b    func(r int, v []byte)
	null func(r int)
}

// scanFlat reads a column that is not repeated (one value or null per row)
// page by page, from the pages' typed buffers where it can (plain and
// dictionary pages, optional or required), else value by value.
func scanFlat(chunk parquet.ColumnChunk, maxDef int, vis visitor) error {
	pages := chunk.Pages()
	defer pages.Close()
	row := 0
	var dict parquet.Dictionary
	var dictData []byte
	var dictOffs []uint32
	for {
		page, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read records page: %w", err)
		}
		if len(page.RepetitionLevels()) != 0 {
			return fmt.Errorf("%w: repeated values in a flat column", ErrCorrupt)
		}
		defs := page.DefinitionLevels()
		data := page.Data()
		if pd := page.Dictionary(); pd != nil {
			if pd != dict {
				dict = pd
				dd := pd.Page().Data()
				if dd.Kind() != encoding.ByteArray {
					return fmt.Errorf("%w: dictionary of a non-string column", ErrCorrupt)
				}
				dictData, dictOffs = dd.ByteArray()
			}
			idx := data.Int32()
			n := len(idx)
			if len(defs) > 0 {
				n = len(defs)
			}
			j := 0
			for k := range n {
				if len(defs) > 0 && int(defs[k]) != maxDef {
					if vis.null != nil {
						vis.null(row)
					}
				} else {
					if j >= len(idx) || int(idx[j])+1 >= len(dictOffs) || idx[j] < 0 {
						return fmt.Errorf("%w: dictionary index out of range", ErrCorrupt)
					}
					x := idx[j]
					vis.b(row, dictData[dictOffs[x]:dictOffs[x+1]])
					j++
				}
				row++
			}
			continue
		}
		var (
			i64  []int64
			i32  []int32
			bd   []byte
			boff []uint32
			nv   int
		)
		switch data.Kind() {
		case encoding.Int64:
			i64 = data.Int64()
			nv = len(i64)
		case encoding.Int32:
			i32 = data.Int32()
			nv = len(i32)
		case encoding.ByteArray:
			bd, boff = data.ByteArray()
			nv = max(len(boff)-1, 0)
		default:
			return fmt.Errorf("%w: unexpected column type", ErrCorrupt)
		}
		if (i64 != nil && vis.i64 == nil) || (i32 != nil && vis.i32 == nil) || (boff != nil && vis.b == nil) {
			return fmt.Errorf("%w: unexpected column type", ErrCorrupt)
		}
		n := nv
		if len(defs) > 0 {
			n = len(defs)
		}
		j := 0
		for k := range n {
			if len(defs) > 0 && int(defs[k]) != maxDef {
				if vis.null != nil {
					vis.null(row)
				}
				row++
				continue
			}
			if j >= nv {
				return fmt.Errorf("%w: fewer values than rows", ErrCorrupt)
			}
			switch {
			case i64 != nil:
				vis.i64(row, i64[j])
			case i32 != nil:
				vis.i32(row, i32[j])
			default:
				vis.b(row, bd[boff[j]:boff[j+1]])
			}
			j++
			row++
		}
	}
}

func (d *decoder) projectRowGroup(out []Record, cols []column, rg parquet.RowGroup, p *Projection, size int64) ([]Record, error) {
	n := int(rg.NumRows())
	c := projCols{n: n, seq: make([]int64, n), ts: make([]int64, n), tid: make([]int64, n), idx: make([]int32, n), ver: make([]int32, n)}
	chunks := rg.ColumnChunks()
	var errRow error
	bad := func(row int) bool {
		if row >= n && errRow == nil {
			errRow = fmt.Errorf("%w: column has more values than the %d rows", ErrCorrupt, n)
		}
		return row >= n
	}
	// The key columns first: they decide which rows the rest is read for.
	for ci, col := range cols {
		var err error
		switch col.kind {
		case cWALSeq:
			err = scanFlat(chunks[ci], col.maxDef, visitor{i64: func(r int, v int64) {
				if !bad(r) {
					c.seq[r] = v
				}
			}})
		case cIndex:
			err = scanFlat(chunks[ci], col.maxDef, visitor{i32: func(r int, v int32) {
				if !bad(r) {
					c.idx[r] = v
				}
			}})
		case cTS:
			err = scanFlat(chunks[ci], col.maxDef, visitor{i64: func(r int, v int64) {
				if !bad(r) {
					c.ts[r] = v
				}
			}})
		case cTemplateID:
			err = scanFlat(chunks[ci], col.maxDef, visitor{i64: func(r int, v int64) {
				if !bad(r) {
					c.tid[r] = v
				}
			}})
		case cVersion:
			err = scanFlat(chunks[ci], col.maxDef, visitor{i32: func(r int, v int32) {
				if !bad(r) {
					c.ver[r] = v
				}
			}})
		}
		if err != nil {
			return out, err
		}
	}
	if errRow != nil {
		return out, errRow
	}
	c.keep = make([]bool, n)
	kept := 0
	decided := map[Key]bool{}
	for r := range n {
		k := Key{uint64(c.tid[r]), uint32(c.ver[r])}
		ok, seen := decided[k]
		if !seen {
			ok = p.Keep == nil || p.Keep(k)
			decided[k] = ok
		}
		c.keep[r] = ok
		if ok {
			kept++
		}
	}
	if kept == 0 {
		return out, nil
	}
	if p.Lines && size > 0 && size < 1<<30 {
		c.arena = make([]byte, 0, size)
	}
	keepBytes := func(b []byte) span {
		s := span{int32(len(c.arena)), 0}
		c.arena = append(c.arena, b...)
		s.end = int32(len(c.arena))
		return s
	}
	for ci, col := range cols {
		var err error
		switch {
		case col.kind == cSource && p.Source:
			c.source = make([]string, n)
			err = scanFlat(chunks[ci], col.maxDef, visitor{b: func(r int, v []byte) {
				if !bad(r) && c.keep[r] {
					c.source[r] = d.intern(v)
				}
			}})
		case col.kind == cKinds && p.Lines:
			c.kinds = make([]string, n)
			err = scanFlat(chunks[ci], col.maxDef, visitor{b: func(r int, v []byte) {
				if !bad(r) && c.keep[r] {
					c.kinds[r] = d.intern(v)
				}
			}})
		case col.kind == cResidue && p.Lines:
			c.residue = make([]span, n)
			err = scanFlat(chunks[ci], col.maxDef, visitor{b: func(r int, v []byte) {
				if !bad(r) && c.keep[r] {
					c.residue[r] = keepBytes(v)
				}
			}, null: func(r int) {
				if !bad(r) {
					c.residue[r] = span{-1, -1}
				}
			}})
		case (col.kind == cP || col.kind == cB) && p.Lines && col.slot >= 0 && col.slot < MaxSlots:
			dst := make([]span, n)
			if col.kind == cB {
				c.b[col.slot] = dst
			} else {
				c.p[col.slot] = dst
			}
			err = scanFlat(chunks[ci], col.maxDef, visitor{b: func(r int, v []byte) {
				if !bad(r) && c.keep[r] {
					dst[r] = keepBytes(v)
				}
			}, null: func(r int) {
				if !bad(r) {
					dst[r] = span{-1, -1}
				}
			}})
		case col.kind == cN && p.Lines && col.slot >= 0 && col.slot < MaxSlots:
			j := col.slot
			c.n64[j], c.nHas[j] = make([]int64, n), make([]bool, n)
			err = scanFlat(chunks[ci], col.maxDef, visitor{i64: func(r int, v int64) {
				if !bad(r) && c.keep[r] {
					c.n64[j][r], c.nHas[j][r] = v, true
				}
			}})
		case col.kind == cMore && p.Lines:
			c.more = make([][]span, n)
			err = eachValue(chunks[ci], func(r int, v *parquet.Value) {
				if !bad(r) && c.keep[r] && !v.IsNull() && v.DefinitionLevel() == col.maxDef {
					c.more[r] = append(c.more[r], keepBytes(v.ByteArray()))
				}
			})
		case (col.kind == cAttrKey || col.kind == cAttrValue) && p.Attrs:
			dst := &c.attrKeys
			if col.kind == cAttrValue {
				dst = &c.attrVals
			}
			*dst = make([][]string, n)
			err = eachValue(chunks[ci], func(r int, v *parquet.Value) {
				if !bad(r) && c.keep[r] && !v.IsNull() && v.DefinitionLevel() == col.maxDef {
					(*dst)[r] = append((*dst)[r], string(v.ByteArray()))
				}
			})
		}
		if err != nil {
			return out, err
		}
		if errRow != nil {
			return out, errRow
		}
	}
	if p.Lines && c.kinds == nil {
		return out, fmt.Errorf("%w: no kinds column", ErrCorrupt)
	}
	d.has = [MaxSlots]uint8{}
	for j := range MaxSlots {
		if c.p[j] != nil || c.b[j] != nil || c.nHas[j] != nil {
			c.active = append(c.active, j)
		}
	}
	// Rows are stored by template; render them in WAL order.
	order := make([]int32, 0, kept)
	for r := range n {
		if c.keep[r] {
			order = append(order, int32(r))
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		return cmp.Or(cmp.Compare(c.seq[a], c.seq[b]), cmp.Compare(c.idx[a], c.idx[b]))
	})
	if out == nil {
		out = make([]Record, 0, kept)
	}
	for _, r32 := range order {
		r := int(r32)
		rec := Record{WALSeq: uint64(c.seq[r]), Index: uint32(c.idx[r]), TS: c.ts[r] * 1000,
			TemplateID: uint64(c.tid[r]), TemplateVersion: uint32(c.ver[r])}
		if c.source != nil {
			rec.Source = c.source[r]
		}
		if c.attrKeys != nil || c.attrVals != nil {
			var ks, vs []string
			if c.attrKeys != nil {
				ks = c.attrKeys[r]
			}
			if c.attrVals != nil {
				vs = c.attrVals[r]
			}
			if len(ks) != len(vs) {
				return out, fmt.Errorf("%w: %d attribute keys, %d values", ErrCorrupt, len(ks), len(vs))
			}
			for i := range ks {
				rec.Attrs = append(rec.Attrs, streams.Attr{Key: ks[i], Value: vs[i]})
			}
		}
		if p.Lines {
			line, err := d.renderProjected(&c, r, &rec)
			if err != nil {
				return out, err
			}
			rec.Line = line
		}
		out = append(out, rec)
	}
	return out, nil
}

// renderProjected renders row r of c into the decoder's line arena.
func (d *decoder) renderProjected(c *projCols, r int, rec *Record) ([]byte, error) {
	for _, j := range c.active {
		d.has[j] = 0
		if c.p[j] != nil {
			if s := c.p[j][r]; s.start >= 0 {
				d.p[j] = c.arena[s.start:s.end]
				d.has[j] |= 1
			}
		}
		if c.b[j] != nil {
			if s := c.b[j][r]; s.start >= 0 {
				d.p[j] = c.arena[s.start:s.end]
				d.has[j] |= 4
			}
		}
		if c.nHas[j] != nil && c.nHas[j][r] {
			d.n[j] = c.n64[j][r]
			d.has[j] |= 2
		}
	}
	d.more = d.more[:0]
	if c.more != nil {
		for _, s := range c.more[r] {
			d.more = append(d.more, c.arena[s.start:s.end])
		}
	}
	var residue []byte
	if c.residue != nil {
		if s := c.residue[r]; s.start >= 0 {
			residue = c.arena[s.start:s.end]
		}
	}
	if cap(d.line)-len(d.line) < 4<<10 {
		d.line = make([]byte, 0, 256<<10)
	}
	line, err := d.render(d.line[len(d.line):], rec, c.kinds[r], residue)
	if err != nil {
		return nil, err
	}
	if cap(line) != cap(d.line)-len(d.line) {
		d.line = line[len(line):]
	} else {
		d.line = d.line[:len(d.line)+len(line)]
	}
	return line[:len(line):len(line)], nil
}
