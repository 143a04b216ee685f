package recfile

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/streams"
)

// colVals are one column's values of a row group: dense by row for
// required columns, sparse (the rows that have a value, ascending) for
// optional ones, by row for repeated ones.
type colVals struct {
	c     column
	ints  []int64    // integer columns
	strs  [][]byte   // byte array columns
	rows  []int32    // optional columns: the row of each value
	next  int        // optional columns: the next value to take
	lists [][][]byte // repeated columns: the row's items
}

// at returns the optional column's value index for row i, taking rows in
// ascending order; -1 when the row has none.
func (cv *colVals) at(i int) int {
	if cv.next < len(cv.rows) && int(cv.rows[cv.next]) == i {
		cv.next++
		return cv.next - 1
	}
	return -1
}

// seek returns the optional column's value index for row i, skipping the
// values of rows before i; -1 when the row has none. Rows are taken in
// ascending order, not necessarily every one.
func (cv *colVals) seek(i int) int {
	for cv.next < len(cv.rows) && int(cv.rows[cv.next]) < i {
		cv.next++
	}
	return cv.at(i)
}

// readColumns reads the leaf columns of rg that need selects (every one
// when need is nil) into per-row arrays in out, which has one entry per
// column; the others keep only their column. Byte array values are copied
// into arena-backed slices, so they outlive the pages; those of the rows
// skip marks are left empty (skip nil marks none).
func readColumns(rg parquet.RowGroup, cols []column, need []bool, out []colVals, skip []bool) error {
	nrows := int(rg.NumRows())
	chunks := rg.ColumnChunks()
	if len(chunks) != len(cols) {
		return fmt.Errorf("%w: %d column chunks for %d columns", ErrCorrupt, len(chunks), len(cols))
	}
	var buf []parquet.Value
	var arena []byte
	for ci, c := range cols {
		cv := &out[ci]
		cv.c = c
		if need != nil && !need[ci] {
			continue
		}
		repeated := c.kind == cMore || c.kind == cAttrKey || c.kind == cAttrValue
		optional := !repeated && c.maxDef > 0
		bytesCol := isBytes(c.kind)
		switch {
		case repeated:
			cv.lists = make([][][]byte, nrows)
		case optional:
		case bytesCol:
			cv.strs = make([][]byte, nrows)
		default:
			cv.ints = make([]int64, nrows)
		}
		row := 0
		if repeated {
			row = -1
		}
		pages := chunks[ci].Pages()
		for {
			p, err := pages.ReadPage()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				pages.Close()
				return fmt.Errorf("read records column %d: %w", ci, err)
			}
			vr := p.Values()
			for {
				if cap(buf) < 1024 {
					buf = make([]parquet.Value, 1024)
				}
				n, rerr := vr.ReadValues(buf[:cap(buf)])
				for _, v := range buf[:n] {
					if repeated {
						if v.RepetitionLevel() == 0 {
							row++
						}
						if row < 0 || row >= nrows {
							parquet.Release(p)
							pages.Close()
							return fmt.Errorf("%w: column %d has more rows than the row group", ErrCorrupt, ci)
						}
						if !v.IsNull() && v.DefinitionLevel() == c.maxDef && (skip == nil || !skip[row]) {
							start := len(arena)
							arena = append(arena, v.ByteArray()...)
							cv.lists[row] = append(cv.lists[row], arena[start:len(arena):len(arena)])
						}
						continue
					}
					if row >= nrows {
						parquet.Release(p)
						pages.Close()
						return fmt.Errorf("%w: column %d has more rows than the row group", ErrCorrupt, ci)
					}
					if v.IsNull() {
						if !optional {
							parquet.Release(p)
							pages.Close()
							return fmt.Errorf("%w: null in required column %d", ErrCorrupt, ci)
						}
						row++
						continue
					}
					var s []byte
					var n int64
					if bytesCol && skip != nil && skip[row] {
						// not copied: the row is dropped
					} else if bytesCol {
						b := v.ByteArray()
						if cap(arena)-len(arena) < len(b) {
							arena = make([]byte, 0, max(64<<10, len(b)))
						}
						start := len(arena)
						arena = append(arena, b...)
						s = arena[start:len(arena):len(arena)]
					} else if v.Kind() == parquet.Int32 {
						n = int64(v.Int32())
					} else {
						n = v.Int64()
					}
					switch {
					case optional && bytesCol:
						cv.rows = append(cv.rows, int32(row))
						cv.strs = append(cv.strs, s)
					case optional:
						cv.rows = append(cv.rows, int32(row))
						cv.ints = append(cv.ints, n)
					case bytesCol:
						cv.strs[row] = s
					default:
						cv.ints[row] = n
					}
					row++
				}
				if rerr != nil {
					if !errors.Is(rerr, io.EOF) {
						parquet.Release(p)
						pages.Close()
						return fmt.Errorf("read records column %d: %w", ci, rerr)
					}
					break
				}
				if n == 0 {
					break
				}
			}
			parquet.Release(p)
		}
		pages.Close()
		if !repeated && row != nrows {
			return fmt.Errorf("%w: column %d has %d of %d rows", ErrCorrupt, ci, row, nrows)
		}
	}
	return nil
}

func isBytes(kind int) bool {
	switch kind {
	case cSource, cKinds, cResidue, cP, cB:
		return true
	}
	return false
}

// rowGroup decodes the records of one row group that d.proj keeps (every
// one when it is nil), appending them to out in WAL order.
func (d *decoder) rowGroup(out []Record, rg parquet.RowGroup, cols []column) ([]Record, error) {
	p := d.proj
	vals := make([]colVals, len(cols))
	var base [cAttrValue + 1]*colVals
	for i := range cols {
		if k := cols[i].kind; k != cP && k != cN && k != cB {
			base[k] = &vals[i]
		}
	}
	for _, k := range []int{cWALSeq, cIndex, cTS, cTemplateID, cVersion, cSource, cKinds} {
		if base[k] == nil {
			return out, fmt.Errorf("%w: a required column is missing", ErrCorrupt)
		}
	}
	lines, source, attrs := p == nil || p.Lines, p == nil || p.Source, p == nil || p.Attrs
	need := make([]bool, len(cols))
	// The template of each row first: it decides which rows are kept.
	for i, c := range cols {
		need[i] = c.kind == cTemplateID || c.kind == cVersion
	}
	if err := readColumns(rg, cols, need, vals, nil); err != nil {
		return out, err
	}
	nrows := int(rg.NumRows())
	ids, vers := base[cTemplateID].ints, base[cVersion].ints
	kept, err := d.keep(ids, vers, lines)
	if err != nil {
		return out, err
	}
	if kept != nil && len(kept) == 0 {
		return out, nil
	}
	for i, c := range cols {
		switch c.kind {
		case cTemplateID, cVersion:
			need[i] = false // read
		case cSource:
			need[i] = source
		case cAttrKey, cAttrValue:
			need[i] = attrs
		case cKinds, cResidue, cP, cN, cB, cMore:
			need[i] = lines
		default:
			need[i] = true
		}
	}
	var skip []bool
	if kept != nil {
		skip = make([]bool, nrows)
		for i := range skip {
			skip[i] = true
		}
		for _, i := range kept {
			skip[i] = false
		}
	}
	if err := readColumns(rg, cols, need, vals, skip); err != nil {
		return out, err
	}
	var slots []*colVals
	if lines {
		for i := range vals {
			if cv := &vals[i]; (cv.c.kind == cP || cv.c.kind == cN || cv.c.kind == cB) && cv.c.slot < MaxSlots {
				slots = append(slots, cv)
			}
		}
	}
	n := nrows
	if kept != nil {
		n = len(kept)
	}
	// Each record goes straight to its place in WAL order.
	pos := walPositions(base[cWALSeq].ints, base[cIndex].ints, kept)
	start := len(out)
	out = slices.Grow(out, n)[:start+n]
	for x := 0; x < n; x++ {
		i := x
		if kept != nil {
			i = int(kept[x])
		}
		rec := &out[start+int(pos[x])]
		*rec = Record{}
		rec.WALSeq = uint64(base[cWALSeq].ints[i])
		rec.Index = uint32(base[cIndex].ints[i])
		rec.TS = base[cTS].ints[i] * base[cTS].c.unit
		rec.TemplateID = uint64(ids[i])
		rec.TemplateVersion = uint32(vers[i])
		if c := base[cTSSource]; c != nil {
			rec.TSSource = streams.TSSource(c.ints[i])
		}
		if source {
			rec.Source = d.intern(base[cSource].strs[i])
		}
		if attrs {
			if ck, cv := base[cAttrKey], base[cAttrValue]; ck != nil || cv != nil {
				if ck == nil || cv == nil || len(ck.lists[i]) != len(cv.lists[i]) {
					return out[:start], fmt.Errorf("%w: attribute keys and values do not pair", ErrCorrupt)
				}
				for j := range ck.lists[i] {
					rec.Attrs = append(rec.Attrs, streams.Attr{Key: string(ck.lists[i][j]), Value: string(cv.lists[i][j])})
				}
			}
		}
		if lines {
			kinds := d.intern(base[cKinds].strs[i])
			var residue []byte
			if c := base[cResidue]; c != nil {
				if j := c.seek(i); j >= 0 {
					residue = c.strs[j]
				}
			}
			d.has = [MaxSlots]uint8{}
			for _, cv := range slots {
				j := cv.seek(i)
				if j < 0 {
					continue
				}
				k := cv.c.slot
				switch cv.c.kind {
				case cP:
					d.p[k] = cv.strs[j]
					d.has[k] |= 1
				case cN:
					d.n[k] = cv.ints[j]
					d.has[k] |= 2
				case cB:
					d.b[k] = cv.strs[j]
					d.has[k] |= 4
				}
			}
			d.more = d.more[:0]
			if c := base[cMore]; c != nil {
				d.more = append(d.more, c.lists[i]...)
			}
			if err := d.finish(rec, kinds, residue); err != nil {
				return out[:start], err
			}
			if d.rowDone != nil {
				if err := d.rowDone(rec, kinds); err != nil {
					return out[:start], err
				}
			}
		}
	}
	return out, nil
}

// keep returns the rows of a row group d.proj keeps, ascending, or nil for
// every row. Keep is asked once per template version. A kept version whose
// text d.tpl lacks is a MissingTemplateError when lines are not rendered
// (rendering reports it otherwise, at the row).
func (d *decoder) keep(ids, vers []int64, lines bool) ([]int32, error) {
	filter := d.proj != nil && d.proj.Keep != nil
	if !filter && lines {
		return nil, nil
	}
	if d.kept == nil {
		d.kept = map[Key]bool{}
	}
	var out []int32
	if filter {
		out = make([]int32, 0, len(ids))
	}
	var last Key
	lastOK, have := false, false
	for i := range ids {
		k := Key{uint64(ids[i]), uint32(vers[i])}
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
	return out, nil
}

// known reports a MissingTemplateError when d.tpl lacks k's text.
func (d *decoder) known(k Key) error {
	if _, ok := d.tpl[k]; !ok {
		return &MissingTemplateError{Key: k}
	}
	return nil
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
