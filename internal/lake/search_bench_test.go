package lake_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	quarryql "github.com/quarrylake/quarry/internal/query"
)

// BenchmarkSearch searches the lake at $QUARRY_BENCH_LAKE (scripts/bench.sh
// builds one with `quarry run --lines N`): a full render, a selective term
// and a count by template. Skipped without the variable.
func BenchmarkSearch(b *testing.B) {
	dir := os.Getenv("QUARRY_BENCH_LAKE")
	if dir == "" {
		b.Skip("QUARRY_BENCH_LAKE not set")
	}
	term := os.Getenv("QUARRY_BENCH_TERM")
	if term == "" {
		term = "IllegalStateException"
	}
	ctx := context.Background()
	store, err := objstore.Open(ctx, dir, objstore.S3Options{})
	if err != nil {
		b.Fatal(err)
	}
	l := lake.Open(store)
	b.Run("all-raw", func(b *testing.B) {
		// SearchRaw: what quarry query --format raw does.
		var w countWriter
		for b.Loop() {
			w = countWriter{}
			if err := l.SearchRaw(ctx, quarryql.MustCompile(""), lake.SearchOptions{}, &w); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(w.lines), "results")
	})
	// SearchRaw of the term: what quarry query --format raw TERM does, and
	// the same through a lake that keeps footers, templates and the bytes
	// it learned between searches: what quarry serve runs.
	cached := lake.Open(store)
	cached.EnableCache()
	// And through one that learned the pairs of the files written
	// without them (LearnPairs, as quarry serve does in the background).
	learned := lake.Open(store)
	learned.EnableCache()
	if _, err := learned.LearnPairs(ctx, 0); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		l    *lake.Lake
	}{{"term-raw", l}, {"term-raw-cached", cached}, {"term-raw-learned", learned}} {
		b.Run(bc.name, func(b *testing.B) {
			q := quarryql.MustCompile(term)
			var w countWriter
			for b.Loop() {
				w = countWriter{}
				if err := bc.l.SearchRaw(ctx, q, lake.SearchOptions{}, &w); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(w.lines), "results")
		})
	}
	for _, bc := range []struct{ name, q string }{
		{"all", ""},
		{"term", `"` + term + `"`},
		{"count-by-template", "| count by template"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q := quarryql.MustCompile(bc.q)
			n := 0
			for b.Loop() {
				n = 0
				if q.Aggregates() {
					rows, err := l.Aggregate(ctx, q, lake.SearchOptions{})
					if err != nil {
						b.Fatal(err)
					}
					n = len(rows)
					continue
				}
				err := l.Search(ctx, q, lake.SearchOptions{LineOnly: true}, func(r lake.Record) error { n++; return nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "results")
		})
	}
	b.Run("templates", func(b *testing.B) {
		// What every query loads first: the templates table.
		for b.Loop() {
			if _, err := l.TemplateTexts(ctx, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// countWriter counts the bytes and lines written to it.
type countWriter struct{ bytes, lines int }

func (w *countWriter) Write(p []byte) (int, error) {
	w.bytes += len(p)
	w.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}
