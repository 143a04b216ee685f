package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

// TestReadersRefuseNoTable: a lake URL with no Delta table is a usage error
// naming the URL (exit 2), never an empty result, and a missing local path
// is not created.
func TestReadersRefuseNoTable(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such", "path")
	empty := filepath.Join(dir, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"query"}, {"templates"}, {"vacuum", "--dry-run"}} {
		for _, lk := range []string{missing, empty, "file://" + missing, "file://" + empty} {
			args := append(append([]string(nil), cmd...), "--lake", lk)
			var out, errb bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
			code := runMain(context.Background(), e, args)
			if code != 2 || !strings.Contains(errb.String(), lk) || !strings.Contains(errb.String(), "no Delta table") || out.Len() != 0 {
				t.Errorf("quarry %v: exit %d, stdout %q, stderr %q; want exit 2 naming %s and no Delta table", args, code, out.String(), errb.String(), lk)
			}
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a reader created %s: %v", missing, err)
	}
}

// TestRunSummaryCountsDeadLettersByStage: a line the producer dead-letters
// and a WAL message the miner dead-letters both count in the run summary,
// by stage.
func TestRunSummaryCountsDeadLettersByStage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, cfg := startPipeline(ctx, t, 0)
	// A WAL message that is no frame: the miner dead-letters it.
	if _, err := p.JS.Publish(ctx, streams.LineSubject("acme"), []byte("not a frame")); err != nil {
		t.Fatal(err)
	}
	// A line longer than max_record_bytes: the producer dead-letters it.
	in := "short line one\n" + strings.Repeat("x", 200) + "\nshort line two\n"
	src, _ := publishCommitted(ctx, t, p, producer.Config{Tenant: "acme", MaxRecordBytes: 100}, in)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printSummaryAt(ctx, &out, p, cfg, src, time.Second, 0, []string{"acme"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(2 dead-lettered)", "dead letters    miner 1, producer 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary does not say %q:\n%s", want, out.String())
		}
	}
}

// TestRunReadsTheRootConfig: `quarry run` reads the same sections as the
// roles, producer: included (it used to read only pipeline.*), and the old
// pipeline: wrapper still works with a warning that says what to rename.
func TestRunReadsTheRootConfig(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.log")
	if err := os.WriteFile(in, []byte("a short line\n"+strings.Repeat("y", 64)+"\nanother short line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, yaml, warn string
	}{
		{"root sections", "producer:\n  max_record_bytes: 32\nencoder:\n  max_age: 200ms\n", ""},
		{"old pipeline wrapper", "producer:\n  max_record_bytes: 32\npipeline:\n  encoder:\n    max_age: 200ms\n", "pipeline.encoder -> encoder"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "quarry.yaml")
			if err := os.WriteFile(cfg, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			out, stderr := runCLI(t, "", "run", "--config", cfg, "--data", filepath.Join(t.TempDir(), "data"), "--input", in, "--tenant", "acme")
			if !strings.Contains(out, "lines in        2 (1 dead-lettered)") || !strings.Contains(out, "dead letters    producer 1") {
				t.Errorf("summary:\n%s", out)
			}
			if tt.warn != "" && !strings.Contains(stderr, tt.warn) {
				t.Errorf("no warning %q:\n%s", tt.warn, stderr)
			}
			if tt.warn == "" && strings.Contains(stderr, "config uses") {
				t.Errorf("unexpected warning:\n%s", stderr)
			}
		})
	}
}
