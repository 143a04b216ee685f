package recfile

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/parquet-go/parquet-go"
)

// SummaryKey is the footer key-value entry that holds a records file's
// template summary (see Summary; docs/formats.md, records v3 summary v1).
const SummaryKey = "quarry.records.templates"

// summaryVersion is the first byte of an encoded summary.
const summaryVersion = 1

// TemplateSummary describes the rows of one template version in a file.
type TemplateSummary struct {
	Key Key
	// Rows is the number of the file's rows with this template version.
	Rows int64
	// MinTS and MaxTS bound the rows' ts, in microseconds since the epoch.
	MinTS, MaxTS int64
	// ParamBytes holds every byte of every parameter of these rows (the
	// original text, as the line shows it): bit b&63 of word b>>6.
	ParamBytes [4]uint64
}

// Summary is a records file's per-template summary, in file order (by
// template id and version). A reader can count by template from it and
// settle text terms against ParamBytes without reading a row.
type Summary []TemplateSummary

// summarize builds the summary of rows written in order (rows sorted by
// template, as the encoder writes them, give one entry per version; any
// order is summarized correctly).
func summarize(rows []Row, order []int32) Summary {
	var out Summary
	at := map[Key]int{}
	var seen [256]bool
	cur := -1
	var curKey Key
	flush := func() {
		if cur < 0 {
			return
		}
		t := &out[cur]
		for b, ok := range seen {
			if ok {
				t.ParamBytes[b>>6] |= 1 << (b & 63)
			}
		}
		seen = [256]bool{}
	}
	for _, i := range order {
		r := &rows[i]
		k := Key{r.TemplateID, r.TemplateVersion}
		ts := floorDiv(r.TS, 1000)
		if cur < 0 || k != curKey {
			flush()
			x, ok := at[k]
			if !ok {
				x = len(out)
				at[k] = x
				out = append(out, TemplateSummary{Key: k, MinTS: ts, MaxTS: ts})
			}
			cur, curKey = x, k
		}
		t := &out[cur]
		t.Rows++
		t.MinTS, t.MaxTS = min(t.MinTS, ts), max(t.MaxTS, ts)
		for _, p := range r.Params {
			for j := 0; j < len(p); j++ {
				seen[p[j]] = true
			}
		}
	}
	flush()
	return out
}

// encodeSummary writes s as base64 (standard, padded) of: the version byte
// 1, uvarint count, then per entry uvarint id, uvarint version, uvarint
// rows, varint min ts, uvarint max ts - min ts, a byte whose bit w says
// that word w of ParamBytes is not zero, and those words (little-endian, in
// order).
func encodeSummary(s Summary) string {
	b := []byte{summaryVersion}
	b = binary.AppendUvarint(b, uint64(len(s)))
	for i := range s {
		t := &s[i]
		b = binary.AppendUvarint(b, t.Key.ID)
		b = binary.AppendUvarint(b, uint64(t.Key.Version))
		b = binary.AppendUvarint(b, uint64(t.Rows))
		b = binary.AppendVarint(b, t.MinTS)
		b = binary.AppendUvarint(b, uint64(t.MaxTS-t.MinTS))
		var mask byte
		for w, v := range t.ParamBytes {
			if v != 0 {
				mask |= 1 << w
			}
		}
		b = append(b, mask)
		for _, v := range t.ParamBytes {
			if v != 0 {
				b = binary.LittleEndian.AppendUint64(b, v)
			}
		}
	}
	return base64.StdEncoding.EncodeToString(b)
}

var errSummary = errors.New("recfile: bad template summary")

// ParseSummary decodes the value of a file's SummaryKey entry. A summary
// of a later version is an error; callers read such a file as one without
// a summary.
func ParseSummary(v string) (Summary, error) {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errSummary, err)
	}
	if len(b) == 0 || b[0] != summaryVersion {
		return nil, fmt.Errorf("%w: unknown version", errSummary)
	}
	b = b[1:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	n, ok := next()
	if !ok || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: count", errSummary)
	}
	out := make(Summary, 0, n)
	for range n {
		var t TemplateSummary
		id, ok1 := next()
		ver, ok2 := next()
		rows, ok3 := next()
		minTS, m := binary.Varint(b)
		if !ok1 || !ok2 || !ok3 || m <= 0 || ver > 1<<32-1 || rows > 1<<62 {
			return nil, fmt.Errorf("%w: entry %d", errSummary, len(out))
		}
		b = b[m:]
		span, ok4 := next()
		if !ok4 || len(b) < 1 || span > 1<<62 || b[0] > 15 {
			return nil, fmt.Errorf("%w: entry %d", errSummary, len(out))
		}
		t.Key, t.Rows, t.MinTS, t.MaxTS = Key{id, uint32(ver)}, int64(rows), minTS, minTS+int64(span)
		mask := b[0]
		b = b[1:]
		for w := range t.ParamBytes {
			if mask&(1<<w) == 0 {
				continue
			}
			if len(b) < 8 {
				return nil, fmt.Errorf("%w: entry %d", errSummary, len(out))
			}
			t.ParamBytes[w] = binary.LittleEndian.Uint64(b)
			b = b[8:]
		}
		out = append(out, t)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errSummary, len(b))
	}
	return out, nil
}

// FileSummary returns the summary in f's footer; nil without error when f
// has none (a file written before summaries, or by another writer).
func FileSummary(f *parquet.File) (Summary, error) {
	v, ok := f.Lookup(SummaryKey)
	if !ok {
		return nil, nil
	}
	return ParseSummary(v)
}
