package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	out := filepath.Join(dir, "acc.md")
	var stdout, stderr strings.Builder
	if code := run([]string{"-dir", dir, "-datasets", "Tiny", "-write", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "| Tiny | 1.000 | 1.000 |") {
		t.Fatalf("unexpected report:\n%s", stdout.String())
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), "## Method") {
		t.Fatalf("report file: %v", err)
	}
	// Missing data is an error (exit 2), not a pass.
	if code := run([]string{"-dir", filepath.Join(dir, "nope")}, &stdout, &stderr); code != 2 {
		t.Fatalf("missing data: exit %d, want 2", code)
	}
}
