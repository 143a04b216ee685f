// Package quarrybin gives multi-process tests a quarry binary: the one named
// by QUARRY_BIN, or one built from this checkout.
package quarrybin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Path returns $QUARRY_BIN when set, else builds ./cmd/quarry of this
// checkout into dir and returns its path.
func Path(t testing.TB, dir string) string {
	t.Helper()
	if bin := os.Getenv("QUARRY_BIN"); bin != "" {
		return bin
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(dir, "quarry")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/quarry")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build quarry: %v\n%s", err, out)
	}
	return bin
}
