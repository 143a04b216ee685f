package recfile

import (
	"fmt"
	"strings"
)

// DecodeRows reads a records v3 file back into the Rows Encode takes, in
// WAL order, so a file can be rewritten (compaction) with Encode. Every
// typed parameter comes back exactly. The parameters a timestamp item
// covers (kinds t and c) are not stored one by one: they are cut from the
// rendered timestamp at the template text between them, each at the
// leftmost cut that leaves it non-empty. Either way the rows render the
// same lines, byte for byte, and Encode of them gives a file that Decode
// reads as the same records.
func DecodeRows(data []byte, tpl Templates) ([]Row, error) {
	f, err := openBytes(data)
	if err != nil {
		return nil, fmt.Errorf("open records file: %w", err)
	}
	l, err := decodeLines(f, inMemory(f, data), tpl, Projection{Lines: true, Source: true, Attrs: true})
	if err != nil {
		return nil, err
	}
	defer l.Release() // rows hold copies
	d := l.d
	out := make([]Row, len(l.refs))
	d.bounds = make([]int, 0, 64)
	var rec Record
	for x, ref := range l.refs {
		g, i := l.groups[ref.g], int(ref.row)
		d.bounds = d.bounds[:0]
		if err := d.record(&rec, g, ref); err != nil {
			return nil, err
		}
		slots, err := d.slotsOf(g, i)
		if err != nil {
			return nil, err
		}
		if out[x], err = d.params(&rec, d.pieces[g.tpl[i]], slots); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// params is rec as a Row, its parameters cut from its rendered line at
// the bounds render recorded.
func (d *decoder) params(rec *Record, pieces []string, slots []slot) (Row, error) {
	r := Row{WALSeq: rec.WALSeq, Index: rec.Index, TS: rec.TS, TSSource: rec.TSSource, TemplateID: rec.TemplateID,
		TemplateVersion: rec.TemplateVersion, Source: rec.Source, Attrs: rec.Attrs}
	r.Params = make([]string, len(slots))
	var items []int // the slots that are not covered, in order
	for j, s := range slots {
		if s.kind != kindCovered {
			items = append(items, j)
		}
	}
	if len(d.bounds) != len(items)+1 {
		return r, fmt.Errorf("%w: record wal %d index %d: %d bounds for %d items", ErrCorrupt, rec.WALSeq, rec.Index, len(d.bounds), len(items))
	}
	line := string(rec.Line)
	for i, j := range items {
		end := d.bounds[i+1]
		if i+1 < len(items) {
			end -= len(pieces[items[i+1]])
		}
		text := line[d.bounds[i]:end]
		if k := slots[j].kind; k != kindTime && k != kindShift {
			r.Params[j] = text
			continue
		}
		// A timestamp item: its text holds the covered parameters after it
		// and the template text between them.
		last := j
		for last+1 < len(slots) && slots[last+1].kind == kindCovered {
			last++
		}
		for k := j; k < last; k++ {
			sep := pieces[k+1]
			// The leftmost cut that leaves this parameter non-empty, else
			// the leftmost ("" cuts at 0).
			cut := -1
			if sep != "" && len(text) > 0 {
				if c := strings.Index(text[1:], sep); c >= 0 {
					cut = c + 1
				}
			}
			if cut < 0 {
				cut = strings.Index(text, sep)
			}
			if cut < 0 {
				return r, fmt.Errorf("%w: record wal %d index %d: timestamp %q lacks the template text %q", ErrCorrupt, rec.WALSeq, rec.Index, text, sep)
			}
			r.Params[k] = text[:cut]
			text = text[cut+len(sep):]
		}
		r.Params[last] = text
	}
	return r, nil
}
