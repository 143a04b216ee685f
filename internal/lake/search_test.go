package lake_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	quarryql "github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// searchLake is a lake of two tenants with v2 and v3 files side by side:
// named parameters, a catch-all template, a changed template, two dates.
func searchLake(t *testing.T) *fixture {
	f := newFixture(t)
	texts := recfile.Templates{
		{ID: 1, Version: 1}: "GET <*> status=<*> took <*>ms",
		{ID: 2, Version: 1}: "user <*> logged in from <*>",
		{ID: 2, Version: 2}: "user <*> logged <*> from <*>",
		{ID: 3, Version: 1}: "<*>",
		{ID: 4, Version: 1}: "disk full",
	}
	var rows []lake.TemplateRow
	for k, text := range texts {
		rows = append(rows, lake.TemplateRow{TemplateID: int64(k.ID), Tenant: "acme", Version: int32(k.Version), Template: text, Kind: "created", WALSeq: 1})
	}
	rows = append(rows, lake.TemplateRow{TemplateID: 5, Tenant: "globex", Version: 1, Template: "GET <*> status=<*> took <*>ms", Kind: "created", WALSeq: 1})
	f.commit(f.tpl, 1, f.templatesFile("w1", rows))
	v2 := f.recordsFile("acme", "2026-01-01", "w1", []lake.RecordRow{
		rec(1, 0, "2026-01-01T10:00:00Z", 1, 1, "/a", "200", "12"),
		rec(1, 1, "2026-01-01T10:01:00Z", 2, 1, "alice", "10.0.0.1"),
		rec(3, 0, "2026-01-01T10:07:00Z", 1, 1, "/b", "404", "250"),
		rec(3, 1, "2026-01-01T10:08:00Z", 3, 1, "error: out of memory"),
	})
	at := func(s string) int64 { return ts(s) * 1000 }
	v3 := f.v3File("acme", "2026-01-02", "w2", []recfile.Row{
		{WALSeq: 2, Index: 0, TS: at("2026-01-02T00:00:01Z"), TemplateID: 1, TemplateVersion: 1, Source: "web", Params: []string{"/c", "500", "1200"}},
		{WALSeq: 2, Index: 1, TS: at("2026-01-02T00:02:00Z"), TemplateID: 2, TemplateVersion: 2, Source: "web", Params: []string{"bob", "out", "10.0.0.2"},
			Attrs: []streams.Attr{{Key: "host", Value: "h2"}}},
		{WALSeq: 4, Index: 0, TS: at("2026-01-02T00:06:00Z"), TemplateID: 4, TemplateVersion: 1, Source: "web"},
		{WALSeq: 4, Index: 1, TS: at("2026-01-02T00:07:00Z"), TemplateID: 3, TemplateVersion: 1, Source: "web", Params: []string{"error: disk \xff"}},
		{WALSeq: 5, Index: 0, TS: at("2026-01-02T00:08:00Z"), TemplateID: 1, TemplateVersion: 1, Source: "web", Params: []string{"/a", "404", "7"}},
	}, texts)
	g := f.v3File("globex", "2026-01-01", "w3", []recfile.Row{
		{WALSeq: 6, TS: at("2026-01-01T12:00:00Z"), TemplateID: 5, TemplateVersion: 1, Source: "api", Params: []string{"/g", "503", "9"}},
	}, recfile.Templates{{ID: 5, Version: 1}: "GET <*> status=<*> took <*>ms"})
	f.commit(f.rec, 6, v2, v3, g)
	return f
}

// reference runs q the naive way: every record of the lake through
// Query, then Query.Match on it (no plan, no pruning).
func reference(t *testing.T, l *lake.Lake, q *quarryql.Query) (lines []string, rows []quarryql.Row) {
	t.Helper()
	infos, err := l.Templates(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	text := map[string]string{}
	for _, ti := range infos {
		text[fmt.Sprint(ti.Tenant, ti.TemplateID, ti.Version)] = ti.Text
	}
	agg := q.NewAggregator()
	err = l.Query(context.Background(), lake.Filter{}, func(r lake.Record) error {
		qr := quarryql.Record{Tenant: r.Tenant, Source: r.Source, TS: r.TS, TemplateID: r.TemplateID, TemplateVersion: r.TemplateVersion,
			Template: text[fmt.Sprint(r.Tenant, r.TemplateID, r.TemplateVersion)], Params: r.Params, Attrs: r.Attrs, Line: []byte(r.Line)}
		if !q.Match(&qr) {
			return nil
		}
		if agg != nil {
			agg.Add(&qr)
			return nil
		}
		if q.Limit() == 0 || len(lines) < q.Limit() {
			lines = append(lines, fmt.Sprintf("%d.%d %s %s", r.WALSeq, r.Index, r.Tenant, r.Line))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if agg != nil {
		rows = agg.Rows()
		if len(rows) == 0 && len(agg.Header()) == 1 {
			rows = []quarryql.Row{{Count: 0}} // Aggregate's: a bare count of nothing is 0
		}
	}
	return lines, rows
}

// searchLines returns Search's records as "wal_seq.index tenant line",
// after checking that SearchRaw writes the same lines, byte for byte, in
// the same order.
func searchLines(t *testing.T, l *lake.Lake, q *quarryql.Query, opts lake.SearchOptions) []string {
	t.Helper()
	var out []string
	var want bytes.Buffer
	err := l.Search(context.Background(), q, opts, func(r lake.Record) error {
		out = append(out, fmt.Sprintf("%d.%d %s %s", r.WALSeq, r.Index, r.Tenant, r.Line))
		return lake.WriteRaw(&want, r)
	})
	if err != nil {
		t.Fatalf("search %q: %v", q.Source(), err)
	}
	var raw bytes.Buffer
	if err := l.SearchRaw(context.Background(), q, opts, &raw); err != nil {
		t.Fatalf("search %q raw: %v", q.Source(), err)
	}
	if !bytes.Equal(raw.Bytes(), want.Bytes()) {
		t.Fatalf("search %q raw:\n%q\nwant (Search, WriteRaw)\n%q", q.Source(), raw.Bytes(), want.Bytes())
	}
	return out
}

// TestSearchAgreesWithNaive: for each query, Search (plan, pruning,
// projected decode, parallel files, ordered merge) returns exactly the
// lines, in WAL order, or the rows that the naive evaluation of the whole
// query on every rendered record gives, over v2 and v3 files.
func TestSearchAgreesWithNaive(t *testing.T) {
	f := searchLake(t)
	l := lake.Open(f.store)
	for _, src := range []string{
		"", "*", "GET", "status", "alice OR bob", "-GET", "NOT user error", "(GET OR user) -alice", `"logged in"`, `"took 1200ms"`,
		"GET*404", "/st[a]tus=4\\d\\d/", "/^error/", "/(?i)DISK/", "template:1", "template:3 error", "-template:1", "tenant:globex",
		"tenant:acme GET", "source:web", "source:w*", "attrs.host:h2", "-attrs.host:*", "status=404", "status!=404", "status>=500",
		"param[2]>100", "param[0]=/a", "param[5]=x", "took<10", "ts:>=2026-01-02", "ts:2026-01-01T10:07", "since:2026-01-02T00:05:00Z error",
		"disk", `"disk full"`, "full", "nothing-matches-this",
		// Needles: phrases only a parameter can hold (rows ruled out by
		// their parameters' values before a line is rendered).
		"bob", "0.0.2", "10.0.0", `"/c"`, `"/a"`, "120", "bob 10.0.0.2", "ory", "bob -out", `"d out"`, "\xff", "k \xff",
		"| count", "| count by template", "| count by 5m", "| count by tenant, template", "GET | count by status", "| top 2 status",
		"| top param[0]", "error OR status=404 | count by 1h", "| count by source | limit 1", "| limit 3", "GET | limit 2",
	} {
		t.Run(src, func(t *testing.T) {
			q := quarryql.MustCompile(src)
			wantLines, wantRows := reference(t, l, q)
			if q.Aggregates() {
				got, err := l.Aggregate(context.Background(), q, lake.SearchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(wantRows) {
					t.Fatalf("rows\n got %v\nwant %v", got, wantRows)
				}
				return
			}
			for _, workers := range []int{1, 3} {
				// LineOnly with 3 workers: source and attrs are read only for the residual.
				got := searchLines(t, l, q, lake.SearchOptions{Workers: workers, LineOnly: workers == 3})
				if !slices.Equal(got, wantLines) {
					t.Fatalf("workers %d: lines\n got %q\nwant %q", workers, got, wantLines)
				}
			}
		})
	}
}

func TestSearchOptions(t *testing.T) {
	f := searchLake(t)
	l := lake.Open(f.store)
	day := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	for _, c := range []struct {
		name string
		q    string
		opts lake.SearchOptions
		want []string
	}{
		{"tenant option", "GET", lake.SearchOptions{Tenant: "globex"}, []string{"6.0 globex GET /g status=503 took 9ms"}},
		{"tenant option against tenant term", "tenant:acme", lake.SearchOptions{Tenant: "globex"}, nil},
		{"limit option", "GET", lake.SearchOptions{Limit: 2}, []string{"1.0 acme GET /a status=200 took 12ms", "2.0 acme GET /c status=500 took 1200ms"}},
		{"limit option below the query's", "GET | limit 1", lake.SearchOptions{Limit: 3}, []string{"1.0 acme GET /a status=200 took 12ms"}},
		{"since and until", "", lake.SearchOptions{Since: day("2026-01-01T10:07:00Z"), Until: day("2026-01-02T00:02:00Z")}, []string{
			"2.0 acme GET /c status=500 took 1200ms", "3.0 acme GET /b status=404 took 250ms", "3.1 acme error: out of memory",
			"6.0 globex GET /g status=503 took 9ms"}},
		{"since and query range intersect", "ts:<2026-01-01T10:01:00Z", lake.SearchOptions{Since: day("2026-01-01T10:00:00Z")}, []string{
			"1.0 acme GET /a status=200 took 12ms"}},
		{"after: the next page", "GET", lake.SearchOptions{After: &lake.Position{WALSeq: 2, Index: 0}, Limit: 2}, []string{
			"3.0 acme GET /b status=404 took 250ms", "5.0 acme GET /a status=404 took 7ms"}},
		{"template id", "", lake.SearchOptions{TemplateID: 4}, []string{"4.0 acme disk full"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := searchLines(t, l, quarryql.MustCompile(c.q), c.opts)
			if !slices.Equal(got, c.want) {
				t.Fatalf("got\n%q\nwant\n%q", got, c.want)
			}
		})
	}
	if err := l.Search(f.ctx, quarryql.MustCompile("| count"), lake.SearchOptions{}, func(lake.Record) error { return nil }); !errors.Is(err, lake.ErrAggregate) {
		t.Errorf("Search of a count: %v, want ErrAggregate", err)
	}
	if _, err := l.Aggregate(f.ctx, quarryql.MustCompile("x"), lake.SearchOptions{}); !errors.Is(err, lake.ErrAggregate) {
		t.Errorf("Aggregate of lines: %v, want ErrAggregate", err)
	}
	stop := errors.New("stop")
	n := 0
	err := l.Search(f.ctx, quarryql.MustCompile(""), lake.SearchOptions{Workers: 1}, func(lake.Record) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("callback error: %v after %d records, want stop after 1", err, n)
	}
}

// TestSearchPrunes: files that stats, partitions or the plan rule out are
// never opened: each here is garbage that would fail the search if read.
func TestSearchPrunes(t *testing.T) {
	f := searchLake(t)
	junk := func(tenant, date, writer string, stats string) delta.Add {
		rel := lake.RecordsFilePath(tenant, date, lake.FileName(100, 100, writer))
		if err := f.store.Put(f.ctx, f.rec.FileKey(rel), []byte("not parquet")); err != nil {
			t.Fatal(err)
		}
		return delta.Add{Path: rel, PartitionValues: map[string]string{"tenant": tenant, "date": date}, Size: 11,
			ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: stats}
	}
	stats := func(tplLo, tplHi int, tsLo, tsHi string) string {
		return fmt.Sprintf(`{"numRecords":1,"minValues":{"wal_seq":100,"template_id":%d,"ts":%q},"maxValues":{"wal_seq":100,"template_id":%d,"ts":%q}}`,
			tplLo, tsLo, tplHi, tsHi)
	}
	f.commit(f.rec, 100,
		junk("acme", "2026-01-05", "j1", stats(1, 4, "2026-01-05T00:00:00.000Z", "2026-01-05T01:00:00.000Z")),
		junk("acme", "2026-01-02", "j2", stats(4, 4, "2026-01-02T05:00:00.000Z", "2026-01-02T06:00:00.000Z")),
		junk("acme", "2026-01-02", "j3", stats(7, 9, "2026-01-02T00:00:00.000Z", "2026-01-02T00:10:00.000Z")),
		junk("other", "2026-01-02", "j4", stats(1, 1, "2026-01-02T00:00:00.000Z", "2026-01-02T00:10:00.000Z")),
	)
	l := lake.Open(f.store)
	for _, c := range []struct {
		q    string
		opts lake.SearchOptions
		want int
	}{
		// j1 by its date, j2 by its ts stats, j3 by template ids no acme template has, j4 by tenant.
		{"ts:<2026-01-02T04:00:00Z", lake.SearchOptions{Tenant: "acme"}, 9},
		// j4: tenant other has no template the plan may match; j2: "disk full" cannot hold GET.
		{"GET ts:<2026-01-02T04:00:00Z", lake.SearchOptions{}, 5},
		// Only template 1 names a parameter status: j2 (template 4) and j3 are skipped by template id.
		{"status>=500 tenant:acme", lake.SearchOptions{Until: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)}, 1},
	} {
		q := quarryql.MustCompile(c.q)
		opts := c.opts
		n := 0
		err := l.Search(f.ctx, q, opts, func(lake.Record) error { n++; return nil })
		if err != nil || n != c.want {
			t.Errorf("search %q %+v: %d records, err %v; want %d and no error (a pruned file was read?)", c.q, opts, n, err, c.want)
		}
	}
}

// TestSearchMergedTemplates: template:N and SearchOptions.TemplateID select
// a template with every template merged into it, and a count by template
// counts each record under its own id.
func TestSearchMergedTemplates(t *testing.T) {
	f := newFixture(t)
	f.commit(f.tpl, 4, f.templatesFile("enc1", []lake.TemplateRow{
		{TemplateID: 1, Tenant: "acme", Version: 1, Template: "service alpha started", Kind: "created", WALSeq: 1},
		{TemplateID: 2, Tenant: "acme", Version: 1, Template: "service beta started", Kind: "created", WALSeq: 1},
		{TemplateID: 3, Tenant: "acme", Version: 1, Template: "service gamma started", Kind: "created", WALSeq: 2},
		{TemplateID: 1, Tenant: "acme", Version: 2, Template: "service <*> started", Kind: "changed", Previous: "service alpha started", WALSeq: 3},
		{TemplateID: 3, Tenant: "acme", Version: 1, Template: "service <*> started", Kind: "merged", Previous: "service gamma started", MergedInto: 2, WALSeq: 3},
		{TemplateID: 2, Tenant: "acme", Version: 1, Template: "service <*> started", Kind: "merged", Previous: "service beta started", MergedInto: 1, WALSeq: 3},
		{TemplateID: 4, Tenant: "acme", Version: 1, Template: "other", Kind: "created", WALSeq: 4},
	}))
	f.commit(f.rec, 4, f.recordsFile("acme", "2026-01-01", "enc1", []lake.RecordRow{
		rec(1, 0, "2026-01-01T00:00:01Z", 1, 1), rec(1, 1, "2026-01-01T00:00:02Z", 2, 1), rec(2, 0, "2026-01-01T00:00:03Z", 3, 1),
		rec(3, 0, "2026-01-01T00:00:04Z", 1, 2, "delta"), rec(4, 0, "2026-01-01T00:00:05Z", 4, 1),
	}))
	l := lake.Open(f.store)
	want := []string{"1.0 acme service alpha started", "1.1 acme service beta started", "2.0 acme service gamma started", "3.0 acme service delta started"}
	if got := searchLines(t, l, quarryql.MustCompile("template:1"), lake.SearchOptions{}); !slices.Equal(got, want) {
		t.Errorf("template:1\n got %q\nwant %q", got, want)
	}
	if got := searchLines(t, l, quarryql.MustCompile(""), lake.SearchOptions{TemplateID: 1}); !slices.Equal(got, want) {
		t.Errorf("TemplateID 1\n got %q\nwant %q", got, want)
	}
	// Template.Canonical is the survivor at the end of the merges: 3 went
	// into 2 and 2 into 1, so template:2 is template 2's own records.
	if got := searchLines(t, l, quarryql.MustCompile("template:2"), lake.SearchOptions{}); !slices.Equal(got, want[1:2]) {
		t.Errorf("template:2: got %q", got)
	}
	rows, err := l.Aggregate(f.ctx, quarryql.MustCompile("template:1 | count by template"), lake.SearchOptions{})
	if err != nil || fmt.Sprint(rows) != "[{[1] 2} {[2] 1} {[3] 1}]" {
		t.Errorf("count by template: %v %v", rows, err)
	}
}

// TestSearchTemplateMissing: a record whose template version the templates
// table lacks is an error (ErrTemplateMissing) in a v3 file and in a v2
// file, for lines and for counts, never a silent skip. (A file its stats
// prune is not read, as with Query's template filter.)
func TestSearchTemplateMissing(t *testing.T) {
	for _, v := range []string{"v2", "v3"} {
		t.Run(v, func(t *testing.T) {
			f := newFixture(t)
			f.commit(f.tpl, 1, f.templatesFile("w1", []lake.TemplateRow{{TemplateID: 1, Tenant: "acme", Version: 1, Template: "a <*>", Kind: "created", WALSeq: 1}}))
			if v == "v2" {
				f.commit(f.rec, 1, f.recordsFile("acme", "2026-01-01", "w1", []lake.RecordRow{rec(1, 0, "2026-01-01T00:00:00Z", 1, 1, "y"),
					rec(1, 1, "2026-01-01T00:00:00Z", 9, 1, "x")}))
			} else {
				f.commit(f.rec, 1, f.v3File("acme", "2026-01-01", "w1", []recfile.Row{
					{WALSeq: 1, TS: ts("2026-01-01T00:00:00Z") * 1000, TemplateID: 1, TemplateVersion: 1, Source: "s", Params: []string{"y"}},
					{WALSeq: 1, Index: 1, TS: ts("2026-01-01T00:00:00Z") * 1000, TemplateID: 9, TemplateVersion: 1, Source: "s", Params: []string{"x"}},
				}, recfile.Templates{{ID: 1, Version: 1}: "a <*>", {ID: 9, Version: 1}: "lost <*>"}))
			}
			l := lake.Open(f.store)
			err := l.Search(f.ctx, quarryql.MustCompile(""), lake.SearchOptions{}, func(lake.Record) error { return nil })
			if !errors.Is(err, lake.ErrTemplateMissing) {
				t.Errorf("search: %v, want ErrTemplateMissing", err)
			}
			if _, err := l.Aggregate(f.ctx, quarryql.MustCompile("| count by template"), lake.SearchOptions{}); !errors.Is(err, lake.ErrTemplateMissing) {
				t.Errorf("count: %v, want ErrTemplateMissing", err)
			}
		})
	}
}

// TestSearchDecodesEveryColumn: the projected decode renders what Query
// renders for parameters past the 32 slot columns (more), bytes that are
// not UTF-8 (b<j>), numbers, a timestamp and attributes.
func TestSearchDecodesEveryColumn(t *testing.T) {
	f := newFixture(t)
	many := strings.TrimSpace(strings.Repeat("<*> ", 40))
	texts := recfile.Templates{{ID: 1, Version: 1}: many, {ID: 2, Version: 1}: "<*> at <*> from <*> took <*> id <*>"}
	f.commit(f.tpl, 1, f.templatesFile("w1", []lake.TemplateRow{
		{TemplateID: 1, Tenant: "acme", Version: 1, Template: texts[recfile.Key{ID: 1, Version: 1}], Kind: "created", WALSeq: 1},
		{TemplateID: 2, Tenant: "acme", Version: 1, Template: texts[recfile.Key{ID: 2, Version: 1}], Kind: "created", WALSeq: 1},
	}))
	var params []string
	for i := range 40 {
		params = append(params, fmt.Sprint("p", i, "\xff"[:i%2]))
	}
	at := time.Date(2026, 1, 1, 10, 0, 2, 250_000_000, time.UTC)
	f.commit(f.rec, 2, f.v3File("acme", "2026-01-01", "w1", []recfile.Row{
		{WALSeq: 1, TS: at.UnixNano(), TemplateID: 1, TemplateVersion: 1, Source: "s", Params: params},
		{WALSeq: 2, TS: at.UnixNano(), TemplateID: 2, TemplateVersion: 1, Source: "s", Params: []string{"caf\xe9", at.Format(time.RFC3339Nano), "10.1.2.3", "1.50", "3f9a"},
			Attrs: []streams.Attr{{Key: "k", Value: "v"}}},
	}, texts))
	l := lake.Open(f.store)
	var want, got []lake.Record
	if err := l.Query(f.ctx, lake.Filter{}, func(r lake.Record) error { want = append(want, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := l.Search(f.ctx, quarryql.MustCompile(""), lake.SearchOptions{}, func(r lake.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("search\n%+v\nquery\n%+v", got, want)
	}
	if !strings.Contains(got[0].Line, "p39") || got[1].Attrs["k"] != "v" {
		t.Fatalf("lines %q %v", got[0].Line, got[1].Attrs)
	}
	// SearchRaw renders the same columns straight into its output.
	var raw bytes.Buffer
	if err := l.SearchRaw(f.ctx, quarryql.MustCompile(""), lake.SearchOptions{}, &raw); err != nil {
		t.Fatal(err)
	}
	if w := want[0].Line + "\n" + want[1].Line + "\n"; raw.String() != w {
		t.Fatalf("raw\n%q\nwant\n%q", raw.String(), w)
	}
}

// TestSearchRawManyJobs: SearchRaw's renderers render jobs of rows from
// several files whose WAL ranges interleave row by row (each job a run of
// short runs of every file), or, without a limit, each file's rows ahead
// in runs of aheadRows (three a file here, written in short pieces between
// the other files'; the third started only as the merge writes the first,
// aheadRuns ahead), and the lines come out in WAL order as Search returns
// them, for the whole lake, a limit that ends inside a job, and a time
// range; a writer that fails stops the search with its error.
func TestSearchRawManyJobs(t *testing.T) {
	f := newFixture(t)
	texts := recfile.Templates{
		{ID: 1, Version: 1}: "GET <*> status=<*> took <*>ms",
		{ID: 2, Version: 1}: "user <*> logged in from <*>",
		{ID: 3, Version: 1}: "<*>",
	}
	var trows []lake.TemplateRow
	for k, text := range texts {
		trows = append(trows, lake.TemplateRow{TemplateID: int64(k.ID), Tenant: "acme", Version: int32(k.Version), Template: text, Kind: "created", WALSeq: 1})
	}
	f.commit(f.tpl, 1, f.templatesFile("w1", trows))
	const files, perFile = 3, 17000
	at := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	var adds []delta.Add
	for k := range files {
		var rows []recfile.Row
		for i := range perFile {
			n := i*files + k // file k holds every files-th row of the WAL
			r := recfile.Row{WALSeq: uint64(n/7 + 1), Index: uint32(n % 7), TS: at.Add(time.Duration(n) * time.Second).UnixNano(), Source: "web"}
			switch n % 3 {
			case 0:
				r.TemplateID, r.Params = 1, []string{fmt.Sprint("/p", n%97), fmt.Sprint(200 + n%5), fmt.Sprint(n % 1000)}
			case 1:
				r.TemplateID, r.Params = 2, []string{fmt.Sprint("u", n%13), fmt.Sprintf("10.0.%d.%d", n%7, n%251)}
			default:
				r.TemplateID, r.Params = 3, []string{fmt.Sprintf("%s error %d", at.Add(time.Duration(n)*time.Second).Format(time.RFC3339), n)}
			}
			r.TemplateVersion = 1
			rows = append(rows, r)
		}
		adds = append(adds, f.v3File("acme", "2026-01-02", fmt.Sprint("w", k), rows, texts))
	}
	f.commit(f.rec, files*perFile, adds...)
	l := lake.Open(f.store)
	all := searchLines(t, l, quarryql.MustCompile(""), lake.SearchOptions{})
	if len(all) != files*perFile {
		t.Fatalf("%d lines, want %d", len(all), files*perFile)
	}
	for _, opts := range []lake.SearchOptions{{Limit: 5000}, {Since: at.Add(1000 * time.Second), Until: at.Add(20000 * time.Second)}} {
		got := searchLines(t, l, quarryql.MustCompile(""), opts)
		if len(got) == 0 || len(got) >= len(all) {
			t.Fatalf("%+v: %d lines of %d", opts, len(got), len(all))
		}
	}
	w := &failingWriter{left: 3}
	err := l.SearchRaw(f.ctx, quarryql.MustCompile(""), lake.SearchOptions{}, w)
	if !errors.Is(err, errWriter) || w.left != -1 {
		t.Fatalf("SearchRaw to a failing writer: %v after %d writes left", err, w.left)
	}
}

var errWriter = errors.New("writer closed")

// failingWriter takes left writes, then fails every one.
type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.left--; w.left < 0 {
		w.left = -1
		return 0, errWriter
	}
	return len(p), nil
}

// TestSearchRawNeedleReadsTextFirst: a term that can only lie in a
// parameter (a needle) is searched in the text columns first; the
// columns that render nothing it can be in (wal_seq, record_index, ts)
// are read only for the rows that may hold it. A file whose chunks of
// those columns are overwritten answers a needle its parameters' bytes do
// not rule out (every byte of it is in them) and no row holds, with no
// row and no error, where a search that reads them fails.
func TestSearchRawNeedleReadsTextFirst(t *testing.T) {
	f := newFixture(t)
	texts := recfile.Templates{{ID: 1, Version: 1}: "job <*> done in <*> ms"}
	f.commit(f.tpl, 1, f.templatesFile("w1", []lake.TemplateRow{
		{TemplateID: 1, Tenant: "acme", Version: 1, Template: texts[recfile.Key{ID: 1, Version: 1}], Kind: "created", WALSeq: 1}}))
	var rows []recfile.Row
	base := ts("2026-01-02T00:00:00Z") * 1000
	for i := range 300 {
		rows = append(rows, recfile.Row{WALSeq: 2 + uint64(i/100), Index: uint32(i % 100), TS: base + int64(i)*1e9, TemplateID: 1, TemplateVersion: 1,
			Source: "web", Params: []string{fmt.Sprintf("beta-%d", i), fmt.Sprint(i * 7)}})
	}
	add := f.v3File("acme", "2026-01-02", "w2", rows, texts)
	f.commit(f.rec, 4, add)
	search := func(q string) (string, error) {
		var out bytes.Buffer
		err := lake.Open(f.store).SearchRaw(f.ctx, quarryql.MustCompile(q), lake.SearchOptions{}, &out)
		return out.String(), err
	}
	if out, err := search("beta-123"); err != nil || out != "job beta-123 done in 861 ms\n" {
		t.Fatalf("beta-123: %q, %v", out, err)
	}
	key := f.rec.FileKey(add.Path)
	data, err := f.store.Get(f.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	broken := 0
	for _, rg := range pf.Metadata().RowGroups {
		for _, c := range rg.Columns {
			switch c.MetaData.PathInSchema[0] {
			case "wal_seq", "record_index", "ts":
				start := c.MetaData.DataPageOffset
				if d := c.MetaData.DictionaryPageOffset; d > 0 && d < start {
					start = d
				}
				for b := start; b < start+c.MetaData.TotalCompressedSize; b++ {
					data[b] = 0xA5
				}
				broken++
			}
		}
	}
	if broken != 3 {
		t.Fatalf("%d chunks overwritten, want 3", broken)
	}
	if err := f.store.Put(f.ctx, key, data); err != nil {
		t.Fatal(err)
	}
	if _, err := search("job"); err == nil {
		t.Fatal("the broken file renders")
	}
	// t, a, - and 9 are all in the parameters, ta-99999 in none.
	if out, err := search("ta-99999"); err != nil || out != "" {
		t.Fatalf("ta-99999: %q, %v; want nothing, no error", out, err)
	}
}
