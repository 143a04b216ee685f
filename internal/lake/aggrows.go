package lake

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/quarrylake/quarry/internal/query"
)

// WriteRows writes the rows of a count or top (header from
// query.Aggregator.Header: the keys as written, then "count") in format:
//
//   - raw: one line per row, the key values then the count, tab-separated
//     (VALUE<TAB>COUNT for one key), nothing else;
//   - jsonl: one JSON object per row with the header's names as fields, the
//     count a number: {"template":"42","count":17};
//   - table: the header, then aligned columns; tabs and newlines in values
//     are escaped as in the records table.
func WriteRows(w io.Writer, format string, header []string, rows []query.Row) error {
	switch format {
	case "raw":
		var b []byte
		for _, r := range rows {
			b = b[:0]
			for _, k := range r.Keys {
				b = append(b, k...)
				b = append(b, '\t')
			}
			b = strconv.AppendInt(b, r.Count, 10)
			b = append(b, '\n')
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	case "jsonl":
		var b []byte
		for _, r := range rows {
			b = append(b[:0], '{')
			for i, k := range r.Keys {
				name := fmt.Sprint("key", i)
				if i < len(header) {
					name = header[i]
				}
				nb, _ := json.Marshal(name)
				vb, _ := json.Marshal(k)
				b = append(append(append(b, nb...), ':'), vb...)
				b = append(b, ',')
			}
			b = append(b, `"count":`...)
			b = strconv.AppendInt(b, r.Count, 10)
			b = append(b, "}\n"...)
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	case "table":
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		upper := make([]string, len(header))
		for i, h := range header {
			upper[i] = strings.ToUpper(cell(h))
		}
		fmt.Fprintln(tw, strings.Join(upper, "\t"))
		for _, r := range rows {
			for _, k := range r.Keys {
				fmt.Fprintf(tw, "%s\t", cell(k))
			}
			fmt.Fprintf(tw, "%d\n", r.Count)
		}
		return tw.Flush()
	}
	return fmt.Errorf("output format %q: want one of %s", format, strings.Join(Formats, ", "))
}
