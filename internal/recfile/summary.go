package recfile

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// SummaryKey is the footer key-value entry that holds a records file's
// template summary (see Summary; docs/formats.md, records v3 summary v1).
const SummaryKey = "quarry.records.templates"

// summaryVersion is the first byte of an encoded summary (before pack7 or
// base64: the text form is told by the value's first character).
const summaryVersion = 1

// TemplateSummary describes the rows of one template version in a file.
type TemplateSummary struct {
	Key Key
	// Rows is the number of the file's rows with this template version.
	Rows int64
	// ParamBytes holds every byte of every parameter of these rows (the
	// original text, as the line shows it): bit b&63 of word b>>6. It is
	// not known (AnyBytes) for a version with few rows in the file.
	ParamBytes [4]uint64
	AnyBytes   bool
	// ParamPairs holds every pair of adjacent bytes within one of these
	// rows' parameters (PairsKey): nil in a file without them (one of
	// one row group, one written at zstd's default level, or one written
	// before 2026-12-06) and where AnyBytes.
	ParamPairs Pairs
}

// Summary is a records file's per-template summary, in key order (by
// template id and version). A reader can count by template from it and
// settle text terms against ParamBytes without reading a row.
type Summary []TemplateSummary

// summary is the file's summary from what classify gathered of each
// template version: its rows and the bytes of their parameters, whatever
// order the rows were classified in.
func (e *encoder) summary() Summary {
	out := make(Summary, 0, len(e.infos))
	for k, t := range e.infos {
		if t.rows == 0 {
			continue
		}
		s := TemplateSummary{Key: k, Rows: t.rows}
		if t.rows < paramBytesMinRows {
			s.AnyBytes = true
		} else {
			for b, ok := range t.seen {
				if ok {
					s.ParamBytes[b>>6] |= 1 << (b & 63)
				}
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b TemplateSummary) int {
		return cmp.Or(cmp.Compare(a.Key.ID, b.Key.ID), cmp.Compare(a.Key.Version, b.Key.Version))
	})
	return out
}

// paramBytesMinRows: a template version with fewer rows in a file gets
// no byte set (its bytes are "unknown"): its rows cost little to read, and
// a byte set per rare template is most of a summary's size.
const paramBytesMinRows = 64

// unknownBytes in an entry's word mask: the entry has no byte set.
const unknownBytes = 1 << 4

// encodeSummary writes s as the text7 form (pack7) of the version byte
// 1 followed by the zstd frame of: uvarint count, then per entry uvarint
// id minus the previous entry's id (0 before the first; ids ascend),
// uvarint version, uvarint rows, a mask byte, and the words of
// ParamBytes whose mask bit (w = 0..3) is set (little-endian, in order).
// Mask bit 4 says the entry has no byte set (fewer than paramBytesMinRows
// rows): any byte may occur in its parameters.
func encodeSummary(s Summary) string {
	var raw []byte
	raw = binary.AppendUvarint(raw, uint64(len(s)))
	var prevID uint64
	for i := range s {
		t := &s[i]
		raw = binary.AppendUvarint(raw, t.Key.ID-prevID)
		raw = binary.AppendUvarint(raw, uint64(t.Key.Version))
		raw = binary.AppendUvarint(raw, uint64(t.Rows))
		prevID = t.Key.ID
		if t.AnyBytes {
			raw = append(raw, unknownBytes)
			continue
		}
		var mask byte
		for w, v := range t.ParamBytes {
			if v != 0 {
				mask |= 1 << w
			}
		}
		raw = append(raw, mask)
		for _, v := range t.ParamBytes {
			if v != 0 {
				raw = binary.LittleEndian.AppendUint64(raw, v)
			}
		}
	}
	// zstd's better level, not its best: best's 34 MB of match tables are
	// written at random for a summary of 1-2 KB, 1.6 ms a summary warm (21
	// times better's) and up to 50 ms in quarry run, where they are cold
	// between flushes (5-10% of the run's CPU profile); better costs 4.5%
	// more summary bytes (1,405 to 1,468 for the 22,000 Loghub lines as one
	// file; +30 bytes over the 11 Loghub lakes).
	return packFooterValue(summaryVersion, raw) // "": not written, readers read such a file row by row
}

// packFooterValue is a footer key-value value (a summary, PairsKey's
// pairs): text7 (pack7) of version followed by the zstd frame of raw, at
// zstd's better level; "" when raw cannot be compressed.
func packFooterValue(version byte, raw []byte) string {
	z, err := codec(zstd.SpeedBetterCompression).Encode(nil, raw)
	if err != nil {
		return ""
	}
	return pack7(append([]byte{version}, z...))
}

// unpackFooterValue reverses packFooterValue: the frame's content of v,
// whose first byte after text7 must be version; where base64OK, v may be
// the base64 (standard, padded) of the same bytes instead (summaries
// written before text7). Every error wraps bad.
func unpackFooterValue(v string, version byte, base64OK bool, bad error) ([]byte, error) {
	var z []byte
	var err error
	switch {
	case len(v) > 0 && v[0] == text7:
		z, err = unpack7(v[1:])
	case base64OK:
		z, err = base64.StdEncoding.DecodeString(v)
	default:
		err = errors.New("not text7")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", bad, err)
	}
	if len(z) == 0 || z[0] != version {
		return nil, fmt.Errorf("%w: unknown version", bad)
	}
	b, err := decodeSummary(z[1:]) // at most maxSummary bytes
	if err != nil {
		return nil, fmt.Errorf("%w: %w", bad, err)
	}
	return b, nil
}

// nextUvarint reads a uvarint from the front of *b.
func nextUvarint(b *[]byte) (uint64, bool) {
	v, n := binary.Uvarint(*b)
	if n <= 0 {
		return 0, false
	}
	*b = (*b)[n:]
	return v, true
}

// text7 starts a summary value written 7 bits a character (pack7); a
// value without it is base64 (standard, padded) of the same bytes, as
// files written before 2026-12-05 have it. '~' is not a base64 character.
const text7 = '~'

// pack7 is text7 followed by b's bits, most significant first, 7 to a
// character (0x00-0x7f), the last character padded with zero bits: n
// characters hold 7n/8 bytes, rounded down. A Parquet key-value value is
// a thrift string, which must be UTF-8 (the Rust parquet crate, for one,
// fails a footer whose string is not); every character below 0x80 is.
// Base64's 6 bits a character cost the 11 Loghub files 588 bytes over the
// 1,764 of their summaries; 7 bits cost 252.
func pack7(b []byte) string {
	out := make([]byte, 1, 1+(len(b)*8+6)/7)
	out[0] = text7
	var acc uint32
	bits := 0
	for _, c := range b {
		acc = acc<<8 | uint32(c)
		bits += 8
		for bits >= 7 {
			bits -= 7
			out = append(out, byte(acc>>bits)&0x7f)
		}
	}
	if bits > 0 {
		out = append(out, byte(acc<<(7-bits))&0x7f)
	}
	return string(out)
}

// unpack7 reverses pack7 (v without its text7).
func unpack7(v string) ([]byte, error) {
	out := make([]byte, 0, len(v)*7/8)
	var acc uint32
	bits := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c >= 0x80 {
			return nil, fmt.Errorf("character %d is %#x", i, c)
		}
		acc = acc<<7 | uint32(c)
		bits += 7
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if acc&(1<<bits-1) != 0 {
		return nil, errors.New("padding bits set")
	}
	return out, nil
}

var errSummary = errors.New("recfile: bad template summary")

// maxSummary bounds a decompressed summary (a footer is small; this stops
// a frame that claims more).
const maxSummary = 64 << 20

// ParseSummary decodes the value of a file's SummaryKey entry. A summary
// of a later version is an error; callers read such a file as one without
// a summary.
func ParseSummary(v string) (Summary, error) {
	b, err := unpackFooterValue(v, summaryVersion, true, errSummary)
	if err != nil {
		return nil, err
	}
	next := func() (uint64, bool) { return nextUvarint(&b) }
	n, ok := next()
	if !ok || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: count", errSummary)
	}
	out := make(Summary, 0, n)
	var prevID uint64
	for range n {
		var t TemplateSummary
		did, ok1 := next()
		ver, ok2 := next()
		rows, ok3 := next()
		if !ok1 || !ok2 || !ok3 || ver > 1<<32-1 || rows > 1<<62 || did > ^prevID || len(b) < 1 || b[0] > 31 {
			return nil, fmt.Errorf("%w: entry %d", errSummary, len(out))
		}
		t.Key, t.Rows = Key{prevID + did, uint32(ver)}, int64(rows)
		prevID = t.Key.ID
		mask := b[0]
		b = b[1:]
		if mask&unknownBytes != 0 {
			if mask != unknownBytes {
				return nil, fmt.Errorf("%w: entry %d", errSummary, len(out))
			}
			t.AnyBytes = true
			out = append(out, t)
			continue
		}
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
// Its entries carry the file's ParamPairs (PairsKey) where it has them; a
// damaged PairsKey value leaves them nil (a search then settles terms by
// the byte sets alone, as in a file without them).
func FileSummary(f *parquet.File) (Summary, error) {
	v, ok := f.Lookup(SummaryKey)
	if !ok {
		return nil, nil
	}
	s, err := ParseSummary(v)
	if err != nil {
		return nil, err
	}
	if pv, ok := f.Lookup(PairsKey); ok {
		if ps, err := ParsePairs(pv); err == nil {
			for i := range s {
				if !s[i].AnyBytes {
					s[i].ParamPairs = ps[s[i].Key]
				}
			}
		}
	}
	return s, nil
}
