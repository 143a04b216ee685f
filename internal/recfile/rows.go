package recfile

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/eventtime"
)

// DecodeRows reads a records v3 file back into the Rows Encode takes, in
// WAL order, so a file can be rewritten (compaction) with Encode. Every
// typed parameter comes back exactly. The parameters a timestamp item
// covers (kinds t and c) are not stored one by one: they are cut from the
// rendered timestamp at the template text between them, each at the
// leftmost cut that leaves it non-empty.
// Either way the rows render the same lines, byte for byte, and Encode of
// them gives a file that Decode reads as the same records.
func DecodeRows(data []byte, tpl Templates) ([]Row, error) {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("open records file: %w", err)
	}
	cols := columnsOf(f.Schema())
	d := decoder{tpl: tpl, infos: map[Key][]string{}, kinds: map[string][]slot{}, strs: map[string]string{}}
	out := make([]Row, 0, f.NumRows())
	rows := make([]parquet.Row, 256)
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(rows)
			for i := 0; i < n; i++ {
				r, derr := d.paramsRow(cols, rows[i])
				if derr != nil {
					rr.Close()
					return nil, derr
				}
				out = append(out, r)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				rr.Close()
				return nil, fmt.Errorf("read records rows: %w", err)
			}
		}
		rr.Close()
	}
	slices.SortFunc(out, func(a, b Row) int {
		if c := cmp.Compare(a.WALSeq, b.WALSeq); c != 0 {
			return c
		}
		return cmp.Compare(a.Index, b.Index)
	})
	return out, nil
}

// paramsRow decodes one row (checking it renders) and returns it with its
// parameters.
func (d *decoder) paramsRow(cols []column, row parquet.Row) (Row, error) {
	rec, err := d.row(cols, row) // fills d.p, d.n, d.has, d.more
	if err != nil {
		return Row{}, err
	}
	var kinds string
	var residue []byte
	for _, v := range row {
		switch cols[v.Column()].kind {
		case cKinds:
			kinds = d.intern(v.ByteArray())
		case cResidue:
			if !v.IsNull() {
				residue = v.ByteArray()
			}
		}
	}
	r := Row{WALSeq: rec.WALSeq, Index: rec.Index, TS: rec.TS, TemplateID: rec.TemplateID,
		TemplateVersion: rec.TemplateVersion, Source: rec.Source, Attrs: rec.Attrs}
	pieces := d.infos[Key{rec.TemplateID, rec.TemplateVersion}] // set by d.row
	slots := d.kinds[kinds]
	r.Params = make([]string, len(slots))
	more := d.more
	var val []byte
	for j := 0; j < len(slots); j++ {
		s := slots[j]
		switch {
		case s.kind == kindTime:
			last := j
			for last+1 < len(slots) && slots[last+1].kind == kindCovered {
				last++
			}
			text := string(eventtime.Render(nil, time.UnixMicro(rec.TS/1000), s.layout, residue))
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
					return Row{}, fmt.Errorf("%w: record wal %d index %d: timestamp %q lacks the template text %q", ErrCorrupt, rec.WALSeq, rec.Index, text, sep)
				}
				r.Params[k] = text[:cut]
				text = text[cut+len(sep):]
			}
			r.Params[last] = text
			j = last
		case j >= MaxSlots:
			r.Params[j] = string(more[0])
			more = more[1:]
		case s.kind == kindString || s.kind == kindBytes:
			r.Params[j] = string(d.p[j])
		default:
			val = appendValue(val[:0], s, d.n[j])
			r.Params[j] = string(val)
		}
	}
	return r, nil
}
