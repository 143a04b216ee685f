package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

// queryLines are the input of the query tests: three families a miner
// cannot mistake (named parameters, positions), and one single line.
func queryLines() []string {
	var lines []string
	statuses := []int{200, 404, 500, 503}
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("GET /api/item%d status=%d took %d ms", i%7, statuses[i%4], i*3))
	}
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("user u%d logged in from 10.0.0.%d", i%13, i%250))
	}
	for i := range 50 {
		lines = append(lines, fmt.Sprintf("ERROR disk sd%c is full", 'a'+i%3))
	}
	return append(lines, "kernel panic: attempted to kill init")
}

// queryLake runs the lines through `quarry run --input` once per test
// binary run and returns the lake.
func queryLake(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	lines := queryLines()
	in := filepath.Join(dir, "in.log")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "", "run", "--data", filepath.Join(dir, "data"), "--input", in, "--tenant", "acme", "--timeout", "5m")
	return filepath.Join(dir, "data", "lake"), lines
}

// quarryExit runs the CLI and returns its exit code and output.
func quarryExit(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code := runMain(context.Background(), e, args)
	return code, out.String(), errb.String()
}

func grep(lines []string, keep func(string) bool) []string {
	var out []string
	for _, l := range lines {
		if keep(l) {
			out = append(out, l)
		}
	}
	return out
}

// field is the number after name= or the word after name (0 if absent).
func num(l, re string) int {
	m := regexp.MustCompile(re).FindStringSubmatch(l)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestQueryLanguageCLI(t *testing.T) {
	lk, lines := queryLake(t)
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	has := func(sub string) func(string) bool { return func(l string) bool { return strings.Contains(l, sub) } }
	// The template id of the kernel line, for template:N.
	code, out, errs := quarryExit("query", "--lake", lk, "--format", "raw", "kernel | count by template")
	if code != 0 {
		t.Fatalf("count by template: exit %d: %s", code, errs)
	}
	kernelID := strings.Split(strings.TrimSpace(out), "\t")[0]

	for _, c := range []struct {
		name  string
		query string
		flags []string
		want  []string // lines, compared as multisets
	}{
		{"everything", "", nil, lines},
		{"term", "GET", nil, grep(lines, has("GET"))},
		{"phrase", `"logged in from 10.0.0.1"`, nil, grep(lines, has("logged in from 10.0.0.1"))},
		{"and", "item3 took", nil, grep(lines, func(l string) bool { return has("item3")(l) && has("took")(l) })},
		{"or", "item3 OR sdb", nil, grep(lines, func(l string) bool { return has("item3")(l) || has("sdb")(l) })},
		{"not", "-GET -user", nil, grep(lines, func(l string) bool { return !has("GET")(l) && !has("user")(l) })},
		{"NOT and parentheses", "NOT (GET OR ERROR)", nil, grep(lines, func(l string) bool { return !has("GET")(l) && !has("ERROR")(l) })},
		{"wildcard", "GET*503", nil, grep(lines, regexp.MustCompile(`GET.*503`).MatchString)},
		{"regex", `/item[35] status=5\d\d/`, nil, grep(lines, regexp.MustCompile(`item[35] status=5\d\d`).MatchString)},
		{"template", "template:" + kernelID, nil, []string{"kernel panic: attempted to kill init"}},
		{"tenant field", "tenant:acme sdc", nil, grep(lines, has("sdc"))},
		{"other tenant", "tenant:globex", nil, nil},
		{"named parameter", "status=404", nil, grep(lines, has("status=404 "))},
		{"named parameter compare", "status>=500 item1", nil, grep(lines, func(l string) bool { return num(l, `status=(\d+)`) >= 500 && has("item1 ")(l) })},
		{"positional parameter", "GET param[2]>500", nil, grep(lines, func(l string) bool { return num(l, `took (\d+) ms`) > 500 })},
		{"limit pipe", "GET | limit 1000", nil, grep(lines, has("GET"))},
		{"flags after the query", "sda", []string{"--tenant", "acme"}, grep(lines, has("sda"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"query", "--lake", lk, "--format", "raw", c.query}, c.flags...)
			code, out, errs := quarryExit(args...)
			if code != 0 {
				t.Fatalf("quarry %q: exit %d: %s", args, code, errs)
			}
			var got []string
			if out != "" {
				got = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			}
			if len(c.want) == 0 && len(got) == 0 {
				return
			}
			if !slices.Equal(sorted(got), sorted(c.want)) {
				t.Fatalf("quarry query %q: %d lines, want %d\n got %q\nwant %q", c.query, len(got), len(c.want), head(got), head(c.want))
			}
		})
	}

	t.Run("limit", func(t *testing.T) {
		for _, args := range [][]string{{"GET | limit 3"}, {"GET", "--limit", "3"}, {"GET | limit 10", "--limit", "3"}} {
			_, out, _ := quarryExit(append([]string{"query", "--lake", lk, "--format", "raw"}, args...)...)
			got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(got) != 3 || !strings.HasPrefix(got[0], "GET") {
				t.Errorf("%q: %q, want 3 GET lines", args, got)
			}
		}
	})

	t.Run("count by template", func(t *testing.T) {
		_, out, _ := quarryExit("query", "--lake", lk, "--format", "raw", "| count by template")
		sum, rows := 0, strings.Split(strings.TrimSpace(out), "\n")
		for _, r := range rows {
			f := strings.Split(r, "\t")
			n, err := strconv.Atoi(f[len(f)-1])
			if len(f) != 2 || err != nil {
				t.Fatalf("row %q: want TEMPLATE<TAB>COUNT", r)
			}
			sum += n
		}
		if sum != len(lines) || len(rows) < 4 {
			t.Fatalf("count by template sums to %d over %d rows, want %d over 4 or more:\n%s", sum, len(rows), len(lines), out)
		}
		_, js, _ := quarryExit("query", "--lake", lk, "--format", "jsonl", "| count by template")
		var first struct {
			Template string `json:"template"`
			Count    int    `json:"count"`
		}
		if err := json.Unmarshal([]byte(strings.SplitN(js, "\n", 2)[0]), &first); err != nil || first.Template == "" || first.Count < 200 {
			t.Fatalf("jsonl %q: %+v %v", js, first, err)
		}
		_, tab, _ := quarryExit("query", "--lake", lk, "--format", "table", "| count by template")
		if !strings.HasPrefix(tab, "TEMPLATE") || !strings.Contains(tab, "COUNT") {
			t.Fatalf("table:\n%s", tab)
		}
	})

	t.Run("count by 5m", func(t *testing.T) {
		_, out, _ := quarryExit("query", "--lake", lk, "--format", "raw", "ERROR | count by 5m")
		sum := 0
		for _, r := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Split(r, "\t")
			if len(f) != 2 || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:[0-5]\d:00Z$`).MatchString(f[0]) {
				t.Fatalf("row %q: want BUCKET<TAB>COUNT with a 5-minute RFC 3339 bucket", r)
			}
			n, _ := strconv.Atoi(f[1])
			sum += n
		}
		if sum != 50 {
			t.Fatalf("ERROR by 5m sums to %d, want 50:\n%s", sum, out)
		}
	})

	t.Run("count and top", func(t *testing.T) {
		_, out, _ := quarryExit("query", "--lake", lk, "--format", "raw", "took | count")
		if out != "200\n" {
			t.Errorf("took | count: %q", out)
		}
		_, out, _ = quarryExit("query", "--lake", lk, "--format", "raw", "GET | top 2 status")
		if out != "200\t50\n404\t50\n" {
			t.Errorf("top 2 status: %q", out)
		}
		_, out, _ = quarryExit("query", "--lake", lk, "--format", "raw", "nothing-like-this | count")
		if out != "0\n" {
			t.Errorf("a count of nothing: %q, want 0", out)
		}
	})

	t.Run("bad queries", func(t *testing.T) {
		for _, c := range []struct{ query, msg, caret string }{
			{"status=404 | top x path", "col 18: bad number", "\nstatus=404 | top x path\n                 ^\n"},
			{"(GET OR user", "col 1:", "\n(GET OR user\n^\n"},
			{"GET OR", "col ", "\nGET OR\n"},
			{"/[a/", "col 1:", "\n/[a/\n^\n"},
			{"nosuchfield:x", "col 1:", "\nnosuchfield:x\n^\n"},
			{"| frobnicate", "col 3:", "\n| frobnicate\n  ^\n"},
		} {
			code, out, errs := quarryExit("query", "--lake", lk, c.query)
			if code != 2 || out != "" || !strings.Contains(errs, c.msg) || !strings.Contains(errs, c.caret) {
				t.Errorf("quarry query %q: exit %d, stdout %q, stderr %q; want exit 2 with %q and the caret %q", c.query, code, out, errs, c.msg, c.caret)
			}
		}
		code, _, errs := quarryExit("query", "--lake", lk, "GET", "user")
		if code != 2 || !strings.Contains(errs, "one query argument") {
			t.Errorf("two query arguments: exit %d, %q", code, errs)
		}
		code, _, errs = quarryExit("query", "--lake", lk, "--formt", "raw", "GET")
		if code != 2 || !strings.Contains(errs, "flag provided but not defined: -formt") {
			t.Errorf("a misspelt flag: exit %d, %q", code, errs)
		}
	})
}

func head(s []string) []string { return s[:min(len(s), 5)] }

// emptyLake is a lake with both tables and no file.
func emptyLake(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, tpl := delta.OpenTable(store, lake.RecordsTable), delta.OpenTable(store, lake.TemplatesTable)
	if err := rec.Create(ctx, delta.Metadata{Name: "records", SchemaString: lake.RecordsSchemaString(), PartitionColumns: lake.DatedLayout.PartitionColumns()}); err != nil {
		t.Fatal(err)
	}
	if err := tpl.Create(ctx, delta.Metadata{Name: "templates", SchemaString: lake.TemplatesSchemaString}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// gcWatch is a stdout that notes the collector's settings while the
// command writes to it.
type gcWatch struct {
	writes int
	pct    int
	limit  int64
}

func (w *gcWatch) Write(p []byte) (int, error) {
	w.writes++
	w.pct = debug.SetGCPercent(-1)
	debug.SetGCPercent(w.pct)
	w.limit = debug.SetMemoryLimit(-1) // negative: only reads it
	return len(p), nil
}

// TestQueryBatchGC: a query runs with the collector off until the heap
// reaches batchHeapLimit (its first collection was about a fifth of a
// selective term's CPU), unless GOGC or GOMEMLIMIT is set, and the settings
// are restored when it returns.
func TestQueryBatchGC(t *testing.T) {
	dir := emptyLake(t)
	pct := debug.SetGCPercent(-1)
	debug.SetGCPercent(pct)
	limit := debug.SetMemoryLimit(-1)
	for _, c := range []struct {
		env       map[string]string
		wantPct   int
		wantLimit int64
	}{
		{nil, -1, batchHeapLimit},
		{map[string]string{"GOGC": "100"}, pct, limit},
		{map[string]string{"GOMEMLIMIT": "1GiB"}, pct, limit},
	} {
		w := &gcWatch{}
		e := &env{stdin: strings.NewReader(""), stdout: w, stderr: io.Discard, getenv: func(k string) string { return c.env[k] }}
		if code := runMain(context.Background(), e, []string{"query", "--lake", dir, "--format", "raw", "| count"}); code != 0 {
			t.Fatalf("env %v: exit %d", c.env, code)
		}
		if w.writes == 0 || w.pct != c.wantPct || w.limit != c.wantLimit {
			t.Errorf("env %v: while writing (%d writes) GC percent %d, memory limit %d; want %d, %d", c.env, w.writes, w.pct, w.limit, c.wantPct, c.wantLimit)
		}
		if p, l := debug.SetGCPercent(pct), debug.SetMemoryLimit(-1); p != pct || l != limit {
			t.Errorf("env %v: after the query GC percent %d, memory limit %d; want %d, %d restored", c.env, p, l, pct, limit)
		}
	}
}

// TestQueryEmptyLakeAndNoLake: a lake with both tables and no record
// answers every query with nothing (a count with 0); a path without a lake
// is a usage error, also with a query.
func TestQueryEmptyLakeAndNoLake(t *testing.T) {
	dir := emptyLake(t)
	for _, c := range []struct{ query, format, want string }{
		{"", "raw", ""},
		{"error", "raw", ""},
		{"| count by template", "raw", ""},
		{"| count", "raw", "0\n"},
		{"error", "table", lake.TableHeader + "\n"},
	} {
		code, out, errs := quarryExit("query", "--lake", dir, "--format", c.format, c.query)
		if code != 0 || strings.Join(strings.Fields(out), " ") != strings.Join(strings.Fields(c.want), " ") {
			t.Errorf("empty lake, %q: exit %d, stdout %q, stderr %q; want %q", c.query, code, out, errs, c.want)
		}
	}
	// -h is the usage, as for every command, not the query NOT h; -- makes it one.
	for _, h := range []string{"-h", "-help", "--help"} {
		if code, out, errs := quarryExit("query", h); !strings.Contains(out+errs, "Usage: quarry query") || strings.Contains(errs, "--lake is required") {
			t.Errorf("quarry query %s: exit %d, stdout %q, stderr %q; want the usage", h, code, out, errs)
		}
	}
	if code, out, errs := quarryExit("query", "--lake", dir, "--format", "raw", "--", "-h"); code != 0 || out != "" {
		t.Errorf("quarry query -- -h: exit %d, stdout %q, stderr %q; want no line", code, out, errs)
	}
	missing := filepath.Join(dir, "nope")
	code, out, errs := quarryExit("query", "--lake", missing, "error | count")
	if code != 2 || out != "" || !strings.Contains(errs, "no Delta table") {
		t.Errorf("no lake: exit %d, stdout %q, stderr %q; want exit 2 and no Delta table", code, out, errs)
	}
}
