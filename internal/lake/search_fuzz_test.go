package lake_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/mining"
	quarryql "github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// minedLake commits lines to f as the pipeline would: each line stamped
// by the producer's rule (eventtime.Stamper, one a tenant's source),
// mined by the miner's model, in frames of frame lines taken by the
// tenants in turn, one records file a tenant and UTC day, the templates
// the mining created in the templates table.
func minedLake(t *testing.T, f *fixture, lines []string, frame int, tenants []string, opts ...recfile.Option) {
	t.Helper()
	m, err := mining.New(mining.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	stampers := map[string]*eventtime.Stamper{}
	for _, tenant := range tenants {
		if stampers[tenant], err = eventtime.NewStamper(eventtime.Defaults()); err != nil {
			t.Fatal(err)
		}
	}
	read := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC).UnixNano()
	texts := recfile.Templates{}
	var tplRows []lake.TemplateRow
	type part struct{ tenant, day string }
	parts := map[part][]recfile.Row{}
	var events []mining.Event
	for i, line := range lines {
		tenant := tenants[i/frame%len(tenants)]
		ts, src := stampers[tenant].Stamp(line, read)
		seq := uint64(1 + i/frame)
		var res mining.Result
		res, events = m.Mine(tenant, line, events[:0])
		for _, ev := range events {
			if ev.Kind != mining.EventCreated && ev.Kind != mining.EventChanged {
				continue
			}
			texts[recfile.Key{ID: ev.ID, Version: ev.Version}] = ev.Template
			kind := "created"
			if ev.Kind == mining.EventChanged {
				kind = "changed"
			}
			tplRows = append(tplRows, lake.TemplateRow{TemplateID: int64(ev.ID), Tenant: tenant, Version: int32(ev.Version),
				Template: ev.Template, Kind: kind, WALSeq: int64(seq)})
		}
		p := part{tenant, recfile.DayString(recfile.Day(ts))}
		parts[p] = append(parts[p], recfile.Row{WALSeq: seq, Index: uint32(i % frame), TS: ts, TSSource: streams.TSSource(src),
			TemplateID: res.ID, TemplateVersion: res.Version, Params: res.Params, Source: "file:" + tenant + ".log"})
	}
	last := int64(1 + (len(lines)-1)/frame)
	if len(tplRows) > 0 {
		f.commit(f.tpl, last, f.templatesFile("w1", tplRows))
	}
	var adds []delta.Add
	for p, rows := range parts {
		adds = append(adds, f.v3File(p.tenant, p.day, "w1-"+p.tenant+"-"+p.day, rows, texts, opts...))
	}
	f.commit(f.rec, last, adds...)
}

// FuzzSearchAgreesWithNaive: a query over a lake of any lines, mined and
// encoded as the pipeline does, returns what the naive evaluation returns
// (every record rendered, then Query.Match): the same lines in WAL order,
// the same raw bytes, the same counts. The plan's shortcuts (templates
// taken or skipped by their text, needles that rule rows out by their
// parameters' values, timestamps matched without rendering them, pruning
// by stats) may only ever be faster, never answer differently.
func FuzzSearchAgreesWithNaive(f *testing.F) {
	corpus := strings.Join([]string{
		"2015-10-18 18:01:47,978 INFO dfs.DataNode: Receiving block blk_-1608999687919862906 src: /10.250.19.102:54106",
		"2015-10-18 18:01:48,012 INFO dfs.DataNode: Receiving block blk_7503483334202473044 src: /10.250.10.6:40524",
		"2015-10-19 00:00:01,000 WARN dfs.DataNode: disk full on /data/3 after 1200ms",
		"\tat org.example.Foo.bar(Foo.java:42)",
		"2015-10-19 00:00:02,500 WARN dfs.DataNode: disk full on /data/12 after 7ms",
		"GET /a status=200 took 12ms",
		"GET /c status=500 took 1200ms",
		"caf\xe9 latin-1 \xff",
	}, "\n")
	for _, q := range []string{"Receiving", `"block blk_7"`, "10.250", "18:01:48", "2015-10-19", "disk -full", "/data/1/", "status=500",
		"took<100", "\xff", "| count by template", "120", "blk_* | count", "00:00:0", ",978", "ms", "-GET",
		"tenant:globex disk", "| count by tenant, template", "source:acme*"} {
		f.Add(corpus, q, byte(3))
		f.Add(corpus, q, byte(8+1))
	}
	f.Fuzz(func(t *testing.T, text, src string, opt byte) {
		q, err := quarryql.Compile(src)
		if err != nil {
			return
		}
		lines := strings.Split(text, "\n")
		if len(lines) > 64 {
			lines = lines[:64]
		}
		fx := newFixture(t)
		var opts []recfile.Option
		if opt&4 != 0 {
			opts = append(opts, recfile.WithHighCompression(true))
		}
		tenants := []string{"acme"}
		if opt&8 != 0 {
			tenants = append(tenants, "globex")
		}
		minedLake(t, fx, lines, 1+int(opt&3), tenants, opts...)
		l := lake.Open(fx.store)
		wantLines, wantRows := reference(t, l, q)
		if q.Aggregates() {
			got, err := l.Aggregate(t.Context(), q, lake.SearchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(wantRows) {
				t.Fatalf("%q: rows\n got %v\nwant %v", src, got, wantRows)
			}
			return
		}
		for _, workers := range []int{1, 3} {
			got := searchLines(t, l, q, lake.SearchOptions{Workers: workers, LineOnly: workers == 3})
			if !slices.Equal(got, wantLines) {
				t.Fatalf("%q, workers %d: lines\n got %q\nwant %q", src, workers, got, wantLines)
			}
		}
	})
}
