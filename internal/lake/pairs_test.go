package lake_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	quarryql "github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
)

// pairsLake is summaryLake with a file "big" of 17,000 rows (two row
// groups and more, at zstd's best level as compaction writes: the encoder
// writes its versions' byte pairs, recfile.PairsKey) of template 2 (user alice or bob, an address) and 9
// ("merged a" or "b"), each file's data passed through prep.
func pairsLake(t *testing.T, prep func(name string, data []byte) []byte) *lake.Lake {
	return lake.Open(summaryLakeOf(t, prep, pairsFiles).store)
}

// pairsFiles are pairsLake's files.
func pairsFiles(r *rand.Rand, day1, day2 time.Time) []summaryFile {
	return []summaryFile{
		{"a", "2026-01-01", summaryRows(r, 1500, 10, day1, 1, 2, 3, 5, 6, 7, 8, 9, 10), nil},
		{"big", "2026-01-01", summaryRows(r, 17000, 2000, day1.Add(2*time.Hour), 2, 9), []recfile.Option{recfile.WithHighCompression(true)}},
		{"c", "2026-01-02", summaryRows(r, 900, 9000, day2, 4, 5, 6, 8, 10), nil},
	}
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

// TestPairsLevers measures what the versions' byte pairs rule out on a
// lake: for each term, the rows of the versions a term within one
// parameter is not ruled out for by the byte sets, by exact pair sets
// (every pair the rows' parameters hold), by the files' own PairsKey
// sets where they have them, and the rows of the versions whose
// parameters hold it (docs/benchmarks.md, "Search: needles and bloom
// filters"):
//
//	QUARRY_BENCH_LAKE=<lake> [QUARRY_PAIRS_TERMS=a,b] go test -count=1 -v -run '^TestPairsLevers$' ./internal/lake/
func TestPairsLevers(t *testing.T) {
	dir := os.Getenv("QUARRY_BENCH_LAKE")
	if dir == "" {
		t.Skip("set QUARRY_BENCH_LAKE to a lake")
	}
	terms := strings.Split(cmp.Or(os.Getenv("QUARRY_PAIRS_TERMS"), "fc9d3e55.css,api-59ba0834bc-764b4,worker-fd872,bob46,192.168.200.6"), ",")
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	texts, err := lake.Open(store).TemplateTexts(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "records", "*", "*.parquet"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no records files under %s: %v", dir, err)
	}
	type version struct {
		rows   int64
		bytes  [256]bool
		pairs  map[[2]byte]bool
		params []string
		file   recfile.Pairs // the file's PairsKey set (nil: none)
	}
	kept := make([][4]int64, len(terms)) // byte sets, exact pairs, file pairs, holding it
	var rows int64
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := recfile.DecodeRows(data, texts)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := recfile.OpenParquet(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		sum, err := recfile.FileSummary(pf)
		if err != nil {
			t.Fatal(err)
		}
		vs := map[recfile.Key]*version{}
		for _, r := range recs {
			k := recfile.Key{ID: r.TemplateID, Version: r.TemplateVersion}
			v := vs[k]
			if v == nil {
				v = &version{pairs: map[[2]byte]bool{}}
				vs[k] = v
			}
			v.rows++
			for _, p := range r.Params {
				for i := 0; i < len(p); i++ {
					v.bytes[p[i]] = true
					if i > 0 {
						v.pairs[[2]byte{p[i-1], p[i]}] = true
					}
				}
				v.params = append(v.params, p)
			}
		}
		for _, s := range sum {
			if v := vs[s.Key]; v != nil {
				v.file = s.ParamPairs
			}
		}
		rows += int64(len(recs))
		for ti, term := range terms {
			for _, v := range vs {
				inBytes := true
				for i := 0; i < len(term); i++ {
					inBytes = inBytes && v.bytes[term[i]]
				}
				inPairs, inFile := inBytes, inBytes
				for i := 1; i < len(term); i++ {
					inPairs = inPairs && v.pairs[[2]byte{term[i-1], term[i]}]
					inFile = inFile && v.file.HasPair(term[i-1], term[i])
				}
				for j, in := range []bool{inBytes, inPairs, inFile, slices.ContainsFunc(v.params, func(p string) bool { return strings.Contains(p, term) })} {
					if in {
						kept[ti][j] += v.rows
					}
				}
			}
		}
	}
	fmt.Printf("%d records files, %d rows; rows of the versions not ruled out for a term within one parameter:\n", len(files), rows)
	fmt.Println("term | byte sets | exact pair sets | the files' pair sets | versions holding it")
	for ti, term := range terms {
		k := kept[ti]
		fmt.Printf("%s | %d | %d | %d | %d\n", term, k[0], k[1], k[2], k[3])
		if k[1] > k[0] || k[2] < k[1] || k[3] > k[1] {
			t.Errorf("%s: %v: a pair set keeps more than the byte set, a hashed set less than the exact one, or the exact one less than the rows that hold it", term, k)
		}
	}
}

// TestLearnPairs: over pairsLake with file big's pairs taken out of its
// footer (as a busy encoder writes it), LearnPairs gives big's versions
// the very sets the encoder wrote, and files a and c (default level, one
// row group: written without pairs) sets of their own; a second call
// looks at nothing again. Every query then answers as over the intact
// lake, and the term "ecila" (alice's bytes backwards: bytes big's
// parameters hold, never side by side) skips big's rows: made unreadable
// after the learning, the search still answers, where a lake that did
// not learn reads them and fails.
func TestLearnPairs(t *testing.T) {
	ctx := context.Background()
	var intactBig []byte
	fx := summaryLakeOf(t, func(name string, d []byte) []byte {
		if name == "big" {
			intactBig = d
			return withoutPairs(t, d)
		}
		return d
	}, pairsFiles)
	l := lake.Open(fx.store)
	if n, err := l.LearnPairs(ctx, 0); err != nil || n != 0 {
		t.Fatalf("without a cache: learned from %d files (%v), want none", n, err)
	}
	l.EnableCache()
	if n, err := l.LearnPairs(ctx, 1); err != nil || n != 1 {
		t.Fatalf("LearnPairs(1): learned from %d files (%v), want 1 (the newest)", n, err)
	}
	if n, err := l.LearnPairs(ctx, 0); err != nil || n != 2 {
		t.Fatalf("LearnPairs(0): learned from %d more files (%v), want 2", n, err)
	}
	if n, err := l.LearnPairs(ctx, 0); err != nil || n != 0 {
		t.Fatalf("LearnPairs again: learned from %d files (%v), want none", n, err)
	}

	var bigPath string
	for path, n := range learntPairs(ctx, t, fx, l) {
		if n.without > 0 || n.with == 0 {
			t.Errorf("%s: %d versions with a byte set and no pairs, %d with pairs after LearnPairs", path, n.without, n.with)
		}
		if strings.Contains(path, "big") {
			bigPath = path
		}
	}
	if bigPath == "" {
		t.Fatal("no file big")
	}
	want, err := recfile.OpenAt(bytes.NewReader(intactBig), int64(len(intactBig)))
	if err != nil {
		t.Fatal(err)
	}
	wantSum, err := recfile.FileSummary(want.Parquet())
	if err != nil {
		t.Fatal(err)
	}
	gotSum, err := lake.CachedSummary(ctx, l, bigPath)
	if err != nil {
		t.Fatal(err)
	}
	learnt := map[recfile.Key]recfile.Pairs{}
	for _, ts := range gotSum {
		learnt[ts.Key] = ts.ParamPairs
	}
	for _, ts := range wantSum {
		if ts.ParamPairs == nil {
			continue
		}
		if got := learnt[ts.Key]; !slices.Equal(got, ts.ParamPairs) {
			t.Errorf("big, version %v: learned %d words of pairs, the encoder wrote %d (or other bits)", ts.Key, len(got), len(ts.ParamPairs))
		}
	}

	intact := pairsLake(t, func(_ string, d []byte) []byte { return d })
	srcs := slices.Clone(summaryQueries)
	r := rand.New(rand.NewPCG(10, 11))
	for _, line := range []string{"user alice logged in from 10.0.3.7", "user bob logged out from 10.0.0.4", "merged a",
		"GET /api/v1 status=404 took 17ms", "id=4411 hex=0badf00d", "ts 2026-01-02T00:00:01Z level=warn"} {
		for range 8 {
			n := 2 + r.IntN(6)
			i := r.IntN(len(line) - n + 1)
			srcs = append(srcs, `"`+line[i:i+n]+`"`, `"`+line[i:i+n]+`x"`, `"q`+line[i:i+n]+`"`)
		}
	}
	for _, src := range srcs {
		q := quarryql.MustCompile(src)
		if got, want := searchAll(t, l, q, lake.SearchOptions{}), searchAll(t, intact, q, lake.SearchOptions{}); got != want {
			t.Errorf("%q: with learned pairs %s, over the intact lake %s", src, got, want)
		}
	}

	// big's rows made unreadable (the same size: the cache entry stands).
	key := fx.rec.FileKey(bigPath)
	data, err := fx.store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.store.Put(ctx, key, corruptRows(data)); err != nil {
		t.Fatal(err)
	}
	q := quarryql.MustCompile("ecila")
	if got, want := searchAll(t, l, q, lake.SearchOptions{}), searchAll(t, intact, q, lake.SearchOptions{}); got != want {
		t.Errorf("ecila over the learned lake: got %s, want %s", got, want)
	}
	// What was learned outlives the footers' cache: read again, big's
	// footer takes its learned sets, and big is not read again to learn.
	lake.DropFooters(l)
	if got, want := searchAll(t, l, q, lake.SearchOptions{}), searchAll(t, intact, q, lake.SearchOptions{}); got != want {
		t.Errorf("ecila once the footers were dropped: got %s, want %s", got, want)
	}
	if n, err := l.LearnPairs(ctx, 0); err != nil || n != 0 {
		t.Errorf("LearnPairs once the footers were dropped: learned from %d files (%v), want none", n, err)
	}
	unlearned := lake.Open(fx.store)
	unlearned.EnableCache()
	if err := unlearned.Search(ctx, q, lake.SearchOptions{}, func(lake.Record) error { return nil }); err == nil {
		t.Error("ecila: a lake that did not learn big's pairs did not read its rows")
	}
	if err := l.Search(ctx, quarryql.MustCompile("alice"), lake.SearchOptions{}, func(lake.Record) error { return nil }); err == nil {
		t.Error("alice: big's rows, which hold it, were not read")
	}
}

// TestLearnPairsWhileSearching: LearnPairs runs beside searches of the same
// lake, as quarry serve runs it, and they answer as over the intact lake
// (under -race, nothing they share is written unguarded).
func TestLearnPairsWhileSearching(t *testing.T) {
	ctx := context.Background()
	l := pairsLake(t, func(name string, d []byte) []byte {
		if name == "big" {
			return withoutPairs(t, d)
		}
		return d
	})
	l.EnableCache()
	intact := pairsLake(t, func(_ string, d []byte) []byte { return d })
	done := make(chan error, 1)
	go func() {
		_, err := l.LearnPairs(ctx, 0)
		done <- err
	}()
	for _, src := range []string{"ecila", "alice", `"ob 10"`, "ecila | count by template", "merged"} {
		q := quarryql.MustCompile(src)
		if got, want := searchAll(t, l, q, lake.SearchOptions{}), searchAll(t, intact, q, lake.SearchOptions{}); got != want {
			t.Errorf("%q while learning: got %s, want %s", src, got, want)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestLearnPairsNewestFirst: LearnPairs reads only the snapshot's newest
// files: asked for one, file c (the highest WAL sequences) learns its
// pairs, the older a and big never do.
func TestLearnPairsNewestFirst(t *testing.T) {
	ctx := context.Background()
	fx := summaryLakeOf(t, func(name string, d []byte) []byte {
		if name == "big" {
			return withoutPairs(t, d)
		}
		return d
	}, pairsFiles)
	l := lake.Open(fx.store)
	l.EnableCache()
	for i, want := range []int{1, 0} {
		if n, err := l.LearnPairs(ctx, 1); err != nil || n != want {
			t.Fatalf("pass %d: learned from %d files (%v), want %d", i, n, err, want)
		}
	}
	for path, n := range learntPairs(ctx, t, fx, l) {
		if newest := strings.Contains(path, "-c."); newest != (n.with > 0) {
			t.Errorf("%s: %d versions with pairs (the newest file: %v)", path, n.with, newest)
		}
	}
}

// TestLearnPairsUnreadableFile: a file whose rows cannot be read (a's,
// with big's pairs taken out) is skipped without an error and not read
// again; the others learn, and a search that needs a's rows still reports
// them.
func TestLearnPairsUnreadableFile(t *testing.T) {
	ctx := context.Background()
	fx := summaryLakeOf(t, func(name string, d []byte) []byte {
		switch name {
		case "a":
			return corruptRows(d)
		case "big":
			return withoutPairs(t, d)
		}
		return d
	}, pairsFiles)
	l := lake.Open(fx.store)
	l.EnableCache()
	for i, want := range []int{2, 0} {
		if n, err := l.LearnPairs(ctx, 0); err != nil || n != want {
			t.Fatalf("pass %d: learned from %d files (%v), want %d", i, n, err, want)
		}
	}
	for path, n := range learntPairs(ctx, t, fx, l) {
		if corrupt := strings.Contains(path, "-a."); corrupt != (n.with == 0) {
			t.Errorf("%s: %d versions with pairs (the unreadable file: %v)", path, n.with, corrupt)
		}
	}
	if err := l.Search(ctx, quarryql.MustCompile("alice"), lake.SearchOptions{}, func(lake.Record) error { return nil }); err == nil {
		t.Error("alice: a's unreadable rows, which may hold it, were not reported")
	}
}

// pairCount is how many versions of a file's summary have pairs, and how
// many have a byte set and none.
type pairCount struct{ with, without int }

// learntPairs counts, for each records v3 file of fx's lake, the versions
// of the summary a search of l takes that have pairs.
func learntPairs(ctx context.Context, t *testing.T, fx *fixture, l *lake.Lake) map[string]pairCount {
	t.Helper()
	snap, err := fx.rec.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]pairCount{}
	for _, a := range snap.Files {
		sum, err := lake.CachedSummary(ctx, l, a.Path)
		if err != nil {
			t.Fatal(err)
		}
		if len(sum) == 0 {
			continue // the v2 file
		}
		var n pairCount
		for _, ts := range sum {
			if ts.ParamPairs != nil {
				n.with++
			} else if !ts.AnyBytes {
				n.without++
			}
		}
		out[a.Path] = n
	}
	return out
}
