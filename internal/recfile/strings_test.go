package recfile

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// word spells i in letters only, so classify keeps it a string.
func word(i int) string {
	b := []byte{'w'}
	for i++; i > 0; i /= 26 {
		b = append(b, byte('a'+i%26))
	}
	return string(b)
}

// TestStringColumnsDictionaryWhereValuesRepeat: a p<j> column whose values
// repeat (a package name out of 20) is dictionary-encoded, one whose
// values are all distinct stays PLAIN, and the file is smaller than with
// every string column PLAIN; both read back exactly.
func TestStringColumnsDictionaryWhereValuesRepeat(t *testing.T) {
	tpl := Templates{{1, 1}: "<*> upgrade <*> session <*>"}
	rows := make([]Row, 5000)
	for i := range rows {
		ts := ns("2026-11-29T00:00:00.010Z") + int64(i)*1e9
		rows[i] = Row{WALSeq: 1, Index: uint32(i), TS: ts, TemplateID: 1, TemplateVersion: 1, Source: "file:dpkg.log",
			Params: []string{fmt.Sprintf("2026-11-29T%02d:%02d:%02d.010Z", i/3600, i/60%60, i%60), "lib" + word(i*7%20) + "-common", word(i * 7919)}}
	}
	encodings := func(data []byte) map[string][]format.Encoding {
		pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]format.Encoding{}
		for _, c := range pf.Metadata().RowGroups[0].Columns {
			out[c.MetaData.PathInSchema[0]] = c.MetaData.Encoding
		}
		return out
	}
	hasDict := func(es []format.Encoding) bool {
		for _, e := range es {
			if e == format.RLEDictionary || e == format.PlainDictionary {
				return true
			}
		}
		return false
	}
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	enc := encodings(f.Data)
	if es, ok := enc["p0"]; !ok || !hasDict(es) {
		t.Errorf("p0 (20 distinct values in %d rows): encodings %v, want a dictionary", len(rows), es)
	}
	if es, ok := enc["p1"]; !ok || hasDict(es) {
		t.Errorf("p1 (every value distinct): encodings %v, want PLAIN", es)
	}
	o := defaultOptions()
	o.strings = "plain"
	plain, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	if hasDict(encodings(plain.Data)["p0"]) {
		t.Fatal("strings plain wrote a dictionary")
	}
	if len(f.Data) >= len(plain.Data) {
		t.Errorf("auto %d bytes, all PLAIN %d: the dictionary did not pay", len(f.Data), len(plain.Data))
	}
	readsBack(t, tpl, rows, f.Data, plain.Data)
}

// TestDistinctEstimate: linear counting stays within 5% of the true count
// from one distinct value to every value distinct, runs of equal values
// counted once.
func TestDistinctEstimate(t *testing.T) {
	for _, tc := range []struct{ rows, distinct int }{{1, 1}, {100, 1}, {100, 100}, {5000, 20}, {5000, 1250}, {5000, 5000}, {200000, 200000}, {200000, 3000}} {
		s := strStats{words: distinctWords(tc.rows)}
		for i := range tc.rows {
			s.add(word(i % tc.distinct))
		}
		if s.n != tc.rows {
			t.Errorf("%+v: n %d", tc, s.n)
		}
		if got := s.distinct(); math.Abs(got-float64(tc.distinct)) > 0.05*float64(tc.distinct)+0.5 {
			t.Errorf("%+v: estimate %.1f", tc, got)
		}
	}
	var off strStats
	off.add("x")
	if off.bits != nil || off.distinct() != 0 {
		t.Error("no bitmap asked for, one made")
	}
}

// TestPlainWhereSmaller: a file written at zstd's best level has a p<j>
// column that is no dictionary PLAIN where that compresses smaller than
// DELTA_LENGTH_BYTE_ARRAY (a syslog header with a pid in each: the length
// repeats with the text around it), the file is smaller for it, and it
// reads back exactly; the default level's file is as before, every such
// column DELTA_LENGTH_BYTE_ARRAY.
func TestPlainWhereSmaller(t *testing.T) {
	tpl := Templates{{1, 1}: "<*> session opened for user <*> by (uid=<*>)"}
	rows := make([]Row, 3000)
	for i := range rows {
		pid := 10000 + (i*7919)%80000
		rows[i] = Row{WALSeq: 1, Index: uint32(i), TS: ns("2026-11-29T00:00:00.010Z") + int64(i)*1e9, TemplateID: 1, TemplateVersion: 1, Source: "file:auth.log",
			Params: []string{fmt.Sprintf("combo sshd(pam_unix)[%d]:", pid), word(i * 104729), "0"}}
	}
	has := func(es []format.Encoding, e format.Encoding) bool { return slices.Contains(es, e) }
	// Not split at the digit runs (kind d): the pid out of p0 makes it a
	// dictionary of one value.
	whole := defaultOptions()
	WithHighCompression(true)(&whole)
	whole.digits = "off"
	hi, err := encode(rows, tpl, &whole)
	if err != nil {
		t.Fatal(err)
	}
	if es := columnEncodings(t, hi.Data, "p0"); !has(es, format.Plain) || has(es, format.DeltaLengthByteArray) || has(es, format.RLEDictionary) {
		t.Errorf("p0 at zstd's best level: encodings %v, want PLAIN", es)
	}
	o := whole
	o.plainTrial = false
	dlba, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	if !has(columnEncodings(t, dlba.Data, "p0"), format.DeltaLengthByteArray) {
		t.Fatal("without the trial p0 is not DELTA_LENGTH_BYTE_ARRAY")
	}
	if len(hi.Data) >= len(dlba.Data) {
		t.Errorf("with the choice %d bytes, every column DELTA_LENGTH_BYTE_ARRAY %d", len(hi.Data), len(dlba.Data))
	}
	busy, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"p0", "p1"} {
		if es := columnEncodings(t, busy.Data, col); !has(es, format.DeltaLengthByteArray) {
			t.Errorf("%s at zstd's default level: encodings %v, want DELTA_LENGTH_BYTE_ARRAY", col, es)
		}
	}
	readsBack(t, tpl, rows, hi.Data, busy.Data)
}

// TestDeltaWhereSmaller: a file written at zstd's best level has an n<j>
// column of a slowly rising counter DELTA_BINARY_PACKED (PLAIN at the
// default level, as before), is smaller for it than with every integer
// column PLAIN, and reads back exactly.
func TestDeltaWhereSmaller(t *testing.T) {
	tpl := Templates{{1, 1}: "block <*> read <*> bytes"}
	rows := make([]Row, 3000)
	for i := range rows {
		rows[i] = Row{WALSeq: 1, Index: uint32(i), TS: ns("2026-11-29T00:00:00.010Z") + int64(i)*1e9, TemplateID: 1, TemplateVersion: 1, Source: "file:io.log",
			Params: []string{fmt.Sprint(1000000 + 3*i + i%2), fmt.Sprint((i * 7919) % 65536)}}
	}
	hi, err := Encode(rows, tpl, WithHighCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	if es := columnEncodings(t, hi.Data, "n0"); !slices.Contains(es, format.DeltaBinaryPacked) {
		t.Errorf("n0 (a counter) at zstd's best level: encodings %v, want DELTA_BINARY_PACKED", es)
	}
	o := defaultOptions()
	WithHighCompression(true)(&o)
	o.intTrial = false
	plain, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	if len(hi.Data) >= len(plain.Data) {
		t.Errorf("with the choice %d bytes, every integer column as before %d", len(hi.Data), len(plain.Data))
	}
	busy, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if es := columnEncodings(t, busy.Data, "n0"); slices.Contains(es, format.DeltaBinaryPacked) {
		t.Errorf("n0 at zstd's default level: encodings %v, want PLAIN", es)
	}
	readsBack(t, tpl, rows, hi.Data, busy.Data)
}

// TestMoreAtBestLevel: the more column (here the 33rd and later string
// parameters of each row) is compressed at zstd's best level in a file
// written so, smaller than the default level's, and reads back exactly.
func TestMoreAtBestLevel(t *testing.T) {
	const n = 40
	tpl := Templates{{1, 1}: strings.Repeat("<*> ", n) + "done"}
	rows := make([]Row, 2000)
	for i := range rows {
		params := make([]string, n)
		for j := range params {
			params[j] = "lib" + word((i*7919+j*104729)%1500) + "-common:amd64 (" + fmt.Sprint((i*j)%97) + ".2-1)"
		}
		rows[i] = Row{WALSeq: 1, Index: uint32(i), TS: ns("2026-11-29T00:00:00.010Z") + int64(i)*1e9, TemplateID: 1, TemplateVersion: 1, Source: "file:apt.log", Params: params}
	}
	moreBytes := func(data []byte) int64 {
		n, ok := columnSizes(t, data)[colMore]
		if !ok {
			t.Fatal("no more column")
		}
		return n
	}
	hi, err := Encode(rows, tpl, WithHighCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	busy, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	// Encode's trials at the best level may move more parameters into
	// more (every one, here): compare the column with the same values in
	// it, written once at each level.
	o := defaultOptions()
	WithHighCompression(true)(&o)
	o.moreText = "off" // the list, as the default level writes it
	one, _, err := encodeOnce(rows, tpl, &o, splitNone, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, b := moreBytes(one.Data), moreBytes(busy.Data); h >= b {
		t.Errorf("more at zstd's best level %d bytes, at its default %d", h, b)
	}
	readsBack(t, tpl, rows, hi.Data, one.Data, busy.Data)
}

// readsBack checks that each file decodes to rows, every line rendered as
// renderRow renders it, and no row missing or extra.
func readsBack(t *testing.T, tpl Templates, rows []Row, files ...[]byte) {
	t.Helper()
	for f, data := range files {
		recs, err := Decode(data, tpl)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(rows) {
			t.Fatalf("file %d: decoded %d rows, want %d", f, len(recs), len(rows))
		}
		for i, r := range recs {
			if want := renderRow(t, tpl, rows[i]); string(r.Line) != want {
				t.Fatalf("file %d: line %d = %q, want %q", f, i, r.Line, want)
			}
		}
	}
}
