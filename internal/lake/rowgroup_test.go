package lake_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/lake"
	quarryql "github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
)

// rowGroupLake holds file "a" (one row group: the layout of a small file
// and of every file before issue 12) and "big", large enough to be cut into
// row groups between templates, with a few rows of templates 3, 5, 7 and 8
// (rare versions: the last row group, recfile.TailKey); prep sees each
// file's data.
func rowGroupLake(t *testing.T, prep func(name string, data []byte) []byte) *fixture {
	return summaryLakeOf(t, prep, func(r *rand.Rand, day1, _ time.Time) []summaryFile {
		big := summaryRows(r, 20000, 5000, day1.Add(2*time.Hour), 1, 2, 4, 6, 9, 10)
		big = append(big, summaryRows(r, 60, 20000, day1.Add(9*time.Hour), 3, 5, 7, 8)...)
		return []summaryFile{
			{"a", "2026-01-01", summaryRows(r, 1500, 10, day1, 1, 2, 3, 5, 6, 7, 8, 9, 10), nil},
			{"big", "2026-01-01", big, nil},
		}
	})
}

// templateBounds returns the template_id bounds of each row group of a
// records file and the byte range of its pages. A file of one row group
// has no chunk statistics (its bounds are its add action's): its range is
// every id.
func templateBounds(t *testing.T, data []byte) (bounds [][2]int64, pages [][2]int64) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	tid := slices.IndexFunc(f.Schema().Columns(), func(p []string) bool { return len(p) == 1 && p[0] == "template_id" })
	for i, rg := range f.RowGroups() {
		lo, hi, ok := rg.ColumnChunks()[tid].(*parquet.FileColumnChunk).Bounds()
		switch {
		case ok:
			bounds = append(bounds, [2]int64{lo.Int64(), hi.Int64()})
		case len(f.RowGroups()) == 1:
			bounds = append(bounds, [2]int64{math.MinInt64, math.MaxInt64})
		default:
			t.Fatal("no template_id bounds")
		}
		start, end := int64(-1), int64(0)
		for _, c := range f.Metadata().RowGroups[i].Columns {
			s := c.MetaData.DataPageOffset
			if d := c.MetaData.DictionaryPageOffset; d > 0 && d < s {
				s = d
			}
			if start < 0 || s < start {
				start = s
			}
			end = max(end, s+c.MetaData.TotalCompressedSize)
		}
		pages = append(pages, [2]int64{start, end})
	}
	return bounds, pages
}

// TestRowGroupSkipsAgreeWithFullScan: a lake with a file cut into row
// groups between templates and one of a single row group answers every
// summary query as the naive evaluation of every record does, with and
// without the files' summaries (without one no row group is skipped).
func TestRowGroupSkipsAgreeWithFullScan(t *testing.T) {
	groups := map[string]int{}
	tails := map[string]bool{}
	with := lake.Open(rowGroupLake(t, func(name string, d []byte) []byte {
		b, _ := templateBounds(t, d)
		groups[name] = len(b)
		f, err := parquet.OpenFile(bytes.NewReader(d), int64(len(d)))
		if err != nil {
			t.Fatal(err)
		}
		_, tails[name] = f.Lookup(recfile.TailKey)
		return d
	}).store)
	if groups["a"] != 1 || groups["big"] < 2 || tails["a"] || !tails["big"] {
		t.Fatalf("row groups per file: %v, rare versions last: %v", groups, tails)
	}
	without := lake.Open(rowGroupLake(t, func(_ string, d []byte) []byte { return withoutSummary(t, d) }).store)
	for _, src := range summaryQueries {
		q := quarryql.MustCompile(src)
		wantLines, wantRows := reference(t, without, q)
		want := fmt.Sprint(wantRows)
		if !q.Aggregates() {
			want = fmt.Sprintf("%q", wantLines)
		}
		for i, opts := range []lake.SearchOptions{{}, {Workers: 1, LineOnly: true}, {TemplateID: 6}} {
			if i == 0 {
				if got := searchAll(t, with, q, opts); got != want {
					t.Fatalf("%q: with summaries\n got %s\nwant %s", src, got, want)
				}
			}
			if g, w := searchAll(t, with, q, opts), searchAll(t, without, q, opts); g != w {
				t.Fatalf("%q options %d: with summaries\n got %s\nwithout\n     %s", src, i, g, w)
			}
		}
	}
}

// TestRowGroupSkipsRows: a term only one template's text holds reads only
// that template's row group of the cut file: with the pages of its other
// row groups overwritten it finds the same lines, while a search that
// needs every row fails on them.
func TestRowGroupSkipsRows(t *testing.T) {
	intact := lake.Open(rowGroupLake(t, func(_ string, d []byte) []byte { return d }).store)
	broken := lake.Open(rowGroupLake(t, func(name string, d []byte) []byte {
		if name != "big" {
			return d
		}
		bounds, pages := templateBounds(t, d)
		out := slices.Clone(d)
		n := 0
		for i, b := range bounds {
			if b[0] <= 6 && 6 <= b[1] {
				continue
			}
			n++
			for j := pages[i][0]; j < pages[i][1]; j++ {
				out[j] = 0xA5
			}
		}
		if n == 0 {
			t.Fatal("template 6 is in every row group")
		}
		return out
	}).store)
	for _, src := range []string{"IllegalStateException", `"java.lang"`, "template:6"} {
		q := quarryql.MustCompile(src)
		want := searchAll(t, intact, q, lake.SearchOptions{})
		if got := searchAll(t, broken, q, lake.SearchOptions{}); got != want {
			t.Errorf("%q: got %s, want %s", src, got, want)
		}
	}
	if err := broken.Search(context.Background(), quarryql.MustCompile("GET"), lake.SearchOptions{}, func(lake.Record) error { return nil }); err == nil {
		t.Error("GET read no overwritten row group")
	}

	// Rare versions are looked for in the last row group only (the tail
	// key): with every other row group of the cut file overwritten, a
	// template the file holds a few rows of is still found, though the
	// template_id ranges of the others hold its id.
	tailOnly := lake.Open(rowGroupLake(t, func(name string, d []byte) []byte {
		if name != "big" {
			return d
		}
		bounds, pages := templateBounds(t, d)
		out := slices.Clone(d)
		spans := 0
		for i := range bounds[:len(bounds)-1] {
			if bounds[i][0] <= 3 && 3 <= bounds[i][1] {
				spans++
			}
			for j := pages[i][0]; j < pages[i][1]; j++ {
				out[j] = 0xA5
			}
		}
		if spans == 0 {
			t.Fatal("no other row group's template_id range holds template 3")
		}
		return out
	}).store)
	for _, src := range []string{"template:3", "template:7 | count"} {
		q := quarryql.MustCompile(src)
		if got, want := searchAll(t, tailOnly, q, lake.SearchOptions{}), searchAll(t, intact, q, lake.SearchOptions{}); got != want {
			t.Errorf("%q with only the rare row group intact: got %s, want %s", src, got, want)
		}
	}
}
