package recfile

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
// It decodes the whole file (Decode's column-wise reader) and drops what p
// does not ask for; reading only the asked-for columns of the current
// layout (per-kind slots, kind u, more) is left to do.
func DecodeProjected(data []byte, tpl Templates, p Projection) ([]Record, error) {
	recs, err := Decode(data, tpl)
	if err != nil {
		return nil, err
	}
	keep := map[Key]bool{}
	out := recs[:0]
	for _, r := range recs {
		if p.Keep != nil {
			k := Key{r.TemplateID, r.TemplateVersion}
			ok, seen := keep[k]
			if !seen {
				ok = p.Keep(k)
				keep[k] = ok
			}
			if !ok {
				continue
			}
		}
		if !p.Lines {
			r.Line = nil
		}
		if !p.Source {
			r.Source = ""
		}
		if !p.Attrs {
			r.Attrs = nil
		}
		out = append(out, r)
	}
	return out, nil
}
