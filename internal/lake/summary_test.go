package lake_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	quarryql "github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
)

// rewriteFooter rewrites a Parquet file's footer with edit applied.
func rewriteFooter(t testing.TB, data []byte, edit func(*format.FileMetaData)) []byte {
	t.Helper()
	n := len(data)
	size := int(binary.LittleEndian.Uint32(data[n-8:]))
	start := n - 8 - size
	var md format.FileMetaData
	proto := &thrift.CompactProtocol{}
	if err := thrift.Unmarshal(proto, data[start:n-8], &md); err != nil {
		t.Fatal(err)
	}
	edit(&md)
	meta, err := thrift.Marshal(proto, &md)
	if err != nil {
		t.Fatal(err)
	}
	out := append(slices.Clone(data[:start]), meta...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
	return append(out, "PAR1"...)
}

// withoutSummary is a records file as written before summaries existed.
func withoutSummary(t testing.TB, data []byte) []byte { return withoutKey(t, data, recfile.SummaryKey) }

// withoutKey is data with the footer's key-value entry key taken out; the
// test fails when the file has none.
func withoutKey(t testing.TB, data []byte, key string) []byte {
	t.Helper()
	found := false
	out := rewriteFooter(t, data, func(md *format.FileMetaData) {
		md.KeyValueMetadata = slices.DeleteFunc(md.KeyValueMetadata, func(kv format.KeyValue) bool {
			found = found || kv.Key == key
			return kv.Key == key
		})
	})
	if !found {
		t.Fatalf("the encoder wrote no %s", key)
	}
	return out
}

// corruptRows overwrites every byte between the magic and the footer: the
// footer (and so the summary) still reads, any row read fails.
func corruptRows(data []byte) []byte {
	out := slices.Clone(data)
	n := len(out)
	start := n - 8 - int(binary.LittleEndian.Uint32(out[n-8:]))
	for i := 4; i < start; i++ {
		out[i] = 0xA5
	}
	return out
}

var summaryTexts = recfile.Templates{
	{ID: 1, Version: 1}:  "GET <*> status=<*> took <*>ms",
	{ID: 2, Version: 1}:  "user <*> logged in from <*>",
	{ID: 2, Version: 2}:  "user <*> logged <*> from <*>",
	{ID: 3, Version: 1}:  "<*>",
	{ID: 4, Version: 1}:  "disk full",
	{ID: 5, Version: 1}:  "id=<*> hex=<*>",
	{ID: 6, Version: 1}:  "ERROR [<*>] request <*> failed: java.lang.IllegalStateException",
	{ID: 7, Version: 1}:  "bytes <*> end",
	{ID: 8, Version: 1}:  "<*> <*>",
	{ID: 9, Version: 1}:  "merged <*>",
	{ID: 10, Version: 1}: "ts <*> level=<*>",
}

// summaryRows makes n rows of the templates in ids, WAL sequences from
// seq, times from ts0 one second apart.
func summaryRows(r *rand.Rand, n int, seq uint64, ts0 time.Time, ids ...uint64) []recfile.Row {
	pick := func(s ...string) string { return s[r.IntN(len(s))] }
	num := func(lo, hi int) string { return fmt.Sprint(lo + r.IntN(hi-lo+1)) }
	hex := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "0123456789abcdef"[r.IntN(16)]
		}
		return string(b)
	}
	var out []recfile.Row
	for i := range n {
		id := ids[r.IntN(len(ids))]
		row := recfile.Row{WALSeq: seq + uint64(i/3), Index: uint32(i % 3), TS: ts0.Add(time.Duration(i) * time.Second).UnixNano(),
			TemplateID: id, TemplateVersion: 1, Source: pick("web", "api")}
		switch id {
		case 1:
			row.Params = []string{pick("/a", "/b/c", "/api/v1"), pick("200", "404", "500"), num(1, 2000)}
		case 2:
			row.TemplateVersion = uint32(1 + r.IntN(2))
			if row.TemplateVersion == 1 {
				row.Params = []string{pick("alice", "bob"), "10.0." + num(0, 9) + "." + num(1, 9)}
			} else {
				row.Params = []string{pick("alice", "bob"), pick("in", "out"), "10.0.0." + num(1, 9)}
			}
		case 3:
			row.Params = []string{pick("error: disk \xff", "Exception in thread main", "IllegalState seen", "ok", "status=404 from cache")}
		case 5:
			row.Params = []string{num(1, 99999), hex(8)}
		case 6:
			row.Params = []string{pick("api", "web"), hex(8) + "-" + hex(4)}
		case 7:
			row.Params = []string{pick("\xfe\xff", "ok", "\xffdisk")}
		case 8:
			row.Params = []string{pick("took", "GET", "x"), pick("12ms", "status=4", "y")}
		case 9:
			row.Params = []string{pick("a", "b")}
		case 10:
			row.Params = []string{ts0.Add(time.Duration(i) * time.Second).UTC().Format("2006-01-02T15:04:05.000Z"), pick("INFO", "WARN")}
		}
		out = append(out, row)
	}
	return out
}

// summaryLake writes three v3 files (and one v2 file) of acme, each file's
// data passed through prep; file "b" holds no template with hex or upper
// case parameters.
func summaryLake(t *testing.T, prep func(name string, data []byte) []byte) *fixture {
	return summaryLakeOf(t, prep, func(r *rand.Rand, day1, day2 time.Time) []summaryFile {
		return []summaryFile{
			{"a", "2026-01-01", summaryRows(r, 1500, 10, day1, 1, 2, 3, 5, 6, 7, 8, 9, 10), nil},
			{"b", "2026-01-01", summaryRows(r, 800, 600, day1.Add(time.Hour), 1, 2, 4, 9), nil},
			{"c", "2026-01-02", summaryRows(r, 900, 1000, day2, 4, 5, 6, 8, 10), nil},
		}
	})
}

// summaryFile is a v3 records file of summaryLakeOf.
type summaryFile struct {
	name, date string
	rows       []recfile.Row
	opts       []recfile.Option // the encoder's (default: none)
}

// summaryLakeOf writes the v3 files files gives (and one v2 file) of acme,
// each file's data passed through prep.
func summaryLakeOf(t *testing.T, prep func(name string, data []byte) []byte, files func(r *rand.Rand, day1, day2 time.Time) []summaryFile) *fixture {
	f := newFixture(t)
	var trows []lake.TemplateRow
	for k, text := range summaryTexts {
		trows = append(trows, lake.TemplateRow{TemplateID: int64(k.ID), Tenant: "acme", Version: int32(k.Version), Template: text, Kind: "created", WALSeq: 1})
	}
	trows = append(trows, lake.TemplateRow{TemplateID: 11, Tenant: "acme", Version: 1, Template: "merged <*>", Kind: "merged", WALSeq: 1, MergedInto: 9})
	f.commit(f.tpl, 1, f.templatesFile("w1", trows))
	r := rand.New(rand.NewPCG(12, 12))
	day1 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	day2 := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	file := func(name, date string, rows []recfile.Row, opts []recfile.Option) delta.Add {
		enc, err := recfile.Encode(rows, summaryTexts, opts...)
		if err != nil {
			t.Fatal(err)
		}
		first, last := rows[0].WALSeq, rows[0].WALSeq
		for _, r := range rows {
			first, last = min(first, r.WALSeq), max(last, r.WALSeq)
		}
		rel := lake.RecordsFilePath("acme", date, lake.FileName(first, last, name))
		if err := f.store.Put(f.ctx, f.rec.FileKey(rel), prep(name, enc.Data)); err != nil {
			t.Fatal(err)
		}
		return delta.Add{Path: rel, PartitionValues: map[string]string{"tenant": "acme", "date": date}, Size: int64(len(enc.Data)),
			ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: enc.Stats}
	}
	var adds []delta.Add
	for _, sf := range files(r, day1, day2) {
		adds = append(adds, file(sf.name, sf.date, sf.rows, sf.opts))
	}
	adds = append(adds, f.recordsFile("acme", "2026-01-01", "w2", []lake.RecordRow{
		rec(5, 0, "2026-01-01T10:00:00Z", 1, 1, "/a", "200", "12"),
		rec(6, 1, "2026-01-01T10:01:00Z", 5, 1, "77", "deadbeef"),
	}))
	f.commit(f.rec, 500, adds...)
	return f
}

// summaryQueries exercise every rule the summary feeds: terms inside
// parameters, across a template's text and a parameter, only in literal
// text, invalid UTF-8 parameters, negations, time ranges that cut a file
// and the counts a footer answers.
var summaryQueries = []string{
	"", "GET", "status=4", `"status=40"`, `"took 1"`, `"0ms"`, "12ms", "alice", "ALICE", "/(?i)alice/", "IllegalState",
	"IllegalStateException", `"java.lang"`, "disk", `"disk full"`, "full", "dead", "hex=dead*", "id=12*", `"e: d"`,
	`"logged in"`, "logged", "-GET", "NOT disk", "alice OR dead", "(GET OR user) -alice", "error", "Exception", "/\\d{5}/",
	"ok", `"ok end"`, "bytes", "x", `"took 12ms"`, "/status=4/", "template:9", "template:9 a", "merged", "level=WARN",
	`"2026-01-02T00:00:1"`, "WARN", "ts:>=2026-01-02 dead", "since:2026-01-01T10:02:00Z until:2026-01-01T11:30:00Z disk",
	"nothing-matches-this", "source:api dead",
	"| count", "| count by template", "GET | count by template", "status=404 | count by template", "| count by 1h",
	"ts:>=2026-01-02 | count by template", "since:2026-01-01T10:02:00Z | count by template", "dead | count by template",
	"template:9 | count by template", "-disk | count by template", "| count by source", "alice | count",
}

// searchAll returns a query's lines or rows.
func searchAll(t *testing.T, l *lake.Lake, q *quarryql.Query, opts lake.SearchOptions) string {
	t.Helper()
	if q.Aggregates() {
		rows, err := l.Aggregate(context.Background(), q, opts)
		if err != nil {
			t.Fatalf("aggregate %q: %v", q.Source(), err)
		}
		return fmt.Sprint(rows)
	}
	return fmt.Sprintf("%q", searchLines(t, l, q, opts))
}

// TestSummarySkipsAgreeWithFullScan: with the files' summaries (per
// template ParamBytes, counts and time ranges) every query returns what the
// naive evaluation of every record gives, and what the same files without
// summaries (as written before them) give.
func TestSummarySkipsAgreeWithFullScan(t *testing.T) {
	with := lake.Open(summaryLake(t, func(_ string, d []byte) []byte { return d }).store)
	without := lake.Open(summaryLake(t, func(_ string, d []byte) []byte { return withoutSummary(t, d) }).store)
	day := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	optsList := []lake.SearchOptions{
		{},
		{Workers: 1, LineOnly: true},
		{TemplateID: 9},
		{Since: day("2026-01-01T10:03:00Z"), Until: day("2026-01-02T00:01:00Z")},
		{After: &lake.Position{WALSeq: 150, Index: 1}},
	}
	for _, src := range summaryQueries {
		t.Run(src, func(t *testing.T) {
			q := quarryql.MustCompile(src)
			wantLines, wantRows := reference(t, without, q)
			want := fmt.Sprint(wantRows)
			if !q.Aggregates() {
				want = fmt.Sprintf("%q", wantLines)
			}
			if got := searchAll(t, with, q, lake.SearchOptions{}); got != want {
				t.Fatalf("with summaries\n got %s\nwant %s", got, want)
			}
			for i, opts := range optsList {
				if g, w := searchAll(t, with, q, opts), searchAll(t, without, q, opts); g != w {
					t.Fatalf("options %d: with summaries\n got %s\nwithout\n     %s", i, g, w)
				}
			}
		})
	}
}

// TestSummarySkipsRows: what a file's summary settles is answered without
// reading its rows. The files' rows are overwritten with garbage (the
// footers are intact), so any row read fails the search: a count by
// template, a term no parameter of the file can supply, a time range the
// templates lie outside. Without summaries the same searches read rows and
// fail.
func TestSummarySkipsRows(t *testing.T) {
	intact := lake.Open(summaryLake(t, func(_ string, d []byte) []byte { return d }).store)
	broken := lake.Open(summaryLake(t, func(name string, d []byte) []byte { return corruptRows(d) }).store)
	old := lake.Open(summaryLake(t, func(name string, d []byte) []byte { return corruptRows(withoutSummary(t, d)) }).store)
	for _, src := range []string{"| count by template", "| count", "template:9 | count by template", "zzz-not-there"} {
		q := quarryql.MustCompile(src)
		want := searchAll(t, intact, q, lake.SearchOptions{})
		if got := searchAll(t, broken, q, lake.SearchOptions{}); got != want {
			t.Errorf("%q: got %s, want %s", src, got, want)
		}
		if q.Aggregates() {
			if _, err := old.Aggregate(context.Background(), q, lake.SearchOptions{}); err == nil {
				t.Errorf("%q without summaries read no row", src)
			}
		} else if err := old.Search(context.Background(), q, lake.SearchOptions{}, func(lake.Record) error { return nil }); err == nil {
			t.Errorf("%q without summaries read no row", src)
		}
	}
	// Only file b is broken: "dead" (hex, in files a and c) settles false on
	// every template of b, "disk" does not (b has "disk full").
	onlyB := lake.Open(summaryLake(t, func(name string, d []byte) []byte {
		if name == "b" {
			return corruptRows(d)
		}
		return d
	}).store)
	for _, src := range []string{"dead", "hex=dead*", "IllegalStateException", "dead | count by template", "ts:>=2026-01-02"} {
		q := quarryql.MustCompile(src)
		if got, want := searchAll(t, onlyB, q, lake.SearchOptions{}), searchAll(t, intact, q, lake.SearchOptions{}); got != want {
			t.Errorf("%q: got %s, want %s", src, got, want)
		}
	}
	if err := onlyB.Search(context.Background(), quarryql.MustCompile("disk"), lake.SearchOptions{}, func(lake.Record) error { return nil }); err == nil {
		t.Error(`"disk" did not read file b, whose template 4 is "disk full"`)
	}
}

// TestTemplatesCountFromSummaries: Templates counts a v3 file's records from
// the summary in its footer, reading no row (the rows of broken files are
// unreadable), and the counts are those of the rows; a file without a
// summary is counted from its rows.
func TestTemplatesCountFromSummaries(t *testing.T) {
	counts := func(l *lake.Lake) (string, error) {
		infos, err := l.Templates(context.Background(), "")
		var b []byte
		for _, i := range infos {
			b = fmt.Appendf(b, "%s %d.%d %d\n", i.Tenant, i.TemplateID, i.Version, i.Records)
		}
		return string(b), err
	}
	intact := summaryLake(t, func(_ string, d []byte) []byte { return d })
	want, err := counts(lake.Open(intact.store))
	if err != nil {
		t.Fatal(err)
	}
	if want == "" {
		t.Fatal("nothing counted")
	}
	broken := lake.Open(summaryLake(t, func(_ string, d []byte) []byte { return corruptRows(d) }).store)
	if got, err := counts(broken); err != nil || got != want {
		t.Fatalf("unreadable rows: %v\n%s\nwant\n%s", err, got, want)
	}
	old := lake.Open(summaryLake(t, func(_ string, d []byte) []byte { return withoutSummary(t, d) }).store)
	if got, err := counts(old); err != nil || got != want {
		t.Fatalf("without summaries: %v\n%s\nwant\n%s", err, got, want)
	}
	oldBroken := lake.Open(summaryLake(t, func(_ string, d []byte) []byte { return corruptRows(withoutSummary(t, d)) }).store)
	if _, err := counts(oldBroken); err == nil {
		t.Fatal("files without summaries and with unreadable rows were counted")
	}
}
