//go:build chaos

package chaos

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/quarrybin"
)

// TestCheckVacuumCountsEveryTable: checkVacuum, which ends every chaos
// round, passes on a lake whose orphans are in the records and the progress
// table (a committer killed between writing a progress file and committing
// it leaves one there, and vacuum deletes it), and still catches an orphan
// vacuum would leave.
func TestCheckVacuumCountsEveryTable(t *testing.T) {
	bin := quarrybin.Path(t, t.TempDir())
	dir := t.TempDir()
	in := filepath.Join(dir, "in.log")
	if err := os.WriteFile(in, []byte("2026-12-05T09:00:00Z one line\n2026-12-05T09:00:01Z two line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(bin, "run", "--data", data, "--input", in, "--tenant", "acme", "--timeout", "2m").CombinedOutput(); err != nil {
		t.Fatalf("quarry run: %v\n%s", err, out)
	}
	lakeDir := filepath.Join(data, "lake")
	store, err := objstore.NewLocal(lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, key := range []string{"records/tenant=acme/part-orphan.zstd.parquet", "progress/part-orphan.parquet"} {
		if err := store.Put(ctx, key, []byte("not committed")); err != nil {
			t.Fatal(err)
		}
	}
	n, errs := checkVacuum(ctx, bin, lakeDir, store)
	if len(errs) > 0 || n != 2 {
		t.Fatalf("checkVacuum: %d deleted, errors %v", n, errs)
	}
	// A file vacuum cannot see (a hidden segment) is not an orphan it
	// must delete: no error. One in a table dataFiles lists but vacuum
	// keeps must be reported; vacuum keeps files younger than retention,
	// so a file in the future is one.
	key := "records/tenant=acme/part-future.zstd.parquet"
	if err := store.Put(ctx, key, []byte("x")); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(lakeDir, filepath.FromSlash(key)), future, future); err != nil {
		t.Fatal(err)
	}
	_, errs = checkVacuum(ctx, bin, lakeDir, store)
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), "part-future") {
		t.Fatalf("an orphan vacuum left was not reported: %v", errs)
	}
}
