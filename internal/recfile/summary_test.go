package recfile

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestSummary: Encode writes a summary whose entries are, per template
// version of the file in file order, the row count, the ts bounds and
// exactly the bytes of the rows' parameters (invalid UTF-8 included).
func TestSummary(t *testing.T) {
	tpl := Templates{{ID: 1, Version: 1}: "a <*> b <*>", {ID: 1, Version: 2}: "a <*>", {ID: 7, Version: 1}: "none"}
	rows := []Row{
		{WALSeq: 1, TS: 5_000_000, TemplateID: 7, TemplateVersion: 1},
		{WALSeq: 1, Index: 1, TS: 3_000_999, TemplateID: 1, TemplateVersion: 1, Params: []string{"xy", "\xff1"}},
		{WALSeq: 2, TS: 9_000_000, TemplateID: 1, TemplateVersion: 2, Params: []string{"Q"}},
		{WALSeq: 3, TS: -2_500, TemplateID: 1, TemplateVersion: 1, Params: []string{"", "z"}},
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
		{Key: Key{1, 1}, Rows: 2, MinTS: -3, MaxTS: 3000, ParamBytes: chars("xy\xff1z")},
		{Key: Key{1, 2}, Rows: 1, MinTS: 9000, MaxTS: 9000, ParamBytes: chars("Q")},
		{Key: Key{7, 1}, Rows: 1, MinTS: 5000, MaxTS: 5000},
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

// TestParseSummaryRejects: a summary of another version, truncated or with
// trailing bytes is an error, never a shorter summary.
func TestParseSummaryRejects(t *testing.T) {
	good, _ := base64.StdEncoding.DecodeString(encodeSummary(Summary{{Key: Key{3, 1}, Rows: 4, MinTS: 1, MaxTS: 2}}))
	for name, b := range map[string][]byte{
		"empty":          {},
		"version 2":      append([]byte{2}, good[1:]...),
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte{}, good...), 0),
		"count too big":  {1, 9},
	} {
		if s, err := ParseSummary(base64.StdEncoding.EncodeToString(b)); err == nil {
			t.Errorf("%s: parsed as %v", name, s)
		}
	}
	if _, err := ParseSummary("not base64!"); err == nil {
		t.Error("bad base64 parsed")
	}
}
