package recfile

import (
	"cmp"
	"errors"
	"fmt"
	"io"
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

// readColumns reads every leaf column of rg into per-row arrays. Byte array
// values are copied into arena-backed slices, so they outlive the pages.
func readColumns(rg parquet.RowGroup, cols []column) ([]colVals, error) {
	nrows := int(rg.NumRows())
	chunks := rg.ColumnChunks()
	if len(chunks) != len(cols) {
		return nil, fmt.Errorf("%w: %d column chunks for %d columns", ErrCorrupt, len(chunks), len(cols))
	}
	out := make([]colVals, len(cols))
	var buf []parquet.Value
	arena := make([]byte, 0, 64<<10)
	for ci, c := range cols {
		cv := &out[ci]
		cv.c = c
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
				return nil, fmt.Errorf("read records column %d: %w", ci, err)
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
							return nil, fmt.Errorf("%w: column %d has more rows than the row group", ErrCorrupt, ci)
						}
						if !v.IsNull() && v.DefinitionLevel() == c.maxDef {
							start := len(arena)
							arena = append(arena, v.ByteArray()...)
							cv.lists[row] = append(cv.lists[row], arena[start:len(arena):len(arena)])
						}
						continue
					}
					if row >= nrows {
						parquet.Release(p)
						pages.Close()
						return nil, fmt.Errorf("%w: column %d has more rows than the row group", ErrCorrupt, ci)
					}
					if v.IsNull() {
						if !optional {
							parquet.Release(p)
							pages.Close()
							return nil, fmt.Errorf("%w: null in required column %d", ErrCorrupt, ci)
						}
						row++
						continue
					}
					var s []byte
					var n int64
					if bytesCol {
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
						return nil, fmt.Errorf("read records column %d: %w", ci, rerr)
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
			return nil, fmt.Errorf("%w: column %d has %d of %d rows", ErrCorrupt, ci, row, nrows)
		}
	}
	return out, nil
}

func isBytes(kind int) bool {
	switch kind {
	case cSource, cKinds, cResidue, cP, cB:
		return true
	}
	return false
}

// rowGroup decodes the records of one row group, appending them to out.
func (d *decoder) rowGroup(out []Record, rg parquet.RowGroup, cols []column) ([]Record, error) {
	vals, err := readColumns(rg, cols)
	if err != nil {
		return out, err
	}
	var base [cAttrValue + 1]*colVals
	var slots []*colVals
	for i := range vals {
		cv := &vals[i]
		switch k := cv.c.kind; k {
		case cP, cN, cB:
			if cv.c.slot < MaxSlots {
				slots = append(slots, cv)
			}
		default:
			base[k] = cv
		}
	}
	for _, k := range []int{cWALSeq, cIndex, cTS, cTemplateID, cVersion, cSource, cKinds} {
		if base[k] == nil {
			return out, fmt.Errorf("%w: a required column is missing", ErrCorrupt)
		}
	}
	nrows := int(rg.NumRows())
	// Each record goes straight to its place in WAL order.
	pos := walPositions(base[cWALSeq].ints, base[cIndex].ints)
	start := len(out)
	out = slices.Grow(out, nrows)[:start+nrows]
	for i := 0; i < nrows; i++ {
		var rec Record
		rec.WALSeq = uint64(base[cWALSeq].ints[i])
		rec.Index = uint32(base[cIndex].ints[i])
		rec.TS = base[cTS].ints[i] * base[cTS].c.unit
		rec.TemplateID = uint64(base[cTemplateID].ints[i])
		rec.TemplateVersion = uint32(base[cVersion].ints[i])
		if c := base[cTSSource]; c != nil {
			rec.TSSource = streams.TSSource(c.ints[i])
		}
		rec.Source = d.intern(base[cSource].strs[i])
		kinds := d.intern(base[cKinds].strs[i])
		var residue []byte
		if c := base[cResidue]; c != nil {
			if j := c.at(i); j >= 0 {
				residue = c.strs[j]
			}
		}
		d.has = [MaxSlots]uint8{}
		for _, cv := range slots {
			j := cv.at(i)
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
		if ck, cv := base[cAttrKey], base[cAttrValue]; ck != nil || cv != nil {
			if ck == nil || cv == nil || len(ck.lists[i]) != len(cv.lists[i]) {
				return out, fmt.Errorf("%w: attribute keys and values do not pair", ErrCorrupt)
			}
			for j := range ck.lists[i] {
				rec.Attrs = append(rec.Attrs, streams.Attr{Key: string(ck.lists[i][j]), Value: string(cv.lists[i][j])})
			}
		}
		if err := d.finish(&rec, kinds, residue); err != nil {
			return out[:start], err
		}
		if d.rowDone != nil {
			if err := d.rowDone(&rec, kinds); err != nil {
				return out[:start], err
			}
		}
		out[start+int(pos[i])] = rec
	}
	return out, nil
}

// walPositions returns each row's index in (wal_seq, record_index) order.
func walPositions(seqs, idxs []int64) []int32 {
	order := make([]int32, len(seqs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(uint64(seqs[a]), uint64(seqs[b])); c != 0 {
			return c
		}
		return cmp.Compare(uint32(idxs[a]), uint32(idxs[b]))
	})
	pos := make([]int32, len(seqs))
	for p, i := range order {
		pos[i] = int32(p)
	}
	return pos
}
