package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/objstore"
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
