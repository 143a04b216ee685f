package recfile

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/internal/mining"

	"github.com/parquet-go/parquet-go"
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
		{"rows in WAL order", func(o *options) { o.sortByTpl = false }},
		{"rows in WAL order, high compression", func(o *options) { o.sortByTpl = false; WithHighCompression(true)(o) }},
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
		{"strings=delta", func(o *options) { o.strings = "delta" }},
		{"strings=plain", func(o *options) { o.strings = "plain" }},
		{"strings=auto 1/2", func(o *options) { o.dictShare = 0.5 }},
		{"strings=auto 1/8", func(o *options) { o.dictShare = 0.125 }},
		{"strings=plain, high compression", func(o *options) { o.strings = "plain"; WithHighCompression(true)(o) }},
		{"strings=auto 1/8, high compression", func(o *options) { o.dictShare = 0.125; WithHighCompression(true)(o) }},
		{"strings=auto 1/16, high compression", func(o *options) { o.dictShare = 1.0 / 16; WithHighCompression(true)(o) }},
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
		{"p zstd better rest fastest", func(o *options) { o.level, o.pLevel = zstd.SpeedFastest, zstd.SpeedBetterCompression }},
		{"zstd fastest rest, p default", func(o *options) { o.level, o.pLevel = zstd.SpeedFastest, zstd.SpeedDefault }},
		{"zstd best from 1 KB", func(o *options) { o.hiLevel, o.hiBytes = zstd.SpeedBestCompression, 1<<10 }},
		{"zstd best from 4 KB", func(o *options) { o.hiLevel, o.hiBytes = zstd.SpeedBestCompression, 4<<10 }},
		{"zstd best from 16 KB", func(o *options) { o.hiLevel, o.hiBytes = zstd.SpeedBestCompression, 16<<10 }},
		{"zstd better from 1 KB", func(o *options) { o.hiLevel, o.hiBytes = zstd.SpeedBetterCompression, 1<<10 }},
		{"zstd better from 4 KB", func(o *options) { o.hiLevel, o.hiBytes = zstd.SpeedBetterCompression, 4<<10 }},
		{"high compression", func(o *options) { WithHighCompression(true)(o) }},
		{"zstd best all", func(o *options) { o.level = zstd.SpeedBestCompression }},
		{"zstd better, p best", func(o *options) { o.level, o.pLevel = zstd.SpeedBetterCompression, zstd.SpeedBestCompression }},
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
	var sum [7]int
	for _, s := range append(loghubSets, "") {
		c := loadCorpus(t, s, s)
		if s == "" {
			c = loadCorpus(t, "all", loghubSets...)
		}
		if c == nil {
			continue
		}
		today := c.templatesFile(t)
		better, best := c.templatesFileWith(t, codec(zstd.SpeedBetterCompression)), c.templatesFileWith(t, codec(zstd.SpeedBestCompression))
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
		fmt.Fprintf(os.Stderr, "%-10s zstd better=%6d best=%6d\n", c.name, len(better), len(best))
		fmt.Fprintf(os.Stderr, "%-10s events=%5d today=%6d today+trimmed footer=%6d created/changed only, no previous=%6d  +trimmed footer=%6d  (text %d bytes, zstd -3 %d)\n",
			c.name, len(c.tplEvents), len(today), len(todayTrimmed), len(sl), len(trimmed), text, z)
		if s != "" {
			sum[0] += len(today)
			sum[1] += len(sl)
			sum[2] += len(trimmed)
			sum[3] += z
			sum[4] += len(todayTrimmed)
			sum[5] += len(better)
			sum[6] += len(best)
		}
	}
	fmt.Fprintf(os.Stderr, "sum per-dataset today=%d today+trimmed=%d slim=%d slim+trimmed=%d zstd-3 of the texts=%d; today at zstd better=%d best=%d\n", sum[0], sum[4], sum[1], sum[2], sum[3], sum[5], sum[6])
}

func compressedText[T any](rows []T) int {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%v\n", r)
	}
	return compressed([]byte(b.String()), "zstd", "-3", "-c")
}

// BenchmarkEncodeLevels measures the encode CPU of the zstd levels the
// size levers compare: every Loghub dataset as its own file, per line.
//
//	go test -run '^$' -bench EncodeLevels -count 3 ./internal/recfile/
func BenchmarkEncodeLevels(b *testing.B) {
	var sets []*corpus
	lines := 0
	for _, s := range loghubSets {
		if c := loadCorpus(b, s, s); c != nil {
			sets = append(sets, c)
			lines += len(c.rows)
		}
	}
	if len(sets) == 0 {
		b.Skip("no loghub data")
	}
	for _, v := range []struct {
		name string
		mod  func(*options)
	}{
		{"default", func(*options) {}},
		{"rows in WAL order", func(o *options) { o.sortByTpl = false }},
		{"rows in WAL order, high compression", func(o *options) { o.sortByTpl = false; WithHighCompression(true)(o) }},
		{"better", func(o *options) { o.level = zstd.SpeedBetterCompression }},
		{"best", func(o *options) { o.level = zstd.SpeedBestCompression }},
		{"best-from-4KB", func(o *options) { o.hiLevel, o.hiBytes = zstd.SpeedBestCompression, 4<<10 }},
		{"best-from-16KB", func(o *options) { o.hiLevel, o.hiBytes = zstd.SpeedBestCompression, 16<<10 }},
		{"better-from-4KB", func(o *options) { o.hiLevel, o.hiBytes = zstd.SpeedBetterCompression, 4<<10 }},
		// As an idle encoder writes: the best level with every trial.
		{"high-compression", func(o *options) { WithHighCompression(true)(o); WithDate(true)(o) }},
	} {
		o := defaultOptions()
		v.mod(&o)
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				for _, c := range sets {
					if _, err := encode(c.rows, c.tpl, &o); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
		})
	}
}

// TestEncodeLevelsCPU measures the process CPU time (user + system, so
// other processes on the machine do not count) of encoding every Loghub
// dataset as its own file per zstd level variant, the variants taking
// turns. It runs only with RECFILE_LEVERS=1.
func TestEncodeLevelsCPU(t *testing.T) {
	if os.Getenv("RECFILE_LEVERS") == "" {
		t.Skip("set RECFILE_LEVERS=1")
	}
	var sets []*corpus
	lines := 0
	for _, s := range loghubSets {
		if c := loadCorpus(t, s, s); c != nil {
			sets = append(sets, c)
			lines += len(c.rows)
		}
	}
	if len(sets) == 0 {
		t.Skip("no loghub data")
	}
	variants := []struct {
		name string
		mod  func(*options)
	}{
		{"default", func(*options) {}},
		{"rows in WAL order", func(o *options) { o.sortByTpl = false }},
		{"rows in WAL order, high compression", func(o *options) { o.sortByTpl = false; WithHighCompression(true)(o) }},
		{"p better", func(o *options) { o.pLevel = zstd.SpeedBetterCompression }},
		{"p best", func(o *options) { o.pLevel = zstd.SpeedBestCompression }},
		{"better from 16 KB", func(o *options) { o.hiLevel, o.hiBytes = zstd.SpeedBetterCompression, 16<<10 }},
		{"high compression", func(o *options) { WithHighCompression(true)(o) }},
		{"default again", func(*options) {}},
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	spent := make([]time.Duration, len(variants))
	// Many short turns, each round starting at a different variant, so a
	// variant's share of a load spike or of the turn after a collection is
	// spread over all of them.
	const rounds, reps = 30, 2
	for r := range rounds {
		for n := range variants {
			i := (n + r) % len(variants)
			o := defaultOptions()
			variants[i].mod(&o)
			runtime.GC()
			start := cpu()
			for range reps {
				for _, c := range sets {
					if _, err := encode(c.rows, c.tpl, &o); err != nil {
						t.Fatal(err)
					}
				}
			}
			spent[i] += cpu() - start
		}
	}
	for i, v := range variants {
		fmt.Fprintf(os.Stderr, "%-18s %6.0f ns CPU/line  (%.2fx default)\n", v.name,
			float64(spent[i].Nanoseconds())/float64(rounds*reps*lines), float64(spent[i])/float64(spent[0]))
	}
}

// TestSizeCodecHeadroom measures what the codec leaves: each column chunk of
// each Loghub dataset's records file (written uncompressed, one file a set
// as the size table writes them, no trial) compressed alone by the
// writer's best level (highCodec) and by the zstd CLI at -19 and -3. It
// runs only with RECFILE_CODEC=1 (about a minute: two CLI runs a chunk).
func TestSizeCodecHeadroom(t *testing.T) {
	if os.Getenv("RECFILE_CODEC") == "" {
		t.Skip("set RECFILE_CODEC=1")
	}
	var sum [3]int
	for _, s := range loghubSets {
		c := loadCorpus(t, s, s)
		if c == nil {
			continue
		}
		o := defaultOptions()
		WithDate(true)(&o)
		o.rawBytes = 1 << 30 // no column compressed
		f, _, err := encodeOnce(c.rows, c.tpl, &o, splitNone, nil)
		if err != nil {
			t.Fatal(err)
		}
		var best, z19, z3 int
		for _, chunk := range columnChunks(t, f.Data) {
			kb, err := highCodec.Encode(nil, chunk)
			if err != nil {
				t.Fatal(err)
			}
			best += len(kb)
			// The CLI's frame has a 4-byte checksum and a larger header
			// (about 9 bytes more than the writer's frames).
			z19 += compressed(chunk, "zstd", "-19", "-c") - 9
			z3 += compressed(chunk, "zstd", "-3", "-c") - 9
		}
		fmt.Fprintf(os.Stderr, "%-10s column chunks: best %7d  zstd -19 %7d (%.3f)  zstd -3 %7d (%.3f)\n",
			s, best, z19, float64(z19)/float64(best), z3, float64(z3)/float64(best))
		sum[0], sum[1], sum[2] = sum[0]+best, sum[1]+z19, sum[2]+z3
	}
	if sum[0] == 0 {
		t.Skip("no loghub data")
	}
	fmt.Fprintf(os.Stderr, "total      column chunks: best %7d  zstd -19 %7d (%.3f)  zstd -3 %7d (%.3f)\n",
		sum[0], sum[1], float64(sum[1])/float64(sum[0]), sum[2], float64(sum[2])/float64(sum[0]))
	if sum[1] > sum[2] {
		t.Errorf("zstd -19 %d bytes, -3 %d: the CLI is not what this measures", sum[1], sum[2])
	}
}

// columnChunks returns the bytes of every column chunk of a Parquet file
// (dictionary page, if any, to the last data page).
func columnChunks(t testing.TB, data []byte) [][]byte {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, rg := range f.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			m := cc.MetaData
			off := m.DataPageOffset
			if m.DictionaryPageOffset > 0 && m.DictionaryPageOffset < off {
				off = m.DictionaryPageOffset
			}
			out = append(out, data[off:off+m.TotalCompressedSize])
		}
	}
	return out
}

// TestSizeSecondTime measures what a second copy of the line's time costs
// where a header carries one (docs/benchmarks.md, "Lake size: every
// parameter in more by trial, and what is left"): the records file of
// BGL with each header's local date and RAS time blanked (the
// microseconds kept, then not), and of Linux with the `ctime` time of its
// ftpd lines blanked; and a census of the lines where the eventtime
// parser finds a second timestamp at a field start after the first. An
// upper bound of what rendering such a time from ts would save. It runs
// only with RECFILE_LEVERS=1.
func TestSizeSecondTime(t *testing.T) {
	if os.Getenv("RECFILE_LEVERS") == "" {
		t.Skip("set RECFILE_LEVERS=1")
	}
	size := func(c *corpus) int {
		o := defaultOptions()
		WithHighCompression(true)(&o)
		WithDate(true)(&o)
		f, err := encode(c.rows, c.tpl, &o)
		if err != nil {
			t.Fatal(err)
		}
		return len(f.Data)
	}
	blank := func(c *corpus, edit func(r *Row) bool) int {
		n := 0
		for i := range c.rows {
			r := &c.rows[i]
			r.Params = slices.Clone(r.Params)
			if edit(r) {
				n++
			}
		}
		return n
	}
	if c := loadCorpus(t, "BGL", "BGL"); c != nil {
		before := size(c)
		keep := regexp.MustCompile(`^(\S+ \d+ )\d{4}\.\d\d\.\d\d( \S+ )\d{4}-\d\d-\d\d-\d\d\.\d\d\.\d\d(\.\d+ )`)
		n := blank(c, func(r *Row) bool {
			if len(r.Params) == 0 || !keep.MatchString(r.Params[0]) {
				return false
			}
			r.Params[0] = keep.ReplaceAllString(r.Params[0], "$1$2$3")
			return true
		})
		kept := size(c)
		micros := regexp.MustCompile(`^(\S+ \d+  \S+ )\.\d+( )`)
		blank(c, func(r *Row) bool {
			r.Params[0] = micros.ReplaceAllString(r.Params[0], "$1$2")
			return true
		})
		fmt.Fprintf(os.Stderr, "BGL: %d of %d headers; records %d, without the local date and time %d, without the microseconds too %d\n",
			n, len(c.rows), before, kept, size(c))
		if kept >= before {
			t.Errorf("BGL: blanking the second time left %d bytes of %d", kept, before)
		}
	}
	if c := loadCorpus(t, "Linux", "Linux"); c != nil {
		before := size(c)
		n := blank(c, func(r *Row) bool {
			if !strings.Contains(c.tpl[Key{r.TemplateID, r.TemplateVersion}], " at <*>:<*>:<*>") || len(r.Params) < 3 {
				return false
			}
			k := len(r.Params) - 3
			r.Params[k], r.Params[k+1], r.Params[k+2] = "", "", ""
			return true
		})
		fmt.Fprintf(os.Stderr, "Linux: %d of %d lines with `at <ctime>`; records %d, without it %d\n", n, len(c.rows), before, size(c))
	}
	for _, s := range loghubSets {
		c := loadCorpus(t, s, s)
		if c == nil {
			continue
		}
		first, err := eventtime.New(eventtime.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		second, err := eventtime.New(eventtime.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		shifts := map[time.Duration]int{}
		n := 0
		for _, line := range c.lines {
			b := []byte(line)
			m, _, ok := first.Parse(b)
			if !ok {
				continue
			}
			rest := b[m.End:]
			for i := range rest {
				if i > 0 && !strings.ContainsRune(" [(=", rune(rest[i-1])) {
					continue
				}
				second.Reset()
				if m2, _, ok := second.Parse(rest[i:]); ok && m2.Start == 0 {
					n++
					shifts[m2.Time.Sub(m.Time)]++
					break
				}
			}
		}
		fmt.Fprintf(os.Stderr, "%-10s lines with a second timestamp: %d of %d; shifts %v\n", s, n, len(c.lines), shifts)
	}
}

// TestSizeCrossValues estimates two levers that did not pay (docs/benchmarks.md,
// "Lake size: more as one value a row"), per dataset at zstd's best level;
// it runs only with RECFILE_LEVERS=1 and prints one line per dataset:
//
//   - dict: a file-wide dictionary of parameter values, as CLP's: a value of
//     3 bytes or more seen at two or more places (template version,
//     position) is stored once, and the places whose values are mostly such
//     hold a reference (written here as a short text, 0x12 and the number);
//     the dictionary's values are compressed after one another.
//   - joined: a row's parameters joined into one with the template text
//     between them (one wildcard a template).
func TestSizeCrossValues(t *testing.T) {
	if os.Getenv("RECFILE_LEVERS") == "" {
		t.Skip("set RECFILE_LEVERS=1")
	}
	high := func(rows []Row, tpl Templates) int {
		f, err := Encode(rows, tpl, WithDate(true), WithHighCompression(true))
		if err != nil {
			t.Fatal(err)
		}
		return len(f.Data)
	}
	for _, s := range loghubSets {
		c := loadCorpus(t, s, s)
		if c == nil {
			continue
		}
		type place struct {
			k Key
			j int
		}
		where := map[string]map[place]bool{}
		for _, r := range c.rows {
			for j, p := range r.Params {
				if len(p) < 3 {
					continue
				}
				if where[p] == nil {
					where[p] = map[place]bool{}
				}
				where[p][place{Key{r.TemplateID, r.TemplateVersion}, j}] = true
			}
		}
		shared, all := map[place]int{}, map[place]int{}
		for _, r := range c.rows {
			for j, p := range r.Params {
				pl := place{Key{r.TemplateID, r.TemplateVersion}, j}
				all[pl]++
				if len(where[p]) > 1 {
					shared[pl]++
				}
			}
		}
		// References numbered in the order the encoder writes rows.
		order := make([]int, len(c.rows))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			ka, kb := c.rows[a], c.rows[b]
			if ka.TemplateID != kb.TemplateID {
				return cmp.Compare(ka.TemplateID, kb.TemplateID)
			}
			return cmp.Compare(ka.TemplateVersion, kb.TemplateVersion)
		})
		ids := map[string]int{}
		var dict []byte
		dictRows := slices.Clone(c.rows)
		for _, i := range order {
			r := c.rows[i]
			ps := slices.Clone(r.Params)
			for j, p := range ps {
				pl := place{Key{r.TemplateID, r.TemplateVersion}, j}
				if len(where[p]) < 2 || 2*shared[pl] < all[pl] {
					continue
				}
				id, ok := ids[p]
				if !ok {
					id = len(ids)
					ids[p] = id
					dict = append(append(dict, p...), 0)
				}
				ps[j] = fmt.Sprintf("\x12%d", id)
			}
			dictRows[i].Params = ps
		}
		z, err := highCodec.Encode(nil, dict)
		if err != nil {
			t.Fatal(err)
		}
		// Joined: every template of two or more wildcards becomes one.
		jtpl := Templates{}
		for k, text := range c.tpl {
			pieces := strings.Split(text, "<*>")
			jtpl[k] = text
			if len(pieces) > 2 {
				jtpl[k] = pieces[0] + "<*>" + pieces[len(pieces)-1]
			}
		}
		jrows := slices.Clone(c.rows)
		for i, r := range c.rows {
			pieces := strings.Split(c.tpl[Key{r.TemplateID, r.TemplateVersion}], "<*>")
			if len(r.Params) < 2 {
				continue
			}
			var b strings.Builder
			for j, p := range r.Params {
				if j > 0 {
					b.WriteString(pieces[j])
				}
				b.WriteString(p)
			}
			jrows[i].Params = []string{b.String()}
		}
		now := high(c.rows, c.tpl)
		d := high(dictRows, c.tpl) + len(z)
		j := high(jrows, jtpl)
		fmt.Fprintf(os.Stderr, "%-12s records %7d  dict %7d (%.3f, %d values)  joined %7d (%.3f)\n",
			s, now, d, float64(d)/float64(now), len(ids), j, float64(j)/float64(now))
	}
}
