package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quarrylake/quarry/internal/mining"
)

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"  a   b  ", "a b"},
		{"took 12 ms", "took <*> ms"},
		{"blk_<*> done", "<*> done"},
		{"ip <*>.<*>.<*>.<*>:<*>", "ip <*>:<*>"},
		{"x <*><*> y", "x <*> y"},
		{"path <*>/<*>", "path <*>/<*>"},
		{"PS/2 ok", "PS/2 ok"},
		{"v=<*>, w=1", "v=<*>, w=<*>"},
	}
	for _, tt := range tests {
		if got := Normalize(tt.in); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestScore(t *testing.T) {
	d := &Dataset{
		Name:      "x",
		Content:   []string{"a 1", "a 2", "b", "c", "c"},
		Templates: []string{"a <*>", "a <*>", "b", "c", "c"},
	}
	p := &Prediction{
		IDs:   []uint64{1, 1, 2, 2, 3},
		Texts: map[uint64]string{1: "a <*>", 2: "b", 3: "c"},
	}
	s := Score(d, p)
	// group 1 correct (2 lines); group 2 mixes b and c; group 3 is half of c.
	want := Scores{Dataset: "x", GA: 2.0 / 5, PA: 4.0 / 5, PredGroups: 3, Truths: 3}
	want.FGA = 1.0 / 3
	if s.PredGroups != want.PredGroups || s.Truths != want.Truths ||
		math.Abs(s.GA-want.GA) > 1e-9 || math.Abs(s.PA-want.PA) > 1e-9 || math.Abs(s.FGA-want.FGA) > 1e-9 {
		t.Fatalf("Score = %+v, want %+v", s, want)
	}
	// FTA: group 3 has one truth "c" equal to its text, so it counts:
	// 2 correct of 3 predicted and 3 true templates.
	if math.Abs(s.FTA-2.0/3) > 1e-9 {
		t.Fatalf("FTA = %v, want %v", s.FTA, 2.0/3)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "Tiny"), 0o755); err != nil {
		t.Fatal(err)
	}
	csvText := "LineId,Content,EventId,EventTemplate\n" +
		"1,\"open file a, mode 1\",E1,\"open file a, mode <*>\"\n" +
		"2,\"open file a, mode 2\",E1,\"open file a, mode <*>\"\n" +
		"3,close,E2,close\n"
	if err := os.WriteFile(filepath.Join(dir, "Tiny", "Tiny_2k.log_structured_corrected.csv"), []byte(csvText), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := "2024-01-02 10:00:00 INFO open file a, mode 1\n2024-01-02 10:00:01 INFO open file a, mode 2\n2024-01-02 10:00:02 WARN close\n"
	if err := os.WriteFile(filepath.Join(dir, "Tiny", "Tiny_2k.log"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "acc.md")
	var stdout, stderr strings.Builder
	if code := run([]string{"-dir", dir, "-datasets", "Tiny", "-write", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "| Tiny | 1.000 | 1.000 |") {
		t.Fatalf("unexpected report:\n%s", stdout.String())
	}
	if !strings.Contains(stdout.String(), "| Tiny | 1.000 | 1.000 | 1.000 | 1.000 |") {
		t.Fatalf("no held-one-out or raw-line row:\n%s", stdout.String())
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), "## Method") || !strings.Contains(string(b), "## Leave one dataset out") {
		t.Fatalf("report file: %v", err)
	}
	// -summary prints one line of averages and nothing else (scripts/bench.sh parses it).
	stdout.Reset()
	if code := run([]string{"-dir", dir, "-datasets", "Tiny", "-summary"}, &stdout, &stderr); code != 0 {
		t.Fatalf("-summary: exit %d, stderr %s", code, stderr.String())
	}
	if got := stdout.String(); got != "ga=1.000 pa=1.000 loo_ga=1.000 loo_pa=1.000 raw_ga=1.000\n" {
		t.Fatalf("-summary printed %q", got)
	}
	// Missing data is an error (exit 2), not a pass.
	if code := run([]string{"-dir", filepath.Join(dir, "nope")}, &stdout, &stderr); code != 2 {
		t.Fatalf("missing data: exit %d, want 2", code)
	}
}

func TestLeaveOneOut(t *testing.T) {
	// Two datasets where the best knob differs: LOO must pick, for each,
	// the setting that is best on the other one.
	a := &Dataset{Name: "a", Content: []string{"x 1", "x 2"}, Templates: []string{"x <*>", "x <*>"}}
	b := &Dataset{Name: "b", Content: []string{"y 1", "z 1"}, Templates: []string{"y <*>", "z <*>"}}
	base := mining.DefaultConfig()
	rows, err := LeaveOneOut([]*Dataset{a, b}, Grid(base))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Dataset != "a" || rows[1].Dataset != "b" {
		t.Fatalf("rows = %+v", rows)
	}
	for _, r := range rows {
		if r.Scores.GA != 1 {
			t.Errorf("%s: held-one-out GA %v, want 1", r.Dataset, r.Scores.GA)
		}
		if !sameKnobs(r.Chosen, base) {
			t.Errorf("%s: chose %+v on a tie, want the base configuration", r.Dataset, r.Chosen)
		}
	}
}

func TestLoadRawCountsLines(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "T"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "T", "T_2k.log"), []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &Dataset{Name: "T", Content: []string{"a", "b", "c"}, Templates: []string{"a", "b", "c"}}
	if _, err := LoadRaw(dir, d); err == nil {
		t.Fatal("LoadRaw accepted a raw file shorter than the ground truth")
	}
}
