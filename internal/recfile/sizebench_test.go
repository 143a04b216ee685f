package recfile

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

// loghubDir holds the Loghub 2k sample logs, read in place.
// loghubDir holds the datasets, <set>/<set>_2k.log ($LOGHUB_DIR, else
// ../shared/loghub2k read in place).
var loghubDir = cmp.Or(os.Getenv("LOGHUB_DIR"), "/work/shared/loghub2k")

// loghubSets are the datasets the harness reads: $RECFILE_SETS
// (comma-separated) or the 11 of Loghub-2k. Another real log is measured
// by putting it at $LOGHUB_DIR/<name>/<name>_2k.log.
var loghubSets = func() []string {
	if v := os.Getenv("RECFILE_SETS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"Android", "Apache", "BGL", "HDFS", "HPC", "Hadoop", "Linux", "OpenSSH", "Proxifier", "Spark", "Windows"}
}()

// frameLines is the frame size the harness cuts lines into (one WAL
// message each).
const frameLines = 256

// corpus is one tenant's lines mined and stamped as the pipeline would.
type corpus struct {
	name      string
	raw       []byte
	lines     []string
	rows      []Row
	tpl       Templates
	tplEvents []mining.Event
}

// loadCorpus reads the named datasets (in place) and mines them as one
// tenant; nil when none is present.
func loadCorpus(t testing.TB, name string, sets ...string) *corpus {
	c := &corpus{name: name, tpl: Templates{}}
	for _, s := range sets {
		b, err := os.ReadFile(filepath.Join(loghubDir, s, s+"_2k.log"))
		if err != nil {
			continue
		}
		c.raw = append(c.raw, b...)
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			c.lines = append(c.lines, strings.TrimSuffix(l, "\r"))
		}
	}
	if len(c.lines) == 0 {
		return nil
	}
	m, err := mining.New(mining.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Stamped as the producer stamps a line (eventtime.Stamper), read at
	// one time.
	st, err := eventtime.NewStamper(eventtime.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	readAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	var events []mining.Event
	for i, line := range c.lines {
		ts, src := st.Stamp(line, readAt)
		var res mining.Result
		res, events = m.Mine(name, line, events[:0])
		for _, ev := range events {
			if ev.Kind == mining.EventCreated || ev.Kind == mining.EventChanged {
				c.tpl[Key{ev.ID, ev.Version}] = ev.Template
			}
			c.tplEvents = append(c.tplEvents, ev)
		}
		c.rows = append(c.rows, Row{WALSeq: uint64(1 + i/frameLines), Index: uint32(i % frameLines), TS: ts, TSSource: streams.TSSource(src),
			TemplateID: res.ID, TemplateVersion: res.Version, Params: res.Params, Source: "file:" + name + ".log"})
	}
	return c
}

// templatesFile is the templates table's file for the corpus, as the
// encoder writes it (lake.EncodeTemplates, templates v2: ZstdHigh,
// version 1 pages, no page statistics, no previous text, integer columns
// DELTA_BINARY_PACKED, footer trimmed, no chunk statistics).
func (c *corpus) templatesFile(t testing.TB) []byte { return c.templatesFileWith(t, ZstdHigh) }

func (c *corpus) templatesFileWith(t testing.TB, codec compress.Codec) []byte {
	rows := make([]v2TemplateRow, 0, len(c.tplEvents))
	for _, ev := range c.tplEvents {
		rows = append(rows, v2TemplateRow{TemplateID: int64(ev.ID), Tenant: c.name, Version: int32(ev.Version),
			Template: ev.Template, Kind: ev.Kind.String(), MergedInto: int64(ev.Into), WALSeq: 1})
	}
	return writeTrimmed(t, rows, parquet.Compression(codec), parquet.DataPageVersion(1), parquet.DataPageStatistics(false))
}

// writeTrimmed writes rows with parquet-go's generic writer and opts, and
// trims the file's footer as the encoder does for templates files
// (TrimFooter).
func writeTrimmed[T any](t testing.TB, rows []T, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, opts...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := TrimFooter(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// v2File is the records file as the encoder writes it today (records v2).
func (c *corpus) v2File(t testing.TB) []byte { return writeGeneric(t, v2Rows(c.rows)) }

func v2Rows(rows []Row) []v2RecordRow {
	out := make([]v2RecordRow, len(rows))
	for i, r := range rows {
		out[i] = v2RecordRow{WALSeq: int64(r.WALSeq), RecordIndex: int32(r.Index), TS: floorDiv(r.TS, 1000),
			TemplateID: int64(r.TemplateID), TemplateVersion: int32(r.TemplateVersion), Params: r.Params, Source: r.Source}
	}
	return out
}

func writeGeneric[T any](t testing.TB, rows []T) []byte {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, parquet.Compression(&parquet.Zstd), parquet.DataPageStatistics(true))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// compressed is the size of b compressed by an external tool; -1 when the
// tool is not installed.
func compressed(b []byte, tool string, args ...string) int {
	cmd := exec.Command(tool, args...)
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		return -1
	}
	return len(out)
}

// columnSizes are the compressed bytes per top-level column of a Parquet
// file, plus "(footer)" for the rest.
func columnSizes(t testing.TB, data []byte) map[string]int64 {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	var sum int64
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			sizes[c.MetaData.PathInSchema[0]] += c.MetaData.TotalCompressedSize
			sum += c.MetaData.TotalCompressedSize
		}
	}
	sizes["(footer)"] = int64(len(data)) - sum
	return sizes
}

// groupSizes folds slot columns into p*, n*, b*.
func groupSizes(sizes map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range sizes {
		if len(k) > 1 && strings.IndexByte("pnb", k[0]) >= 0 && k[1] >= '0' && k[1] <= '9' {
			k = k[:1] + "*"
		}
		out[k] += v
	}
	return out
}

func fmtSizes(sizes map[string]int64, total int) string {
	keys := make([]string, 0, len(sizes))
	for k := range sizes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return sizes[keys[i]] > sizes[keys[j]] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d(%.0f%%)", k, sizes[k], 100*float64(sizes[k])/float64(total))
	}
	return b.String()
}

// TestSizeLoghub is the size harness and its floor: per Loghub dataset
// (one tenant each, one file) and for all of them as one tenant, lake bytes
// (records v3 + templates) against zstd -3, zstd -19 and gzip -6 of the
// same lines. It checks every line round-trips, and fails when
//
//   - all datasets as one tenant take more than zstd -3 of their lines
//     (0.93 when written, 0.97 with the date column, 0.95 with templates
//     v2), or
//   - the sum over the datasets, one tenant and one file each, takes more
//     than sizeCeiling times their zstd -3 (1.054 measured: the target
//     is 1.0, not reached yet; the ceiling keeps it from growing), or
//   - the same sum with the records files as compaction rewrites them
//     (WithHighCompression, "high") takes more than highCeiling times,
//     or a dataset's high file is not smaller than its default one.
//
// A lake of `quarry run` has one records file per tenant (each row with its
// date column, WithDate, as here) per encoder flush; a table of the old
// layout one per event-time date, "per-date", printed for reference
// (cmd/quarry TestSizeLoghub measures the lake itself). Run with -v to see
// the table:
//
//	go test -run TestSizeLoghub -v ./internal/recfile/
func TestSizeLoghub(t *testing.T) {
	if testing.Short() {
		t.Skip("size harness")
	}
	if _, err := os.Stat(loghubDir); err != nil {
		t.Skip("no loghub data")
	}
	for _, tool := range []string{"zstd", "gzip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	type total struct{ raw, v2, lake, high, z3, z19, gz, dated, files int }
	var sum total
	var allLake, allZ3 int
	var lines []string
	fmt.Fprintf(os.Stderr, "%-10s %8s %8s %8s %8s %8s %8s | %6s %6s %6s %6s %6s | lake/z3 | %8s %s\n",
		"dataset", "raw", "v2+tpl", "v3+tpl", "zstd-3", "zstd-19", "gzip-6", "v2", "v3", "z3", "z19", "gz6", "high+tpl", "high/z3")
	report := func(name string, c *corpus, add bool) {
		// As the lake writes it: a table partitioned by tenant, each row
		// with its date column.
		f, err := Encode(c.rows, c.tpl, WithDate(true))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// As compaction rewrites it (WithHighCompression).
		hf, err := Encode(c.rows, c.tpl, WithDate(true), WithHighCompression(true))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, data := range [][]byte{f.Data, hf.Data} {
			recs, err := Decode(data, c.tpl)
			if err != nil {
				t.Fatalf("%s: decode: %v", name, err)
			}
			if len(recs) != len(c.lines) {
				t.Fatalf("%s: %d records, want %d", name, len(recs), len(c.lines))
			}
			for i, r := range recs {
				if string(r.Line) != c.lines[i] {
					t.Fatalf("%s line %d:\n got %q\nwant %q", name, i, r.Line, c.lines[i])
				}
			}
		}
		tb := len(c.templatesFile(t))
		v2 := len(c.v2File(t)) + tb
		lk := len(f.Data) + tb
		z3, z19, gz := compressed(c.raw, "zstd", "-3", "-c"), compressed(c.raw, "zstd", "-19", "-c"), compressed(c.raw, "gzip", "-6", "-c")
		raw := len(c.raw)
		r := func(n int) float64 { return float64(n) / float64(raw) }
		hk := len(hf.Data) + tb
		fmt.Fprintf(os.Stderr, "%-10s %8d %8d %8d %8d %8d %8d | %.4f %.4f %.4f %.4f %.4f | %.2f    | %8d %.2f\n",
			name, raw, v2, lk, z3, z19, gz, r(v2), r(lk), r(z3), r(z19), r(gz), float64(lk)/float64(z3), hk, float64(hk)/float64(z3))
		fmt.Fprintf(os.Stderr, "%-10s columns: templates=%d%s\n", "", tb, fmtSizes(groupSizes(columnSizes(t, f.Data)), lk))
		if !add {
			allLake, allZ3 = lk, z3
		}
		if hk >= lk {
			t.Errorf("%s: high compression %d bytes, not fewer than the default's %d", name, hk, lk)
		}
		if add {
			for _, part := range byDate(c.rows) {
				pf, err := Encode(part, c.tpl)
				if err != nil {
					t.Fatal(err)
				}
				sum.dated += len(pf.Data)
				sum.files++
			}
			sum.dated += tb
			sum.raw += raw
			sum.v2 += v2
			sum.lake += lk
			sum.high += hk
			sum.z3 += z3
			sum.z19 += z19
			sum.gz += gz
		}
	}
	for _, s := range loghubSets {
		c := loadCorpus(t, s, s)
		if c == nil {
			continue
		}
		lines = append(lines, c.lines...)
		report(s, c, true)
	}
	r := func(n int) float64 { return float64(n) / float64(sum.raw) }
	fmt.Fprintf(os.Stderr, "%-10s %8d %8d %8d %8d %8d %8d | %.4f %.4f %.4f %.4f %.4f | %.2f    | %8d %.3f\n",
		"sum", sum.raw, sum.v2, sum.lake, sum.z3, sum.z19, sum.gz, r(sum.v2), r(sum.lake), r(sum.z3), r(sum.z19), r(sum.gz), float64(sum.lake)/float64(sum.z3),
		sum.high, float64(sum.high)/float64(sum.z3))
	fmt.Fprintf(os.Stderr, "%-10s %d files, lake %d, lake/z3 %.2f\n", "per-date", sum.files, sum.dated, float64(sum.dated)/float64(sum.z3))
	if all := loadCorpus(t, "all", loghubSets...); all != nil {
		report("all-one", all, false)
	}
	if sum.z3 > 0 && float64(sum.lake) > sizeCeiling*float64(sum.z3) {
		t.Errorf("per-dataset lakes %d bytes, %.3f of zstd -3 (%d): over the ceiling %.2f", sum.lake, float64(sum.lake)/float64(sum.z3), sum.z3, sizeCeiling)
	}
	if sum.z3 > 0 && float64(sum.high) > highCeiling*float64(sum.z3) {
		t.Errorf("per-dataset lakes compacted (WithHighCompression) %d bytes, %.3f of zstd -3 (%d): over the ceiling %.2f", sum.high, float64(sum.high)/float64(sum.z3), sum.z3, highCeiling)
	}
	if allZ3 > 0 && allLake > allZ3 {
		t.Errorf("all datasets as one tenant: lake %d bytes, more than zstd -3 (%d)", allLake, allZ3)
	}
}

// sizeCeiling bounds the per-dataset lakes' bytes as a multiple of zstd -3
// of their lines (TestSizeLoghub); the target is 1.0. It was 1.09 (1.078
// measured) until the files gained the date column the tenant-only layout
// needs (WithDate: 4,555 bytes over the 22,000 rows, 0.016 of zstd -3),
// measured 1.094 with it, 1.090 with the templates file at ZstdHigh, 1.054
// with templates v2 (no previous text, no page statistics, DELTA integer
// columns, no page CRCs: 290,259 bytes), 0.99 with records v5 and
// byte-wide delta miniblocks (273,070 bytes, 341db35).
const sizeCeiling = 1.0

// highCeiling bounds the per-dataset lakes' bytes with their records files
// as compaction rewrites them (WithHighCompression), as a multiple of zstd
// -3 of their lines (TestSizeLoghub): 1.008 measured (301,461 bytes at the
// default level, 1.094), 1.003 with the templates file at ZstdHigh (276,330
// bytes; 300,176 and 1.090 at the default level), 0.967 with templates v2
// (266,413 bytes), 0.845 with the sparse slot and digit-run trials, byte-wide
// delta miniblocks and more PLAIN (231,677 bytes, 341db35).
const highCeiling = 0.86
