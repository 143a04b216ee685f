package recfile

import (
	"fmt"
	"os"
	"testing"

	"github.com/parquet-go/parquet-go/compress/zstd"
)

// TestSizeLevers measures the writer's options on the Loghub lines; it runs
// only with RECFILE_LEVERS=1 and prints one line per variant.
func TestSizeLevers(t *testing.T) {
	if os.Getenv("RECFILE_LEVERS") == "" {
		t.Skip("set RECFILE_LEVERS=1")
	}
	var sets []*corpus
	for _, s := range loghubSets {
		if c := loadCorpus(t, s, s); c != nil {
			sets = append(sets, c)
		}
	}
	all := loadCorpus(t, "all", loghubSets...)
	if all == nil {
		t.Skip("no loghub data")
	}
	variants := []struct {
		name string
		mod  func(*options)
	}{
		{"default", func(*options) {}},
		{"ints=delta", func(o *options) { o.ints = "delta" }},
		{"untyped", func(o *options) { o.untyped = true }},
		{"strings=dict", func(o *options) { o.strings = "dict" }},
		{"zstd=better", func(o *options) { o.level = zstd.SpeedBetterCompression }},
	}
	for _, v := range variants {
		o := defaultOptions()
		v.mod(&o)
		sum := 0
		for _, c := range sets {
			f, err := encode(c.rows, c.tpl, &o)
			if err != nil {
				t.Fatal(err)
			}
			sum += len(f.Data)
		}
		f, err := encode(all.rows, all.tpl, &o)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "%-16s per-dataset records=%7d  all-one records=%7d %s\n", v.name, sum, len(f.Data), fmtSizes(groupSizes(columnSizes(t, f.Data)), len(f.Data)))
	}
}
