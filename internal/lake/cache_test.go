package lake_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	quarryql "github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
)

// TestCacheFollowsCommits: a lake that keeps footers and templates between
// searches (EnableCache, quarry serve) answers every query as a fresh lake
// does, after each of: new template and records files committed, a file
// removed, and a file rewritten at the same path with other rows (a
// different size) and committed again. An entry kept by path alone, or
// files taken from the cache instead of the snapshot, fails here.
func TestCacheFollowsCommits(t *testing.T) {
	f := searchLake(t)
	cached := lake.Open(f.store)
	cached.EnableCache()
	queries := []string{"", "GET", "status=404", "user", "cache", "template:6", "-GET", "| count by template"}
	check := func(step string) {
		t.Helper()
		fresh := lake.Open(f.store)
		for _, src := range queries {
			q := quarryql.MustCompile(src)
			if q.Aggregates() {
				want, err := fresh.Aggregate(context.Background(), q, lake.SearchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got, err := cached.Aggregate(context.Background(), q, lake.SearchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(got, want, func(a, b quarryql.Row) bool { return a.Count == b.Count && slices.Equal(a.Keys, b.Keys) }) {
					t.Fatalf("%s: %q: rows\n got %v\nwant %v", step, src, got, want)
				}
				continue
			}
			want := searchLines(t, fresh, q, lake.SearchOptions{})
			for range 2 { // the second search reads what the first kept
				if got := searchLines(t, cached, q, lake.SearchOptions{}); !slices.Equal(got, want) {
					t.Fatalf("%s: %q: lines\n got %q\nwant %q", step, src, got, want)
				}
			}
		}
	}
	check("start")

	texts := recfile.Templates{{ID: 1, Version: 1}: "GET <*> status=<*> took <*>ms", {ID: 6, Version: 1}: "cache <*> of <*>"}
	f.commit(f.tpl, 7, f.templatesFile("w7", []lake.TemplateRow{{TemplateID: 6, Tenant: "acme", Version: 1, Template: "cache <*> of <*>", Kind: "created", WALSeq: 7}}))
	at := func(s string) int64 { return ts(s) * 1000 }
	rows := []recfile.Row{
		{WALSeq: 7, Index: 0, TS: at("2026-01-03T00:00:01Z"), TemplateID: 6, TemplateVersion: 1, Source: "web", Params: []string{"hit", "footers"}},
		{WALSeq: 7, Index: 1, TS: at("2026-01-03T00:00:02Z"), TemplateID: 1, TemplateVersion: 1, Source: "web", Params: []string{"/d", "404", "3"}},
	}
	added := f.v3File("acme", "2026-01-03", "w7", rows, texts)
	f.commit(f.rec, 7, added)
	check("added")

	// The same path rewritten with one more row, removed and added again.
	rows = append(rows, recfile.Row{WALSeq: 7, Index: 2, TS: at("2026-01-03T00:00:03Z"), TemplateID: 6, TemplateVersion: 1, Source: "web", Params: []string{"miss", "templates"}})
	rewritten := f.v3File("acme", "2026-01-03", "w7", rows, texts)
	if rewritten.Path != added.Path || rewritten.Size == added.Size {
		t.Fatalf("rewrite: path %s size %d, was %s size %d", rewritten.Path, rewritten.Size, added.Path, added.Size)
	}
	f.commitActions(f.rec, 7, delta.Action{Remove: &delta.Remove{Path: added.Path, DeletionTimestamp: time.Now().UnixMilli(), DataChange: true}},
		delta.Action{Add: &rewritten})
	check("rewritten")

	f.commitActions(f.rec, 7, delta.Action{Remove: &delta.Remove{Path: rewritten.Path, DeletionTimestamp: time.Now().UnixMilli(), DataChange: true}})
	check("removed")
}
