package recfile

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// sbbfBytes is the size of a Parquet split-block bloom filter for n
// distinct values at false positive probability fpp: the spec's sizing
// (bits = -8n / ln(1 - fpp^(1/8))) in whole 32-byte blocks, and that
// rounded up to a power of two as parquet-java writes it.
func sbbfBytes(n int, fpp float64) (exact, pow2 int) {
	if n == 0 {
		return 0, 0
	}
	bits := -8 * float64(n) / math.Log(1-math.Pow(fpp, 1.0/8))
	exact = int(math.Ceil(bits/8/32)) * 32
	pow2 = 32
	for pow2 < exact {
		pow2 *= 2
	}
	return exact, pow2
}

func TestSBBFBytes(t *testing.T) {
	// The spec's table: 1% fpp takes about 9.7 bits a distinct value.
	for _, c := range []struct {
		n           int
		fpp         float64
		exact, pow2 int
	}{
		{0, 0.01, 0, 0},
		{1, 0.01, 32, 32},
		{1000, 0.01, 1216, 2048},
		{1000, 0.1, 736, 1024},
	} {
		e, p := sbbfBytes(c.n, c.fpp)
		if e != c.exact || p != c.pow2 {
			t.Errorf("sbbfBytes(%d, %g) = %d, %d; want %d, %d", c.n, c.fpp, e, p, c.exact, c.pow2)
		}
	}
}

// TestBloomLevers estimates what bloom filters on the string parameter
// columns (p<j>) would cost and skip in the records files of a lake
// (issue 12: "where they pay, bloom filters the reader can use"). For
// every row group and p<j> column chunk: its distinct values, and a
// split-block filter sized for them at 1% and 10% (exact and power of
// two). For an equality on a value v of that column (DuckDB's `WHERE p0 =
// v`, quarry's `param[N]=v`): the row groups a reader reads without
// filters, those left by template_id statistics for the templates whose
// rows hold v (quarry's row group skip), and those of them whose chunk
// holds v (what a filter with no false positive leaves). Run on the lake
// of the Search benchmark:
//
//	QUARRY_BENCH_LAKE=<lake> go test -count=1 -v -run '^TestBloomLevers$' ./internal/recfile/
func TestBloomLevers(t *testing.T) {
	dir := os.Getenv("QUARRY_BENCH_LAKE")
	if dir == "" {
		t.Skip("set QUARRY_BENCH_LAKE to a lake")
	}
	files, err := filepath.Glob(filepath.Join(dir, "records", "*", "*.parquet"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no records files under %s: %v", dir, err)
	}
	type group struct {
		lo, hi int64 // template_id bounds
		sum    Summary
	}
	type where struct {
		groups []int          // row groups holding v in the column
		tpls   map[int64]bool // templates of the rows holding v
	}
	var groups []group
	// Per row group: the distinct 3-byte substrings of its p<j> values (a
	// filter a substring term could use: a term none of whose trigrams is
	// missing may be there).
	var grams []map[string]bool
	values := map[string]map[string]*where{} // column -> value -> where
	chunks := map[string]int{}               // column -> row groups with the column
	var fileBytes, colBytes int64
	var bloom [4]int64 // 1% exact, 1% pow2, 10% exact, 10% pow2
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		fileBytes += int64(len(data))
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		sum, err := FileSummary(f)
		if err != nil || sum == nil {
			t.Fatalf("%s: summary %v", name, err)
		}
		tidCol, ok := f.Schema().Lookup(colTemplateID)
		if !ok {
			t.Fatalf("%s: no %s", name, colTemplateID)
		}
		for gi, rg := range f.RowGroups() {
			g := len(groups)
			tids := chunkValues(t, rg.ColumnChunks()[tidCol.ColumnIndex])
			lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
			for _, v := range tids {
				lo, hi = min(lo, v.Int64()), max(hi, v.Int64())
			}
			groups = append(groups, group{lo, hi, sum})
			grams = append(grams, map[string]bool{})
			for ci, path := range f.Schema().Columns() {
				col := strings.Join(path, ".")
				if len(path) != 1 || !strings.HasPrefix(col, "p") {
					continue
				}
				chunks[col]++
				colBytes += f.Metadata().RowGroups[gi].Columns[ci].MetaData.TotalCompressedSize
				vals := chunkValues(t, rg.ColumnChunks()[ci])
				if values[col] == nil {
					values[col] = map[string]*where{}
				}
				distinct := 0
				for r, v := range vals {
					if v.IsNull() {
						continue
					}
					s := string(v.ByteArray())
					w := values[col][s]
					if w == nil {
						w = &where{tpls: map[int64]bool{}}
						values[col][s] = w
					}
					if len(w.groups) == 0 || w.groups[len(w.groups)-1] != g {
						w.groups = append(w.groups, g)
						distinct++
					}
					w.tpls[tids[r].Int64()] = true
					for k := 0; k+3 <= len(s); k++ {
						grams[g][s[k:k+3]] = true
					}
				}
				for i, fpp := range []float64{0.01, 0.1} {
					e, p := sbbfBytes(distinct, fpp)
					bloom[2*i] += int64(e)
					bloom[2*i+1] += int64(p)
				}
			}
		}
	}
	var gramBytes [2]int64
	for _, m := range grams {
		for i, fpp := range []float64{0.01, 0.1} {
			e, _ := sbbfBytes(len(m), fpp)
			gramBytes[i] += int64(e)
		}
	}
	pct := func(n int64) float64 { return 100 * float64(n) / float64(fileBytes) }
	fmt.Printf("%d records files, %d row groups, %d bytes; p<j> column chunks %d bytes (%.1f%%)\n",
		len(files), len(groups), fileBytes, colBytes, pct(colBytes))
	fmt.Printf("split-block filters on every p<j> chunk: 1%% fpp %d bytes (%.1f%% of the files; %d, %.1f%% in powers of two), 10%% fpp %d (%.1f%%; %d, %.1f%%)\n",
		bloom[0], pct(bloom[0]), bloom[1], pct(bloom[1]), bloom[2], pct(bloom[2]), bloom[3], pct(bloom[3]))
	fmt.Printf("a filter of the values' trigrams per row group (all p<j> together): 1%% fpp %d bytes (%.1f%%), 10%% fpp %d (%.1f%%)\n",
		gramBytes[0], pct(gramBytes[0]), gramBytes[1], pct(gramBytes[1]))
	fmt.Println("column  chunks  values   row groups read for `col = v`, mean over its distinct values: no filter / template_id bounds / + bloom; for the term v (a substring search), those the summaries' byte sets leave (today) / those whose trigram set holds all of v's")
	cols := make([]string, 0, len(values))
	for c := range values {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	for _, c := range cols {
		var byTpl, byBloom, byGram, byBytes float64
		sampled := 0
		vs := make([]string, 0, len(values[c]))
		for v := range values[c] {
			vs = append(vs, v)
		}
		slices.Sort(vs) // every 97th value, the same each run
		for i, v := range vs {
			w := values[c][v]
			if i%97 == 96 && len(v) >= 3 {
				// a term equal to the value: row groups holding all its trigrams
				sampled++
				var need [4]uint64
				for k := 0; k < len(v); k++ {
					need[v[k]>>6] |= 1 << (v[k] & 63)
				}
				for _, g := range groups {
					for _, ts := range g.sum {
						id := int64(ts.Key.ID)
						if id < g.lo || id > g.hi {
							continue
						}
						if ts.AnyBytes || need[0]&^ts.ParamBytes[0] == 0 && need[1]&^ts.ParamBytes[1] == 0 &&
							need[2]&^ts.ParamBytes[2] == 0 && need[3]&^ts.ParamBytes[3] == 0 {
							byBytes++
							break
						}
					}
				}
				for _, m := range grams {
					all := true
					for k := 0; k+3 <= len(v) && all; k++ {
						all = m[v[k:k+3]]
					}
					if all {
						byGram++
					}
				}
			}
			n := 0
			for _, g := range groups {
				for id := range w.tpls {
					if id >= g.lo && id <= g.hi {
						n++
						break
					}
				}
			}
			byTpl += float64(n)
			byBloom += float64(len(w.groups))
		}
		k := float64(len(values[c]))
		fmt.Printf("%-6s %7d %7d   %d / %.1f / %.1f   term: %.1f / %.1f of %d row groups (%d values sampled)\n", c, chunks[c], len(values[c]), chunks[c], byTpl/k, byBloom/k, byBytes/float64(max(sampled, 1)), byGram/float64(max(sampled, 1)), len(groups), sampled)
	}
}
