package recfile

import (
	"bytes"
	"fmt"

	"github.com/parquet-go/parquet-go"
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
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("open records file: %w", err)
	}
	cols := columnsOf(f.Schema())
	d := decoder{tpl: tpl, proj: &p, infos: map[Key][]string{}, kinds: map[string][]slot{}, strs: map[string]string{}}
	var out []Record
	for _, rg := range f.RowGroups() {
		if out, err = d.rowGroup(out, rg, cols); err != nil {
			return nil, err
		}
	}
	return walOrder(out), nil
}
