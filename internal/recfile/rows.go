package recfile

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
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
	f, err := OpenParquet(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("open records file: %w", err)
	}
	cols := columnsOf(f.Schema())
	d := decoder{tpl: tpl, infos: map[Key][]string{}, kinds: map[string][]slot{}, strs: map[string]string{}}
	out := make([]Row, 0, f.NumRows())
	d.bounds = make([]int, 0, 64)
	d.rowDone = func(rec *Record, kinds string) error {
		r, err := d.params(rec, kinds)
		d.bounds = d.bounds[:0]
		out = append(out, r)
		return err
	}
	for _, rg := range f.RowGroups() {
		if _, err := d.rowGroup(nil, rg, cols); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b Row) int {
		if c := cmp.Compare(a.WALSeq, b.WALSeq); c != 0 {
			return c
		}
		return cmp.Compare(a.Index, b.Index)
	})
	return out, nil
}

// params is rec as a Row, its parameters cut from its rendered line at
// the bounds render recorded.
func (d *decoder) params(rec *Record, kinds string) (Row, error) {
	r := Row{WALSeq: rec.WALSeq, Index: rec.Index, TS: rec.TS, TSSource: rec.TSSource, TemplateID: rec.TemplateID,
		TemplateVersion: rec.TemplateVersion, Source: rec.Source, Attrs: rec.Attrs}
	pieces := d.infos[Key{rec.TemplateID, rec.TemplateVersion}] // set by render
	slots := d.kinds[kinds]
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
		if slots[j].kind != kindTime {
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
