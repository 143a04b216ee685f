package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// QUARRY_CPUPROFILE and QUARRY_MEMPROFILE write pprof profiles (gzipped
// protocol buffers) of a command, and the run's summary states its CPU per
// line.
func TestRunProfilesAndCPU(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	vars := map[string]string{cpuProfileEnv: cpu, memProfileEnv: mem}
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if code := runMain(ctx, e, []string{"run", "--data", filepath.Join(dir, "data"), "--lines", "2000", "--tenants", "acme"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "µs/line") {
		t.Fatalf("summary without the CPU per line:\n%s", out.String())
	}
	for _, f := range []string{cpu, mem} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("%s is not a gzipped profile (%d bytes)", f, len(b))
		}
	}
}

// --rate paces each source: 5 lines of one tenant at 2 lines/s are read
// over at least 2 seconds (line n is due n/rate after the first).
func TestRunRate(t *testing.T) {
	start := time.Now()
	runCLI(t, "", "run", "--data", filepath.Join(t.TempDir(), "data"), "--lines", "5", "--tenants", "acme", "--rate", "2")
	if el := time.Since(start); el < 2*time.Second {
		t.Fatalf("5 lines at --rate 2 took %s", el)
	}
}
