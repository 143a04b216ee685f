package lake_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/lake"
	quarryql "github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
)

// pairsLake is summaryLake with a file "big" of 17,000 rows (two row
// groups and more, at zstd's best level as compaction writes: the encoder
// writes its versions' byte pairs, recfile.PairsKey) of template 2 (user alice or bob, an address) and 9
// ("merged a" or "b"), each file's data passed through prep.
func pairsLake(t *testing.T, prep func(name string, data []byte) []byte) *lake.Lake {
	return lake.Open(summaryLakeOf(t, prep, func(r *rand.Rand, day1, day2 time.Time) []summaryFile {
		return []summaryFile{
			{"a", "2026-01-01", summaryRows(r, 1500, 10, day1, 1, 2, 3, 5, 6, 7, 8, 9, 10), nil},
			{"big", "2026-01-01", summaryRows(r, 17000, 2000, day1.Add(2*time.Hour), 2, 9), []recfile.Option{recfile.WithHighCompression(true)}},
			{"c", "2026-01-02", summaryRows(r, 900, 9000, day2, 4, 5, 6, 8, 10), nil},
		}
	}).store)
}

// withoutPairs is data with its PairsKey entry taken out of the footer, as
// files written before it are.
func withoutPairs(t testing.TB, data []byte) []byte { return withoutKey(t, data, recfile.PairsKey) }

// TestPairsSkipRows: a term whose bytes template 2's parameters all hold,
// but never side by side ("ecila": alice's bytes backwards), settles false
// on file big by its versions' byte pairs, so big's rows are not read: its
// rows made unreadable, the search answers as over the intact lake. The
// same file without its pairs is read (and fails), as is big for a term
// its parameters hold.
func TestPairsSkipRows(t *testing.T) {
	intact := pairsLake(t, func(_ string, d []byte) []byte { return d })
	brokenBig := func(name string, d []byte) []byte {
		if name == "big" {
			return corruptRows(d)
		}
		return d
	}
	broken := pairsLake(t, brokenBig)
	noPairs := pairsLake(t, func(name string, d []byte) []byte {
		if name == "big" {
			return brokenBig(name, withoutPairs(t, d))
		}
		return d
	})
	for _, src := range []string{"ecila", "ecila | count by template", `"ob 10"`, "0..1", "cila"} {
		q := quarryql.MustCompile(src)
		if got, want := searchAll(t, broken, q, lake.SearchOptions{}), searchAll(t, intact, q, lake.SearchOptions{}); got != want {
			t.Errorf("%q: got %s, want %s", src, got, want)
		}
	}
	search := func(l *lake.Lake, src string) error {
		q := quarryql.MustCompile(src)
		if q.Aggregates() {
			_, err := l.Aggregate(context.Background(), q, lake.SearchOptions{})
			return err
		}
		return l.Search(context.Background(), q, lake.SearchOptions{}, func(lake.Record) error { return nil })
	}
	for _, src := range []string{"ecila", "ecila | count by template"} {
		if err := search(noPairs, src); err == nil {
			t.Errorf("%q: file big without its pairs was not read", src)
		}
	}
	for _, src := range []string{"alice", "lice", "bob", `"in from"`} {
		if err := search(broken, src); err == nil {
			t.Errorf("%q: file big, whose parameters hold it, was not read", src)
		}
	}
}

// TestPairsAgreeWithoutPairs: over a lake whose file big has its versions'
// byte pairs, or a damaged PairsKey value, every query answers as over the
// same files without them:
// the summary queries, and terms cut from big's own lines and from lines
// no row holds.
func TestPairsAgreeWithoutPairs(t *testing.T) {
	with := pairsLake(t, func(_ string, d []byte) []byte { return d })
	without := pairsLake(t, func(name string, d []byte) []byte {
		if name == "big" {
			return withoutPairs(t, d)
		}
		return d
	})
	// A damaged PairsKey value is read as none.
	damaged := pairsLake(t, func(name string, d []byte) []byte {
		if name != "big" {
			return d
		}
		return rewriteFooter(t, d, func(md *format.FileMetaData) {
			for i, kv := range md.KeyValueMetadata {
				if kv.Key == recfile.PairsKey {
					md.KeyValueMetadata[i].Value = kv.Value[:len(kv.Value)/2]
				}
			}
		})
	})
	srcs := slices.Clone(summaryQueries)
	r := rand.New(rand.NewPCG(8, 9))
	for _, l := range []string{"user alice logged in from 10.0.3.7", "user bob logged out from 10.0.0.4", "merged a", "merged b",
		"GET /api/v1 status=404 took 17ms", "id=4411 hex=0badf00d"} {
		for range 8 {
			n := 2 + r.IntN(6)
			i := r.IntN(len(l) - n + 1)
			srcs = append(srcs, `"`+l[i:i+n]+`"`)
		}
	}
	n := 0
	for _, src := range srcs {
		q := quarryql.MustCompile(src)
		got, want := searchAll(t, with, q, lake.SearchOptions{}), searchAll(t, without, q, lake.SearchOptions{})
		if got != want {
			t.Errorf("%q: with pairs %s, without %s", src, got, want)
		}
		if got := searchAll(t, damaged, q, lake.SearchOptions{}); got != want {
			t.Errorf("%q: with damaged pairs %s, without %s", src, got, want)
		}
		if want != `[]` && want != "" {
			n++
		}
	}
	if n < len(srcs)/2 {
		t.Fatalf("only %d of %d queries found anything", n, len(srcs))
	}
}
