package delta_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/objstore"
)

// agedLog builds 35 versions in dir with checkpoints at 10, 20 and 30 and
// dates commit file v at base + v hours, so a cut-off time picks a version.
func agedLog(t *testing.T, dir string, base time.Time) (objstore.Store, *delta.Table) {
	t.Helper()
	ctx := context.Background()
	s, err := objstore.NewLocal(dir)
	must(t, err)
	tbl := buildLog(t, s, 10)
	_, err = tbl.Checkpoint(ctx)
	must(t, err)
	buildLogAt(t, s, tbl, 11, 20)
	_, err = tbl.Checkpoint(ctx)
	must(t, err)
	buildLogAt(t, s, tbl, 21, 30)
	_, err = tbl.Checkpoint(ctx)
	must(t, err)
	buildLogAt(t, s, tbl, 31, 35)
	for v := int64(0); v <= 35; v++ {
		at := base.Add(time.Duration(v) * time.Hour)
		must(t, os.Chtimes(filepath.Join(dir, filepath.FromSlash(tbl.CommitKey(v))), at, at))
	}
	return s, tbl
}

func present(t *testing.T, s objstore.Store, key string) bool {
	t.Helper()
	_, err := s.Stat(context.Background(), key)
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// logStart is the oldest commit version present, by listing.
func logStart(t *testing.T, s objstore.Store, tbl *delta.Table) int64 {
	t.Helper()
	for v := int64(0); v <= 35; v++ {
		if present(t, s, tbl.CommitKey(v)) {
			return v
		}
	}
	return -1
}

// sameEverywhere checks the table against want through internal/delta (from
// _last_checkpoint, and from a listing without it) and through the
// independent replay of internal/laketest.
func sameEverywhere(t *testing.T, s objstore.Store, tbl *delta.Table, want *delta.Snapshot) {
	t.Helper()
	ctx := context.Background()
	sameTable(t, s, want)
	files, v, err := laketest.Replay(ctx, s, "t")
	if err != nil || v != want.Version || len(files) != len(want.Files) {
		t.Fatalf("independent replay: version %d, %d files, %v; want %d, %d", v, len(files), err, want.Version, len(want.Files))
	}
	lc, err := s.Get(ctx, tbl.LastCheckpointKey())
	must(t, err)
	must(t, s.Delete(ctx, tbl.LastCheckpointKey()))
	sameTable(t, s, want)
	must(t, s.Put(ctx, tbl.LastCheckpointKey(), lc))
}

func TestCleanupLog(t *testing.T) {
	ctx := context.Background()
	base := time.Now().Add(-100 * time.Hour)
	for _, tc := range []struct {
		name   string
		before time.Duration // after base
		stale  bool          // _last_checkpoint left at 20
		// want: the log's first version after the cleanup.
		want int64
	}{
		{"nothing old enough", -time.Hour, false, 0},
		{"cut-off commit before the first checkpoint", 9 * time.Hour, false, 0},
		{"cut-off commit between checkpoints keeps the older one", 25 * time.Hour, false, 20},
		{"cut-off at a checkpoint", 30 * time.Hour, false, 30},
		{"everything old: the newest checkpoint stays", 1000 * time.Hour, false, 30},
		{"a stale _last_checkpoint bounds the cut-off", 1000 * time.Hour, true, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, tbl := agedLog(t, t.TempDir(), base)
			if tc.stale {
				must(t, s.Put(ctx, tbl.LastCheckpointKey(), []byte(`{"version":20,"size":23}`)))
			}
			want, err := delta.OpenTable(s, "t").Snapshot(ctx)
			must(t, err)
			res, err := tbl.CleanupLog(ctx, base.Add(tc.before))
			must(t, err)
			if got := logStart(t, s, tbl); got != tc.want || res.Start != tc.want {
				t.Fatalf("log starts at %d (result %+v), want %d", got, res, tc.want)
			}
			for v := int64(10); v <= 30; v += 10 {
				if kept := present(t, s, tbl.CheckpointKey(v)); kept != (v >= tc.want) {
					t.Errorf("checkpoint %d present %v after a cleanup to %d", v, kept, tc.want)
				}
			}
			sameEverywhere(t, s, tbl, want)
			// A second pass finds nothing more to do.
			again, err := tbl.CleanupLog(ctx, base.Add(tc.before))
			must(t, err)
			if again.Versions != 0 || again.Start != tc.want {
				t.Fatalf("second cleanup: %+v", again)
			}
		})
	}
}

// TestCleanupLogSkipsTornCheckpoint: a checkpoint that does not read whole
// is never the cut-off, so the commits it would cover stay.
func TestCleanupLogSkipsTornCheckpoint(t *testing.T) {
	ctx := context.Background()
	base := time.Now().Add(-100 * time.Hour)
	s, tbl := agedLog(t, t.TempDir(), base)
	want, err := delta.OpenTable(s, "t").Snapshot(ctx)
	must(t, err)
	data, err := s.Get(ctx, tbl.CheckpointKey(20))
	must(t, err)
	must(t, s.Put(ctx, tbl.CheckpointKey(20), data[:len(data)/2]))
	res, err := tbl.CleanupLog(ctx, base.Add(25*time.Hour))
	must(t, err)
	if res.Start != 10 || res.Checkpoint != 10 || logStart(t, s, tbl) != 10 {
		t.Fatalf("cleanup with a torn checkpoint 20: %+v, log starts at %d; want 10", res, logStart(t, s, tbl))
	}
	sameEverywhere(t, s, tbl, want)
}

const cleanupDirEnv = "QUARRY_DELTA_CLEANUP_CRASH_DIR"

func TestCleanupLogCrashChild(t *testing.T) {
	dir := os.Getenv(cleanupDirEnv)
	if dir == "" {
		t.Skip("run by TestCleanupLogCrash")
	}
	s, err := objstore.NewLocal(dir)
	must(t, err)
	_, err = delta.OpenTable(s, "t").CleanupLog(context.Background(), time.Now())
	t.Fatalf("cleanup returned (%v): the crash point did not fire", err)
}

// TestCleanupLogCrash kills a process after the first deletion of a
// cleanup: the log is a shorter run, every reader still sees the table, and
// the next cleanup finishes the job.
func TestCleanupLogCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	base := time.Now().Add(-100 * time.Hour)
	s, tbl := agedLog(t, dir, base)
	want, err := delta.OpenTable(s, "t").Snapshot(ctx)
	must(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCleanupLogCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), cleanupDirEnv+"="+dir, crashpoint.Env+"="+delta.CrashMidLogCleanup)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != crashpoint.ExitCode {
		t.Fatalf("child: %v, want exit %d\n%s", err, crashpoint.ExitCode, out)
	}
	if got := logStart(t, s, tbl); got != 1 {
		t.Fatalf("after the crash the log starts at %d, want 1 (one version deleted)", got)
	}
	sameEverywhere(t, s, tbl, want)
	res, err := tbl.CleanupLog(ctx, time.Now())
	must(t, err)
	if res.Start != 30 || res.Versions != 29 || logStart(t, s, tbl) != 30 {
		t.Fatalf("cleanup after the crash: %+v, log starts at %d", res, logStart(t, s, tbl))
	}
	sameEverywhere(t, s, tbl, want)
}
