package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestInitsLight: every process of the one binary (a query as much as the
// pipeline) runs the package initialisation of every package linked into
// it, so quarry's own packages do no work there that a process may not
// need (schemas built by a JSON merge, tables): each allocates at most
// 4 KB while the process starts (GODEBUG=inittrace=1 of this test binary,
// which links what cmd/quarry links; cmd/quarry itself is left out here,
// its test files' variables are part of its init in a test binary).
func TestInitsLight(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", os.Args[0], err, out)
	}
	re := regexp.MustCompile(`(?m)^init (github\.com/quarrylake/quarry/\S+) @.* (\d+) bytes, (\d+) allocs$`)
	seen := 0
	for _, m := range re.FindAllSubmatch(out, -1) {
		seen++
		if string(m[1]) == "github.com/quarrylake/quarry/cmd/quarry" {
			continue
		}
		bytes, _ := strconv.Atoi(string(m[2]))
		if bytes > 4096 {
			t.Errorf("init %s allocates %d bytes (%s allocs) at process start", m[1], bytes, m[3])
		}
	}
	if seen < 3 {
		t.Fatalf("inittrace shows %d of quarry's packages:\n%s", seen, out)
	}
}
