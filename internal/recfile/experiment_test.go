package recfile

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/mining"

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
		{"ts micros always", func(o *options) { o.tsMillis = false }},
		{"all slot columns", func(o *options) { o.slotMin = 0 }},
		{"slot columns >= 1/16", func(o *options) { o.slotMin = 1.0 / 16 }},
		{"slot columns >= 1/256", func(o *options) { o.slotMin = 1.0 / 256 }},
		{"slot columns >= 1/8", func(o *options) { o.slotMin = 1.0 / 8 }},
		{"slot columns >= 1/4", func(o *options) { o.slotMin = 1.0 / 4 }},
		{"ints=delta", func(o *options) { o.ints = "delta" }},
		{"ts=delta", func(o *options) { o.tsDelta = true }},
		{"wal_seq=delta", func(o *options) { o.walDelta = true }},
		{"record_index=plain", func(o *options) { o.indexPlain = true }},
		{"no inner time", func(o *options) { o.innerTime = false }},
		{"untrimmed footer", func(o *options) { o.trimFooter = false }},
		{"untyped", func(o *options) { o.untyped = true }},
		{"strings=dict", func(o *options) { o.strings = "dict" }},
		{"zstd=better", func(o *options) { o.level = zstd.SpeedBetterCompression }},
		{"zstd=fastest", func(o *options) { o.level = zstd.SpeedFastest }},
		{"dict from 16 rows", func(o *options) { o.dictRows = 16 }},
		{"dict from 64 rows", func(o *options) { o.dictRows = 64 }},
		{"raw below 64 B", func(o *options) { o.rawBytes = 64 }},
		{"raw below 128 B", func(o *options) { o.rawBytes = 128 }},
		{"raw below 256 B", func(o *options) { o.rawBytes = 256 }},
		{"page v1", func(o *options) { o.pageVersion = 1 }},
		{"v1 dict64 raw64", func(o *options) { o.dictRows, o.rawBytes, o.pageVersion = 64, 64, 1 }},
		{"v1 dict16 raw64", func(o *options) { o.dictRows, o.rawBytes, o.pageVersion = 16, 64, 1 }},
		{"v1 dict256 raw64", func(o *options) { o.dictRows, o.rawBytes, o.pageVersion = 256, 64, 1 }},
		{"v1 dict64 raw32", func(o *options) { o.dictRows, o.rawBytes, o.pageVersion = 64, 32, 1 }},
		{"with page CRCs", func(o *options) { o.noCRC = false }},
		{"slot rows >= 2", func(o *options) { o.slotRows = 2 }},
		{"slot rows >= 4", func(o *options) { o.slotRows = 4 }},
		{"slot rows >= 8", func(o *options) { o.slotRows = 8 }},
		{"slot rows >= 1", func(o *options) { o.slotRows = 0 }},
		{"slot rows >= 32", func(o *options) { o.slotRows = 32 }},
		{"p zstd better", func(o *options) { o.pLevel = zstd.SpeedBetterCompression }},
		{"p zstd best", func(o *options) { o.pLevel = zstd.SpeedBestCompression }},
		{"v1 dict64 raw16", func(o *options) { o.dictRows, o.rawBytes, o.pageVersion = 64, 16, 1 }},
		{"v1 dict64 raw0", func(o *options) { o.dictRows, o.rawBytes, o.pageVersion = 64, 0, 1 }},
	}
	if only := os.Getenv("RECFILE_LEVERS"); only != "1" {
		variants = slices.DeleteFunc(variants, func(v struct {
			name string
			mod  func(*options)
		}) bool {
			return v.name != "default" && !strings.Contains(v.name, only)
		})
	}
	for _, v := range variants {
		o := defaultOptions()
		v.mod(&o)
		sum, dated, files := 0, 0, 0
		for _, c := range sets {
			f, err := encode(c.rows, c.tpl, &o)
			if err != nil {
				t.Fatal(err)
			}
			sum += len(f.Data)
			for _, part := range byDate(c.rows) {
				f, err := encode(part, c.tpl, &o)
				if err != nil {
					t.Fatal(err)
				}
				dated += len(f.Data)
				files++
			}
		}
		f, err := encode(all.rows, all.tpl, &o)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "%-18s per-dataset records=%7d  per-date (%d files)=%8d  all-one records=%7d %s\n", v.name, sum, files, dated, len(f.Data), fmtSizes(groupSizes(columnSizes(t, f.Data)), len(f.Data)))
	}
}

// byDate splits rows by the UTC day of their ts, as the encoder writes one
// file per date partition.
func byDate(rows []Row) [][]Row {
	var days []string
	parts := map[string][]Row{}
	for _, r := range rows {
		d := time.Unix(0, r.TS).UTC().Format(time.DateOnly)
		if parts[d] == nil {
			days = append(days, d)
		}
		parts[d] = append(parts[d], r)
	}
	out := make([][]Row, 0, len(days))
	for _, d := range days {
		out = append(out, parts[d])
	}
	return out
}

// TestSizeTemplates measures smaller representations of the templates
// table's file (owned by the lake package; reported, not used here). It runs
// only with RECFILE_LEVERS=1.
func TestSizeTemplates(t *testing.T) {
	if os.Getenv("RECFILE_LEVERS") == "" {
		t.Skip("set RECFILE_LEVERS=1")
	}
	type slim struct {
		TemplateID int64  `parquet:"template_id"`
		Version    int32  `parquet:"version"`
		Template   string `parquet:"template"`
	}
	var sum [5]int
	for _, s := range append(loghubSets, "") {
		c := loadCorpus(t, s, s)
		if s == "" {
			c = loadCorpus(t, "all", loghubSets...)
		}
		if c == nil {
			continue
		}
		today := c.templatesFile(t)
		todayTrimmed, terr := trimFooter(today, nil)
		if terr != nil {
			t.Fatal(terr)
		}
		var rows []slim
		for _, ev := range c.tplEvents {
			if ev.Kind == mining.EventCreated || ev.Kind == mining.EventChanged {
				rows = append(rows, slim{int64(ev.ID), int32(ev.Version), ev.Template})
			}
		}
		sl := writeGeneric(t, rows)
		trimmed, err := trimFooter(sl, nil)
		if err != nil {
			t.Fatal(err)
		}
		var text int
		for _, r := range rows {
			text += len(r.Template) + 1
		}
		z := compressedText(rows)
		fmt.Fprintf(os.Stderr, "%-10s events=%5d today=%6d today+trimmed footer=%6d created/changed only, no previous=%6d  +trimmed footer=%6d  (text %d bytes, zstd -3 %d)\n",
			c.name, len(c.tplEvents), len(today), len(todayTrimmed), len(sl), len(trimmed), text, z)
		if s != "" {
			sum[0] += len(today)
			sum[1] += len(sl)
			sum[2] += len(trimmed)
			sum[3] += z
			sum[4] += len(todayTrimmed)
		}
	}
	fmt.Fprintf(os.Stderr, "sum per-dataset today=%d today+trimmed=%d slim=%d slim+trimmed=%d zstd-3 of the texts=%d\n", sum[0], sum[4], sum[1], sum[2], sum[3])
}

func compressedText[T any](rows []T) int {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%v\n", r)
	}
	return compressed([]byte(b.String()), "zstd", "-3", "-c")
}
