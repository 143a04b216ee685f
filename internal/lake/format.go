package lake

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// WriteRaw writes the record's original line and a newline, nothing else.
func WriteRaw(w io.Writer, r Record) error {
	if bw, ok := w.(rawWriter); ok { // a bufio.Writer: no copy of the line
		if _, err := bw.WriteString(r.Line); err != nil {
			return err
		}
		return bw.WriteByte('\n')
	}
	_, err := io.WriteString(w, r.Line+"\n")
	return err
}

type rawWriter interface {
	io.StringWriter
	io.ByteWriter
}

// WriteJSONL writes the record as one JSON object and a newline
// (AppendJSONMembers). "line" is the line with any byte that is not UTF-8
// replaced by U+FFFD; such a line is also in "line_base64", exactly.
func WriteJSONL(w io.Writer, r Record) error {
	b := make([]byte, 0, 2*len(r.Line)+128)
	b = append(AppendJSONMembers(append(b, '{'), &r), '}', '\n')
	_, err := w.Write(b)
	return err
}

// TableHeader is the header line WriteTable's columns follow.
const TableHeader = "WAL_SEQ\tINDEX\tTS\tTENANT\tTEMPLATE\tSOURCE\tLINE"

// WriteTable writes the record as one tab-separated row of TableHeader's
// columns (TEMPLATE is id.version); wrap w in a text/tabwriter to align.
// Tabs and newlines inside the line are escaped so a row stays one line,
// and a byte that is not UTF-8 is written as \xNN.
func WriteTable(w io.Writer, r Record) error {
	_, err := fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%d.%d\t%s\t%s\n", r.WALSeq, r.Index,
		r.TS.UTC().Format(time.RFC3339Nano), cell(r.Tenant), r.TemplateID, r.TemplateVersion, cell(r.Source), cell(r.Line))
	return err
}

var cellEscaper = strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`)

func cell(s string) string {
	s = cellEscaper.Replace(s)
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Formats are the output formats NewFormatter accepts.
var Formats = []string{"raw", "jsonl", "table"}

// Formatter writes records in one format; call Flush at the end.
type Formatter struct {
	write func(io.Writer, Record) error
	w     io.Writer
	tw    *tabwriter.Writer
}

// NewFormatter returns a formatter for format ("raw", "jsonl" or "table";
// table writes TableHeader first and aligns columns).
func NewFormatter(w io.Writer, format string) (*Formatter, error) {
	switch format {
	case "raw":
		return &Formatter{write: WriteRaw, w: w}, nil
	case "jsonl":
		return &Formatter{write: WriteJSONL, w: w}, nil
	case "table":
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		if _, err := io.WriteString(tw, TableHeader+"\n"); err != nil {
			return nil, err
		}
		return &Formatter{write: WriteTable, w: tw, tw: tw}, nil
	}
	return nil, fmt.Errorf("output format %q: want one of %s", format, strings.Join(Formats, ", "))
}

// Write writes one record.
func (f *Formatter) Write(r Record) error { return f.write(f.w, r) }

// Flush flushes buffered output (the aligned table).
func (f *Formatter) Flush() error {
	if f.tw != nil {
		return f.tw.Flush()
	}
	return nil
}

// WriteTemplates writes template infos as "table" (aligned columns) or
// "jsonl".
func WriteTemplates(w io.Writer, format string, infos []TemplateInfo) error {
	switch format {
	case "jsonl":
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, t := range infos {
			if err := enc.Encode(t); err != nil {
				return err
			}
		}
		return nil
	case "table", "":
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tID\tVERSION\tRECORDS\tKIND\tMERGED INTO\tTEMPLATE")
		sorted := append([]TemplateInfo(nil), infos...)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Tenant < sorted[j].Tenant })
		for _, t := range sorted {
			into := "-"
			if t.MergedInto != 0 {
				into = fmt.Sprint(t.MergedInto)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", cell(t.Tenant), t.TemplateID, t.Version, t.Records, t.Kind, into, cell(t.Text))
		}
		return tw.Flush()
	}
	return fmt.Errorf("templates format %q: want table or jsonl", format)
}
