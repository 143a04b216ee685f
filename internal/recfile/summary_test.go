package recfile

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// TestSummary: Encode writes a summary whose entries are, per template
// version of the file in file order, the row count and
// exactly the bytes of the rows' parameters (invalid UTF-8 included) when
// it has enough rows for a byte set.
func TestSummary(t *testing.T) {
	tpl := Templates{{ID: 1, Version: 1}: "a <*> b <*>", {ID: 1, Version: 2}: "a <*>", {ID: 7, Version: 1}: "none"}
	rows := []Row{
		{WALSeq: 1, TS: 5_000_000, TemplateID: 7, TemplateVersion: 1},
		{WALSeq: 1, Index: 1, TS: 3_000_999, TemplateID: 1, TemplateVersion: 1, Params: []string{"xy", "\xff1"}},
		{WALSeq: 2, TS: 9_000_000, TemplateID: 1, TemplateVersion: 2, Params: []string{"Q"}},
		{WALSeq: 3, TS: -2_500, TemplateID: 1, TemplateVersion: 1, Params: []string{"", "z"}},
	}
	// Version 1 of template 1 gets enough rows for a byte set.
	for i := range paramBytesMinRows {
		rows = append(rows, Row{WALSeq: uint64(10 + i), TS: 1000, TemplateID: 1, TemplateVersion: 1, Params: []string{"x", "y"}})
	}
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := FileSummary(pf)
	if err != nil {
		t.Fatal(err)
	}
	chars := func(s string) (c [4]uint64) {
		for i := 0; i < len(s); i++ {
			c[s[i]>>6] |= 1 << (s[i] & 63)
		}
		return c
	}
	want := Summary{
		{Key: Key{1, 1}, Rows: 2 + paramBytesMinRows, ParamBytes: chars("xy\xff1z")},
		{Key: Key{1, 2}, Rows: 1, AnyBytes: true}, // too few rows for a byte set
		{Key: Key{7, 1}, Rows: 1, AnyBytes: true},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("summary\n got %v\nwant %v", got, want)
	}
	again, err := ParseSummary(encodeSummary(want))
	if err != nil || fmt.Sprint(again) != fmt.Sprint(want) {
		t.Fatalf("round trip: %v %v", again, err)
	}
	// A file without the entry has no summary and no error.
	if s, err := FileSummary(mustOpen(t, writeWithout(t))); s != nil || err != nil {
		t.Fatalf("file without a summary: %v %v", s, err)
	}
}

func mustOpen(t *testing.T, data []byte) *parquet.File {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

func writeWithout(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[struct{ A int64 }](&buf)
	if _, err := w.Write([]struct{ A int64 }{{1}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestParseSummaryRejects: a summary of another version, not a zstd
// frame, truncated, with trailing bytes or a bad mask is an error, never
// a shorter summary.
func TestParseSummaryRejects(t *testing.T) {
	pack := func(v byte, raw []byte) string {
		z, err := codec(zstd.SpeedBestCompression).Encode(nil, raw)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(append([]byte{v}, z...))
	}
	// one entry: id 3, version 1, 4 rows, no byte set
	entry := []byte{1, 3, 1, 4, unknownBytes}
	if s, err := ParseSummary(pack(1, entry)); err != nil || len(s) != 1 || s[0].Key != (Key{3, 1}) || !s[0].AnyBytes {
		t.Fatalf("good summary: %v %v", s, err)
	}
	for name, v := range map[string]string{
		"empty":          "",
		"version 2":      pack(2, entry),
		"not zstd":       base64.StdEncoding.EncodeToString([]byte{1, 1, 3, 1, 4, 16}),
		"truncated":      pack(1, entry[:len(entry)-1]),
		"trailing bytes": pack(1, append(append([]byte{}, entry...), 0)),
		"count too big":  pack(1, []byte{9}),
		"bad mask":       pack(1, append(append([]byte{}, entry[:len(entry)-1]...), unknownBytes|1)),
		"words missing":  pack(1, append(append([]byte{}, entry[:len(entry)-1]...), 1, 0xff)),
		"not base64":     "not base64!",
	} {
		if s, err := ParseSummary(v); err == nil {
			t.Errorf("%s: parsed as %v", name, s)
		}
	}
}

// TestSummaryText7: a summary is written 7 bits a character (valid UTF-8,
// as a Parquet key-value string must be), shorter than base64 of the same
// bytes, and both forms parse; pack7 round-trips any bytes.
func TestSummaryText7(t *testing.T) {
	for n := range 64 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*37 + n*11 + 255*(i%3&1))
		}
		v := pack7(b)
		if v[0] != text7 || !utf8.ValidString(v) || len(v) != 1+(8*n+6)/7 {
			t.Fatalf("%d bytes: %q", n, v)
		}
		for i := 1; i < len(v); i++ {
			if v[i] >= 0x80 {
				t.Fatalf("%d bytes: character %d is %#x", n, i, v[i])
			}
		}
		got, err := unpack7(v[1:])
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%d bytes: unpacked %x %v, want %x", n, got, err, b)
		}
	}
	s := Summary{{Key: Key{1, 1}, Rows: 70, ParamBytes: [4]uint64{1, 0, 7, 0}}, {Key: Key{9, 2}, Rows: 1, AnyBytes: true}}
	v := encodeSummary(s)
	raw, err := unpack7(strings.TrimPrefix(v, string(text7)))
	if v[0] != text7 || err != nil {
		t.Fatalf("summary %q not text7: %v", v, err)
	}
	old := base64.StdEncoding.EncodeToString(raw)
	if len(v) >= len(old) {
		t.Errorf("text7 %d characters, base64 %d", len(v), len(old))
	}
	for _, form := range []string{v, old} {
		if got, err := ParseSummary(form); err != nil || fmt.Sprint(got) != fmt.Sprint(s) {
			t.Errorf("parse %q: %v %v", form, got, err)
		}
	}
	for name, bad := range map[string]string{"not 7-bit": v[:3] + "\x80" + v[4:], "padding bits set": v[:len(v)-1] + "\x7f", "truncated": v[:len(v)-2]} {
		if got, err := ParseSummary(bad); err == nil {
			t.Errorf("%s: parsed as %v", name, got)
		}
	}
}
