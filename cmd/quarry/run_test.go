package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/encoder"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/producer"
)

func runCLI(t *testing.T, stdin string, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := runMain(ctx, e, args); code != 0 {
		t.Fatalf("quarry %s: exit %d\nstderr:\n%s", strings.Join(args, " "), code, errb.String())
	}
	return out.String(), errb.String()
}

// TestRunExactlyOnceMultiTenant feeds four tenants' files (100k lines in all)
// through `quarry run --input`, one invocation per tenant on the same data
// directory, so every run after the first restarts the embedded server, the
// miner (from its snapshot) and the committer (from the Delta log). The
// records table must then hold every input line exactly once, compared as
// multisets through `quarry query --format raw`, and the Delta logs must be
// valid and readable by a second Parquet implementation.
func TestRunExactlyOnceMultiTenant(t *testing.T) {
	total := 100000
	if testing.Short() {
		total = 20000
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	tenants := []string{"acme", "globex", "initech", "umbrella"}
	gen := producer.NewGenerator(7, tenants)
	var want []string
	for i, tn := range tenants {
		lines := gen.Lines(tn, total/len(tenants))
		// Edge cases the lake must keep byte for byte.
		if i == 0 {
			lines = append(lines, "", "  leading and trailing  ", "tab\tseparated\tvalues", "crlf line\r", "literal <*> marker", "ünïcödé 日本語 ✓",
				// Four words in one position: the miner merges their templates.
				"zqx service alpha started", "zqx service beta started", "zqx service gamma started", "zqx service delta started")
		}
		want = append(want, lines...)
		f := filepath.Join(dir, tn+".log")
		if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := runCLI(t, "", "run", "--data", data, "--input", f, "--tenant", tn, "--encoders", "2", "--timeout", "5m")
		if !strings.Contains(out, "quarry run summary") {
			t.Fatalf("run for %s printed no summary:\n%s", tn, out)
		}
	}
	lakeDir := filepath.Join(data, "lake")
	raw, _ := runCLI(t, "", "query", "--lake", lakeDir, "--format", "raw")
	got := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("lake holds %d lines, input had %d", len(got), len(want))
	}
	sort.Strings(got)
	sort.Strings(want)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("multiset differs at sorted position %d: got %q want %q", i, got[i], want[i])
		}
	}
	// Per-tenant filter returns exactly that tenant's lines.
	raw, _ = runCLI(t, "", "query", "--lake", lakeDir, "--tenant", "globex", "--format", "raw")
	if n := strings.Count(raw, "\n"); n != total/len(tenants) {
		t.Fatalf("globex has %d lines, want %d", n, total/len(tenants))
	}

	ctx := context.Background()
	store, err := objstore.Open(ctx, lakeDir, objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable} {
		if err := delta.ValidateLog(ctx, store, table); err != nil {
			t.Fatalf("delta log %s: %v", table, err)
		}
	}
	if err := laketest.CheckWithArrow(ctx, store); err != nil {
		t.Fatalf("arrow-go cross-check: %v", err)
	}
	tpl, _ := runCLI(t, "", "templates", "--lake", lakeDir, "--tenant", "acme")
	if !strings.Contains(tpl, "acme") {
		t.Fatalf("templates lists no acme template:\n%s", tpl)
	}
	// The merged "zqx service <*> started" family: the survivor's query
	// returns all four lines, whichever template each was mined into.
	js, _ := runCLI(t, "", "templates", "--lake", lakeDir, "--tenant", "acme", "--format", "jsonl")
	survivor := ""
	for _, l := range strings.Split(strings.TrimSpace(js), "\n") {
		var ti struct {
			ID         uint64 `json:"template_id"`
			Text       string `json:"text"`
			MergedInto uint64 `json:"merged_into"`
		}
		if err := json.Unmarshal([]byte(l), &ti); err != nil {
			t.Fatal(err)
		}
		if ti.Text == "zqx service <*> started" && ti.MergedInto == 0 {
			survivor = fmt.Sprint(ti.ID)
		}
	}
	if survivor == "" {
		t.Fatalf("no live template \"zqx service <*> started\":\n%s", js)
	}
	fam, _ := runCLI(t, "", "query", "--lake", lakeDir, "--template-id", survivor, "--format", "raw")
	if got := strings.Count(fam, "zqx service "); got != 4 || strings.Count(fam, "\n") != 4 {
		t.Fatalf("template %s family holds:\n%s", survivor, fam)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "usage"},
		{[]string{"nope"}, 2, "unknown command"},
		{[]string{"query"}, 2, "--lake is required"},
		{[]string{"query", "--lake", "/tmp/x", "--format", "xml"}, 2, "format"},
		{[]string{"run", "--tenant", "a.b"}, 2, "--tenant"},
		{[]string{"mine"}, 2, "FILE"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		code := runMain(context.Background(), e, tt.args)
		if code != tt.code || !strings.Contains(out.String()+errb.String(), tt.msg) {
			t.Errorf("quarry %v: exit %d, output %q; want exit %d mentioning %q", tt.args, code, out.String()+errb.String(), tt.code, tt.msg)
		}
	}
}

// TestProducerRateFlag runs `quarry producer --rate` against an embedded
// server: a bad rate is a config error naming the key, a good one paces the
// file (at least lines/rate seconds) and writes every line.
func TestProducerRateFlag(t *testing.T) {
	s := natstest.RunServer(t)
	path := filepath.Join(t.TempDir(), "in.log")
	var lines []string
	for i := range 60 {
		lines = append(lines, fmt.Sprintf("line %d of the paced file", i))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := runMain(context.Background(), e, []string{"producer", "--nats", s.URL(), "--input", path, "--tenant", "paced", "--rate", "-1"}); code == 0 || !strings.Contains(errb.String(), "producer.rate") {
		t.Fatalf("--rate -1: exit %d, stderr %q; want an error naming producer.rate", code, errb.String())
	}
	start := time.Now()
	_, stderr := runCLI(t, "", "producer", "--nats", s.URL(), "--input", path, "--tenant", "paced", "--rate", "100")
	if took := time.Since(start); took < 550*time.Millisecond {
		t.Fatalf("60 lines at 100/s took %s, want at least 0.55s", took)
	}
	if !strings.Contains(stderr, "lines=60 ") {
		t.Fatalf("producer did not report 60 lines:\n%s", stderr)
	}
}

// TestRunEventTime feeds a backfill (lines of 2015 and of 2026-11-29, a stack
// trace, a line with no time before it) through `quarry run --input`: each
// record's ts in the lake is its line's event time (a continuation line's
// the line's before it), the date partitions are the event times' UTC days,
// --since/--until select by event time, and every line reads back exactly.
// With --timestamp none the same lines all land on the read day.
func TestRunEventTime(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		"booting, no time yet",
		"2015-10-18 18:01:47,978 INFO [main] org.apache.hadoop: started",
		"java.lang.IllegalStateException: boom",
		"\tat org.apache.Foo.bar(Foo.java:42)",
		"2015-10-18 23:30:00,000 WARN [main] late evening, Berlin time: next UTC day is not reached",
		"[Sun Dec 04 04:47:44 2005] [error] mod_jk child workerEnv in error state 6",
		"2026-11-29T00:00:00.010Z INFO web: GET / 200",
		"crlf continuation\r",
		"I1129 00:00:01.500000    1488 server.go:123] Starting kubelet (klog: a year-less Berlin time)",
	}
	// The timestamps above that carry no zone are Europe/Berlin time.
	want := []struct {
		ts, date string // "" ts: the read time
	}{
		{"", ""},
		{"2015-10-18T16:01:47.978Z", "2015-10-18"},
		{"2015-10-18T16:01:47.978Z", "2015-10-18"},
		{"2015-10-18T16:01:47.978Z", "2015-10-18"},
		{"2015-10-18T21:30:00Z", "2015-10-18"},
		{"2005-12-04T03:47:44Z", "2005-12-04"},
		{"2026-11-29T00:00:00.010Z", "2026-11-29"},
		{"2026-11-29T00:00:00.010Z", "2026-11-29"},
		{"2026-11-28T23:00:01.5Z", "2026-11-28"},
	}
	f := filepath.Join(dir, "backfill.log")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	from := time.Now().UTC()
	runCLI(t, "", "run", "--data", data, "--input", f, "--tenant", "old", "--timezone", "Europe/Berlin", "--timeout", "5m")
	to := time.Now().UTC()
	lakeDir := filepath.Join(data, "lake")

	// Every line back exactly, and each record's ts its event time.
	js, _ := runCLI(t, "", "query", "--lake", lakeDir, "--format", "jsonl")
	type rec struct {
		TS   time.Time `json:"ts"`
		Text string    `json:"line"`
	}
	var got []rec
	for _, l := range strings.Split(strings.TrimSpace(js), "\n") {
		var r rec
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		got = append(got, r)
	}
	if len(got) != len(lines) {
		t.Fatalf("lake holds %d records, want %d:\n%s", len(got), len(lines), js)
	}
	byText := map[string]time.Time{}
	for _, r := range got {
		byText[r.Text] = r.TS
	}
	dates := map[string]bool{}
	for i, l := range lines {
		ts, ok := byText[l]
		if !ok {
			t.Fatalf("line %q not in the lake (jsonl):\n%s", l, js)
		}
		w := want[i]
		if w.ts == "" {
			// The lake keeps microseconds.
			if ts.Before(from.Truncate(time.Microsecond)) || ts.After(to) {
				t.Errorf("line %q: ts %s, want its read time in [%s, %s]", l, ts, from, to)
			}
			dates[from.Format(time.DateOnly)] = true
			continue
		}
		if wt, _ := time.Parse(time.RFC3339Nano, w.ts); !ts.Equal(wt) {
			t.Errorf("line %q: ts %s, want %s", l, ts.UTC().Format(time.RFC3339Nano), w.ts)
		}
		dates[w.date] = true
	}
	raw, _ := runCLI(t, "", "query", "--lake", lakeDir, "--format", "raw")
	gotLines := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
	sort.Strings(gotLines)
	wantLines := append([]string(nil), lines...)
	sort.Strings(wantLines)
	if strings.Join(gotLines, "\n") != strings.Join(wantLines, "\n") {
		t.Fatalf("raw lines differ:\n got %q\nwant %q", gotLines, wantLines)
	}

	// The date column (the lake is partitioned by tenant) holds the event
	// times' UTC days.
	gotDates := lakeDates(t, lakeDir, "old")
	var wantDates []string
	for d := range dates {
		wantDates = append(wantDates, d)
	}
	sort.Strings(wantDates)
	if strings.Join(gotDates, ",") != strings.Join(wantDates, ",") {
		t.Errorf("dates %v, want %v", gotDates, wantDates)
	}

	// --since/--until select by event time.
	for _, tc := range []struct {
		since, until string
		want         []string
	}{
		{"2015-10-18", "2015-10-19", lines[1:5]},
		{"2015-10-18T16:01:47.978Z", "2015-10-18T21:30:00Z", lines[1:4]},
		{"2005-01-01", "2006-01-01", lines[5:6]},
		{"2026-11-29", "2026-11-30", lines[6:8]},
		{"2026-11-28", "2026-11-29", lines[8:9]},
	} {
		raw, _ := runCLI(t, "", "query", "--lake", lakeDir, "--format", "raw", "--since", tc.since, "--until", tc.until)
		got := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
		if raw == "" {
			got = nil
		}
		sort.Strings(got)
		want := append([]string(nil), tc.want...)
		sort.Strings(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("--since %s --until %s: got %q, want %q", tc.since, tc.until, got, want)
		}
	}

	// --timestamp none: every line on the read day, in a lake of its own.
	data2 := filepath.Join(dir, "data2")
	runCLI(t, "", "run", "--data", data2, "--input", f, "--tenant", "old", "--timestamp", "none", "--timeout", "5m")
	d2 := lakeDates(t, filepath.Join(data2, "lake"), "old")
	if len(d2) != 1 || d2[0] != from.Format(time.DateOnly) && d2[0] != time.Now().UTC().Format(time.DateOnly) {
		t.Errorf("--timestamp none: dates %v, want the read day only", d2)
	}
}

// lakeDates are the distinct values of the date column in tenant's live
// records files (read with parquet-go), sorted; the table must be
// partitioned by tenant alone.
func lakeDates(t *testing.T, lakeDir, tenant string) []string {
	t.Helper()
	store, err := objstore.NewLocal(lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	rec := delta.OpenTable(store, lake.RecordsTable)
	snap, err := rec.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l := lake.LayoutOf(snap.Metadata); l.Dated {
		t.Fatalf("a new lake partitioned by %s", l)
	}
	set := map[string]bool{}
	for _, f := range snap.Files {
		if f.PartitionValues["tenant"] != tenant {
			continue
		}
		data, err := store.Get(context.Background(), rec.FileKey(f.Path))
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			Date int32 `parquet:"date"`
		}
		rows, err := parquet.Read[row](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		for _, r := range rows {
			set[recfile.DayString(r.Date)] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// A bad --timestamp or --timezone is a usage error naming the flag.
func TestEventTimeFlagsRejected(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--data", t.TempDir(), "--input", "x", "--timestamp", "iso9999"},
		{"producer", "--nats", "nats://127.0.0.1:1", "--input", "x", "--timezone", "Mars/Olympus"},
	} {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		flagName := args[len(args)-2]
		if code := runMain(context.Background(), e, args); code != 2 || !strings.Contains(errb.String(), flagName) {
			t.Errorf("quarry %v: exit %d, stderr %q; want exit 2 naming %s", args, code, errb.String(), flagName)
		}
	}
}

// slotsReader is stdin for TestRunReservesEncodeSlot: it records the
// encoders' slots in use at each read, while the line source runs.
type slotsReader struct {
	r    io.Reader
	seen []int
}

func (s *slotsReader) Read(p []byte) (int, error) {
	s.seen = append(s.seen, encoder.EncodeSlotsInUse())
	return s.r.Read(p)
}

// TestRunReservesEncodeSlot: while quarry run's line source runs, one of
// the process's encode slots is reserved (the encoders leave a core to the
// WAL's publish→ack path), and the run gives it back once every line is
// in the WAL.
func TestRunReservesEncodeSlot(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("GOMAXPROCS 1: the encoders keep their one slot")
	}
	in := &slotsReader{r: strings.NewReader("first line\nsecond line\n")}
	var out, errb bytes.Buffer
	e := &env{stdin: in, stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	args := []string{"run", "--data", t.TempDir(), "--input", "-", "--tenant", "slots"}
	if code := runMain(context.Background(), e, args); code != 0 {
		t.Fatalf("quarry run: exit %d\n%s", code, errb.String())
	}
	if len(in.seen) == 0 || in.seen[0] != 1 {
		t.Fatalf("encode slots in use at the source's reads: %v, want 1 (reserved) at the first", in.seen)
	}
	if n := encoder.EncodeSlotsInUse(); n != 0 {
		t.Fatalf("encode slots in use after the run: %d, want 0", n)
	}
	if !strings.Contains(out.String(), "lines in        2 ") {
		t.Fatalf("summary:\n%s", out.String())
	}
}

// TestLendSlotWhenIdle: a following run's reserved encode slot goes back
// to the encoders once its source acks nothing for a while (a burst of
// lines ended: their flushes get every core), is taken again when the
// source moves, and is released when the run stops it.
func TestLendSlotWhenIdle(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("GOMAXPROCS 1: the encoders keep their one slot")
	}
	var progress atomic.Uint64
	release, err := encoder.ReserveEncodeSlot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stop := lendSlotWhenIdle(context.Background(), release, progress.Load, 20*time.Millisecond, time.Millisecond)
	for _, step := range []struct {
		what  string
		moves bool // the source keeps acking frames
		want  int
	}{
		{"idle from the start", false, 0},
		{"frames acked", true, 1},
		{"idle again", false, 0},
		{"acked again", true, 1},
	} {
		deadline := time.Now().Add(30 * time.Second)
		for encoder.EncodeSlotsInUse() != step.want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d encode slots in use, want %d", step.what, encoder.EncodeSlotsInUse(), step.want)
			}
			if step.moves {
				progress.Add(1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	stop()
	if n := encoder.EncodeSlotsInUse(); n != 0 {
		t.Fatalf("after stop: %d encode slots in use, want 0", n)
	}
}

// TestRunCompact: a run's encoders leave several records files (a batch a
// file here); with --compact the run ends with them compacted into one,
// though its lines are today's (an open partition), and the lake reads
// back exactly. --compact with --follow is refused.
func TestRunCompact(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.log")
	var b strings.Builder
	for i := range 1000 {
		// A word of its own in each frame of 100 lines: each batch has
		// template events, so each flush writes a templates file too.
		fmt.Fprintf(&b, "job %d of worker w%d took %d ms in %s\n", i, i%7, i*13%997, strings.Repeat(string(rune('a'+i/100)), 3))
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(cfg, []byte("producer:\n  frame_max_records: 100\nencoder:\n  max_batches: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	live := func(lakeDir string) (records, templates int) {
		for p := range liveDataFiles(t, lakeDir) {
			if strings.HasPrefix(p, lake.RecordsTable+"/") {
				records++
			} else {
				templates++
			}
		}
		return records, templates
	}
	// Without --compact: a file per batch, in each table.
	plain := filepath.Join(dir, "plain")
	runCLI(t, "", "run", "--config", cfg, "--data", plain, "--input", in, "--tenant", "acme", "--timestamp", "none", "--timeout", "5m")
	if r, tp := live(filepath.Join(plain, "lake")); r < 2 || tp < 2 {
		t.Fatalf("%d records and %d templates files without --compact, want several of each (a batch a file)", r, tp)
	}
	data := filepath.Join(dir, "data")
	_, stderr := runCLI(t, "", "run", "--config", cfg, "--compact", "--data", data, "--input", in, "--tenant", "acme", "--timestamp", "none", "--timeout", "5m")
	lakeDir := filepath.Join(data, "lake")
	if r, tp := live(lakeDir); r != 1 || tp != 1 || !strings.Contains(stderr, "quarry: compacted 1 partitions: ") {
		t.Fatalf("%d records and %d templates files with --compact, want 1 and 1; stderr:\n%s", r, tp, stderr)
	}
	if got, _ := runCLI(t, "", "query", "--lake", lakeDir, "--format", "raw"); got != b.String() {
		t.Fatalf("the compacted lake reads back %d bytes, the input has %d", len(got), b.Len())
	}
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := runMain(context.Background(), e, []string{"run", "--data", t.TempDir(), "--follow", "--compact"}); code != 2 || !strings.Contains(errb.String(), "--compact needs an input that ends") {
		t.Fatalf("--follow --compact: exit %d, stderr %q", code, errb.String())
	}
}

// TestHealthAddressInUse: a run or a role whose --http address is taken
// fails with that error before it does any work; it used to run on
// without metrics, its health server's error dropped.
func TestHealthAddressInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := natstest.RunServer(t)
	in := filepath.Join(t.TempDir(), "in.log")
	if err := os.WriteFile(in, []byte("one line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "--data", t.TempDir(), "--input", in, "--http", l.Addr().String()},
		{"miner", "--nats", srv.URL(), "--http", l.Addr().String()},
	} {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		code := runMain(ctx, e, args)
		cancel()
		if code != 1 || !strings.Contains(errb.String(), "health listen "+l.Addr().String()) || !strings.Contains(errb.String(), "address already in use") {
			t.Errorf("quarry %s with --http in use: exit %d, stderr %q", args[0], code, errb.String())
		}
		if strings.Contains(errb.String(), "quarry: embedded NATS") {
			t.Errorf("quarry %s started its pipeline before it found the address in use:\n%s", args[0], errb.String())
		}
	}
}
