package lake_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/quarrylake/quarry/internal/lake"
)

// marshalJSONL is what WriteJSONL wrote through encoding/json before it
// wrote by hand: the reference its bytes must equal.
func marshalJSONL(t testing.TB, r lake.Record) string {
	t.Helper()
	type jsonlRecord struct {
		lake.Record
		LineBase64 string `json:"line_base64,omitempty"`
	}
	if r.Params == nil {
		r.Params = []string{}
	}
	jr := jsonlRecord{Record: r}
	if !utf8.ValidString(r.Line) {
		jr.LineBase64 = base64.StdEncoding.EncodeToString([]byte(r.Line))
	}
	b, err := json.Marshal(jr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func writeJSONL(t testing.TB, r lake.Record) string {
	t.Helper()
	var b bytes.Buffer
	if err := lake.WriteJSONL(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRecordJSONMatchesMarshal(t *testing.T) {
	ts := time.Date(2026, 11, 29, 0, 0, 0, 113e6, time.UTC)
	base := lake.Record{WALSeq: 1, Index: 10, Tenant: "acme", TS: ts, TemplateID: 10, TemplateVersion: 1,
		Params: []string{"2026-11-29T00", "00", "00.113Z", "6db6e4ee"}, Source: "gen-acme",
		Line: "2026-11-29T00:00:00.113Z ERROR request 6db6e4ee failed"}
	with := func(f func(*lake.Record)) lake.Record {
		r := base
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		r    lake.Record
	}{
		{"plain", base},
		{"zero", lake.Record{}},
		{"nil params", with(func(r *lake.Record) { r.Params = nil })},
		{"empty params", with(func(r *lake.Record) { r.Params = []string{} })},
		{"empty param", with(func(r *lake.Record) { r.Params = []string{"", "x"} })},
		{"attrs", with(func(r *lake.Record) { r.Attrs = map[string]string{"z": "1", "a": "<2>", "m": "é\n"} })},
		{"empty attrs", with(func(r *lake.Record) { r.Attrs = map[string]string{} })},
		{"not utf-8", with(func(r *lake.Record) { r.Line, r.Params = "caf\xe9\tx \xff\xfe", []string{"\xe9", "\xff\xfe"} })},
		{"truncated rune", with(func(r *lake.Record) { r.Line = "ab\xe2\x82" })},
		{"controls", with(func(r *lake.Record) { r.Line = "a\x00b\x01\b\f\n\r\t\x1f\x7f\"\\/" })},
		{"html", with(func(r *lake.Record) { r.Line, r.Tenant, r.Source = "<script>&amp;</script>", "t&", "s>" })},
		{"line separators", with(func(r *lake.Record) { r.Line = "a\u2028b\u2029c\u2027\u202a" })},
		{"wide runes", with(func(r *lake.Record) { r.Line = "日本語 😀 \ufffd ü" })},
		{"max numbers", with(func(r *lake.Record) {
			r.WALSeq, r.Index, r.TemplateID, r.TemplateVersion = 1<<64-1, 1<<32-1, 1<<64-1, 1<<32-1
		})},
		{"whole second", with(func(r *lake.Record) { r.TS = time.Date(2005, 6, 3, 15, 42, 50, 0, time.UTC) })},
		{"nanoseconds", with(func(r *lake.Record) { r.TS = time.Date(2005, 6, 3, 15, 42, 50, 675872001, time.UTC) })},
		{"zone", with(func(r *lake.Record) { r.TS = ts.In(time.FixedZone("IST", 5*3600+1800)) })},
		{"west zone", with(func(r *lake.Record) { r.TS = ts.In(time.FixedZone("", -7*3600)) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want := writeJSONL(t, tc.r), marshalJSONL(t, tc.r)
			if got != want {
				t.Errorf("WriteJSONL\n got %s\nwant %s", got, want)
			}
		})
	}
}

// FuzzRecordJSON: for any strings and numbers, WriteJSONL writes what
// encoding/json writes.
func FuzzRecordJSON(f *testing.F) {
	f.Add("line <a> & \"b\"\n", "p\x00", "k", "v\u2028", "t", uint64(7), int64(1764374400113000000))
	f.Add("caf\xe9", "\xff", "", "", "", uint64(0), int64(0))
	f.Add("ab\xe2\x82", "\xed\xa0\x80", "\u2029", "日本", "\x7f", uint64(1<<63), int64(-1))
	f.Fuzz(func(t *testing.T, line, param, key, val, tenant string, seq uint64, nanos int64) {
		r := lake.Record{WALSeq: seq, Index: uint32(seq), Tenant: tenant, TS: time.Unix(0, nanos).UTC(),
			TemplateID: seq >> 3, TemplateVersion: uint32(seq >> 40), Params: []string{param, line},
			Attrs: map[string]string{key: val, val: key}, Source: key, Line: line}
		if got, want := writeJSONL(t, r), marshalJSONL(t, r); got != want {
			t.Errorf("WriteJSONL\n got %q\nwant %q", got, want)
		}
		if got, want := string(lake.AppendJSONString(nil, line)), mustMarshal(t, line); got != want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", line, got, want)
		}
	})
}

func mustMarshal(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAppendJSONStringEveryByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		for _, s := range []string{string(rune(c)), string([]byte{byte(c)}), "a" + string([]byte{byte(c)}) + "b"} {
			if got, want := string(lake.AppendJSONString(nil, s)), mustMarshal(t, s); got != want {
				t.Errorf("AppendJSONString(%q) = %s, want %s", s, got, want)
			}
		}
	}
}

func BenchmarkWriteJSONL(b *testing.B) {
	r := lake.Record{WALSeq: 1, Index: 10, Tenant: "acme", TS: time.Date(2026, 11, 29, 0, 0, 0, 113e6, time.UTC),
		TemplateID: 10, TemplateVersion: 1, Source: "gen-acme",
		Params: []string{"2026-11-29T00", "00", "00.113Z", "6db6e4ee-9136-4efa-9053-8d52b055950b"},
		Line:   "2026-11-29T00:00:00.113Z ERROR [scheduler] request 6db6e4ee-9136-4efa-9053-8d52b055950b failed: java.lang.IllegalStateException: connection closed"}
	var w bytes.Buffer
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			w.Reset()
			_ = lake.WriteJSONL(&w, r)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			w.Reset()
			w.WriteString(marshalJSONL(b, r))
		}
	})
}
