package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

// TestSizeLoghub is the size table of `make bench` (QUARRY_SIZE_OUT=FILE
// runs it and writes the markdown there): every Loghub 2k dataset under
// $LOGHUB_DIR (default /work/shared/loghub2k or ../shared/loghub2k from
// the repository root, read in place), lines with their
// headers, is run through `quarry run --input` as one tenant into a lake of
// its own; its lake bytes (records + templates data files) are set against
// zstd -3, zstd -19 and gzip -6 of the same file, and the records files'
// bytes are broken down by column. Every dataset must read back exactly.
func TestSizeLoghub(t *testing.T) {
	out := os.Getenv("QUARRY_SIZE_OUT")
	if out == "" {
		t.Skip("QUARRY_SIZE_OUT not set (make bench runs this)")
	}
	dir := os.Getenv("LOGHUB_DIR")
	if dir == "" {
		dir = "/work/shared/loghub2k"
		if _, err := os.Stat(dir); err != nil {
			dir = "../../../shared/loghub2k" // ../shared from the repository root
		}
	}
	for _, tool := range []string{"zstd", "gzip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "*_2k.log"))
	if len(logs) == 0 {
		t.Skipf("no Loghub 2k logs under %s", dir)
	}
	sort.Strings(logs)
	type row = sizeRow
	// Other real logs (QUARRY_SIZE_EXTRA, comma-separated paths; make
	// bench passes this machine's /var/log/dpkg.log and apt logs) get rows
	// of their own after the Loghub total.
	isExtra := map[string]bool{}
	for _, p := range strings.Split(os.Getenv("QUARRY_SIZE_EXTRA"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			logs = append(logs, p)
			isExtra[p] = true
		}
	}
	var rows []row
	cols := map[string]int64{}
	var chunks, recTotal int64
	slot := regexp.MustCompile(`^([pnb])[0-9]+$`)
	for _, log := range logs {
		name := strings.TrimSuffix(filepath.Base(log), "_2k.log")
		tenant := strings.ToLower(name)
		if isExtra[log] {
			name, tenant = log, fmt.Sprintf("extra%d", len(rows))
		}
		raw, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		// As an idle encoder writes it: at zstd's best level. In auto (the
		// default) that depends on the machine's load during the run
		// (encoder.high_compression), so the test says always.
		data := filepath.Join(t.TempDir(), "data")
		idleCfg := filepath.Join(t.TempDir(), "idle.yaml")
		if err := os.WriteFile(idleCfg, []byte("encoder:\n  high_compression: always\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// --compact: the lake as it stays once its partitions are closed
		// and the committer's background compaction (on by default) has
		// rewritten the encoders' flushes, not waiting for the days to end.
		runCLI(t, "", "run", "--config", idleCfg, "--compact", "--data", data, "--input", log, "--tenant", tenant, "--timeout", "5m")
		lakeDir := filepath.Join(data, "lake")
		live := liveDataFiles(t, lakeDir)
		q, _ := runCLI(t, "", "query", "--lake", lakeDir, "--format", "raw")
		want := string(raw)
		if !strings.HasSuffix(want, "\n") {
			want += "\n" // raw output ends every line
		}
		if q != want {
			t.Errorf("%s: the lake does not read back exactly (%d bytes, the file has %d)", name, len(q), len(raw))
		}
		r := row{name: name, lines: strings.Count(want, "\n"), raw: int64(len(raw)), extra: isExtra[log]}
		err = filepath.WalkDir(lakeDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(lakeDir, p)
			table, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
			if strings.Contains(filepath.ToSlash(rel), "/_delta_log/") || !live[filepath.ToSlash(rel)] {
				return nil // Delta log checkpoints, and files compaction removed, are left out
			}
			switch table {
			case "templates":
				r.tpl += int64(len(b))
				return nil
			case "records":
			default:
				return nil // the progress table is not the lines' bytes
			}
			r.rec += int64(len(b))
			r.files++
			if r.extra {
				return nil // the breakdown by column is the Loghub lakes'
			}
			recTotal += int64(len(b))
			f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				return err
			}
			for _, rg := range f.Metadata().RowGroups {
				for _, c := range rg.Columns {
					n := c.MetaData.PathInSchema[0]
					if m := slot.FindStringSubmatch(n); m != nil {
						n = m[1] + "<j>"
					}
					cols[n] += c.MetaData.TotalCompressedSize
					chunks += c.MetaData.TotalCompressedSize
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The same file as a busy encoder writes it: at zstd's default
		// level.
		busyData := filepath.Join(t.TempDir(), "data")
		busyCfg := filepath.Join(t.TempDir(), "busy.yaml")
		if err := os.WriteFile(busyCfg, []byte("encoder:\n  high_compression: never\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		runCLI(t, "", "run", "--config", busyCfg, "--data", busyData, "--input", log, "--tenant", tenant, "--timeout", "5m")
		r.busy = lakeDataBytes(t, filepath.Join(busyData, "lake"))
		r.z3, r.z19, r.gz = compressedSize(t, log, "zstd", "-3"), compressedSize(t, log, "zstd", "-19"), compressedSize(t, log, "gzip", "-6")
		rows = append(rows, r)
	}
	var b strings.Builder
	ratio := func(a, raw int64) string { return fmt.Sprintf("%.3f", float64(a)/float64(raw)) }
	fmt.Fprintln(&b, "| dataset | lines | records files | raw bytes | lake bytes (records + templates) | lake | zstd -3 | zstd -19 | gzip -6 | lake / zstd -3 | busy encoder's lake / zstd -3 |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	line := func(r row) {
		lk := r.rec + r.tpl
		busy := "-"
		if r.busy >= 0 {
			busy = fmt.Sprintf("%.3f (%d)", float64(r.busy)/float64(r.z3), r.busy)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d (%d + %d) | %s | %s | %s | %s | %.3f | %s |\n", r.name, r.lines, r.files, r.raw, lk, r.rec, r.tpl,
			ratio(lk, r.raw), ratio(r.z3, r.raw), ratio(r.z19, r.raw), ratio(r.gz, r.raw), float64(lk)/float64(r.z3), busy)
	}
	add := func(sum *row, r row) {
		sum.lines += r.lines
		sum.files += r.files
		sum.raw += r.raw
		sum.rec += r.rec
		sum.tpl += r.tpl
		sum.z3 += r.z3
		sum.z19 += r.z19
		sum.gz += r.gz
		sum.busy += r.busy
	}
	var sum, extra row
	for _, r := range rows {
		if !r.extra {
			line(r)
			add(&sum, r)
		}
	}
	sum.name = "**total**"
	line(sum)
	for _, r := range rows {
		if r.extra {
			line(r)
			add(&extra, r)
		}
	}
	var oneLake string
	if extra.lines > 0 {
		extra.name = "**other logs, total**"
		line(extra)
		if len(isExtra) > 1 {
			one, cat := oneLakeSize(t, logs, isExtra)
			one.name = "**other logs, one lake** (a tenant each)"
			line(one)
			oneLake = fmt.Sprintf("\nThe other logs in one lake (a tenant each, `quarry run --compact` once per file into one data directory: their templates share the templates table's file) are %d bytes: %.3f of the sum of each file's zstd -3 (%d) and %.3f of zstd -3 of the files concatenated (%d bytes).\n",
				one.rec+one.tpl, float64(one.rec+one.tpl)/float64(one.z3), one.z3, float64(one.rec+one.tpl)/float64(cat), cat)
		}
	}
	b.WriteString(oneLake)
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "Records files by column (all datasets, %d bytes; column chunks after compression, the rest is Parquet footers and headers):\n\n", recTotal)
	fmt.Fprintln(&b, "| column | bytes | share of records |")
	fmt.Fprintln(&b, "|---|---:|---:|")
	names := make([]string, 0, len(cols))
	for n := range cols {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return cols[names[i]] > cols[names[j]] })
	for _, n := range names {
		fmt.Fprintf(&b, "| %s | %d | %.1f%% |\n", n, cols[n], 100*float64(cols[n])/float64(recTotal))
	}
	fmt.Fprintf(&b, "| (footers, page headers) | %d | %.1f%% |\n", recTotal-chunks, 100*float64(recTotal-chunks)/float64(recTotal))
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if lk := sum.rec + sum.tpl; sum.z3 > 0 && float64(lk) > lakeCeiling*float64(sum.z3) {
		t.Errorf("lake bytes %d, %.3f of zstd -3 (%d): over the ceiling %.3f", lk, float64(lk)/float64(sum.z3), sum.z3, lakeCeiling)
	}
	// Each Loghub dataset on its own, too (Linux last: 0.997 since 40b0cce).
	for _, r := range rows {
		if lk := r.rec + r.tpl; !r.extra && r.z3 > 0 && lk > r.z3 {
			t.Errorf("%s: lake bytes %d, %.3f of zstd -3 (%d): above it", r.name, lk, float64(lk)/float64(r.z3), r.z3)
		}
	}
}

// sizeRow is a row of the size table.
type sizeRow struct {
	name                       string
	lines, files               int
	raw, rec, tpl, z3, z19, gz int64
	busy                       int64 // lake bytes as a busy encoder writes (zstd's default level); -1: not measured
	extra                      bool  // QUARRY_SIZE_EXTRA: not in the Loghub total
}

// oneLakeSize writes the extra logs into one lake, a tenant each, as
// successive compacting runs over one data directory, checks that the lake
// reads back as the files concatenated, and returns its bytes (records
// and templates, live files) with the sums of the files' own zstd -3,
// zstd -19 and gzip -6, and zstd -3 of the concatenation.
func oneLakeSize(t *testing.T, logs []string, isExtra map[string]bool) (r sizeRow, cat int64) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	idleCfg := filepath.Join(t.TempDir(), "idle.yaml")
	if err := os.WriteFile(idleCfg, []byte("encoder:\n  high_compression: always\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	n := 0
	for _, log := range logs {
		if !isExtra[log] {
			continue
		}
		raw, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		want.Write(raw)
		if len(raw) > 0 && raw[len(raw)-1] != '\n' {
			want.WriteByte('\n')
		}
		runCLI(t, "", "run", "--config", idleCfg, "--compact", "--data", data, "--input", log, "--tenant", fmt.Sprintf("one%d", n), "--timeout", "5m")
		n++
		r.z3 += compressedSize(t, log, "zstd", "-3")
		r.z19 += compressedSize(t, log, "zstd", "-19")
		r.gz += compressedSize(t, log, "gzip", "-6")
	}
	lakeDir := filepath.Join(data, "lake")
	if q, _ := runCLI(t, "", "query", "--lake", lakeDir, "--format", "raw"); q != want.String() {
		t.Errorf("one lake of the other logs does not read back as the files concatenated (%d bytes, want %d)", len(q), want.Len())
	}
	live := liveDataFiles(t, lakeDir)
	for rel := range live {
		fi, err := os.Stat(filepath.Join(lakeDir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(rel, lake.TemplatesTable+"/") {
			r.tpl += fi.Size()
		} else {
			r.rec += fi.Size()
			r.files++
		}
	}
	r.raw, r.lines = int64(want.Len()), strings.Count(want.String(), "\n")
	r.busy = -1
	catFile := filepath.Join(t.TempDir(), "cat.log")
	if err := os.WriteFile(catFile, []byte(want.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return r, compressedSize(t, catFile, "zstd", "-3")
}

// lakeCeiling bounds the lakes' bytes (records + templates, every dataset)
// as a multiple of zstd -3 of their logs: issue 10's target. 1.083 measured
// before templates v2 (300,132 bytes), 1.047 with it (290,131 bytes), 0.929
// with p<j> dictionaries, the idle encoder's zstd best and templates v3
// (257,368 bytes; 1.009 as a busy encoder writes; docs/benchmarks.md),
// 0.823 with byte-wide delta miniblocks and more and kinds PLAIN where
// smaller (228,075 bytes, 40b0cce). Each Loghub dataset must also be at or
// below zstd -3 of its log (the test's loop after the table).
const lakeCeiling = 0.85

// liveDataFiles are the data files of the records and templates tables of
// the lake in dir that their Delta logs hold (paths relative to dir): not
// those a compaction removed, which stay until vacuum.
func liveDataFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable} {
		snap, err := delta.OpenTable(store, table).Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range snap.Files {
			live[table+"/"+f.Path] = true
		}
	}
	return live
}

// lakeDataBytes sums the live records and templates data files of the lake
// in dir (not the Delta logs, not the progress table).
func lakeDataBytes(t *testing.T, dir string) int64 {
	t.Helper()
	live := liveDataFiles(t, dir)
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		table, _, _ := strings.Cut(rel, "/")
		if strings.Contains(rel, "/_delta_log/") || (table != "records" && table != "templates") || !live[rel] {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// compressedSize is the size of file compressed by tool at level.
func compressedSize(t *testing.T, file, tool, level string) int64 {
	t.Helper()
	cmd := exec.Command(tool, level, "-c", file)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s %s: %v", tool, level, file, err)
	}
	return int64(out.Len())
}
