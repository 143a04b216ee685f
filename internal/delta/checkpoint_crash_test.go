package delta_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"testing"

	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
)

// buildLog writes versions 1..n, each one add and a txn, and returns the
// table.
func buildLog(t *testing.T, s objstore.Store, n int) *delta.Table {
	t.Helper()
	ctx := context.Background()
	tbl := create(t, s, "t")
	for v := 1; v <= n; v++ {
		a := putFile(t, s, tbl, fmt.Sprintf("tenant=a/f%03d.parquet", v), 8)
		a.Tags = map[string]string{"quarry.report": fmt.Sprint("r", v)}
		must(t, tbl.Commit(ctx, int64(v), []delta.Action{{Add: &a}, {Txn: &delta.Txn{AppID: "quarry", Version: int64(10 * v)}}}))
	}
	return tbl
}

// sameTable fails unless a fresh reader of s sees want (files up to
// dataChange, txns, version) and the log validates.
func sameTable(t *testing.T, s objstore.Store, want *delta.Snapshot) {
	t.Helper()
	ctx := context.Background()
	got, err := delta.OpenTable(s, "t").Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if got.Version != want.Version || !reflect.DeepEqual(dataChangeFalse(got.Files), dataChangeFalse(want.Files)) ||
		!reflect.DeepEqual(got.Txns, want.Txns) {
		t.Fatalf("snapshot differs:\n got v%d %d files %v\nwant v%d %d files %v", got.Version, len(got.Files), got.Txns,
			want.Version, len(want.Files), want.Txns)
	}
	must(t, delta.ValidateLog(ctx, s, "t"))
}

func lastCheckpoint(t *testing.T, s objstore.Store, tbl *delta.Table) delta.LastCheckpoint {
	t.Helper()
	data, err := s.Get(context.Background(), tbl.LastCheckpointKey())
	must(t, err)
	var lc delta.LastCheckpoint
	must(t, json.Unmarshal(data, &lc))
	return lc
}

// TestLastCheckpointFile checks _last_checkpoint's fields and that a reader
// starts from it without listing the log.
func TestLastCheckpointFile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tbl := buildLog(t, s, 12)
	v, err := tbl.Checkpoint(ctx)
	if err != nil || v != 12 {
		t.Fatalf("checkpoint: %d, %v", v, err)
	}
	raw, err := s.Get(ctx, tbl.LastCheckpointKey())
	must(t, err)
	var fields map[string]any
	must(t, json.Unmarshal(raw, &fields))
	info, err := s.Stat(ctx, tbl.CheckpointKey(12))
	must(t, err)
	// protocol + metaData + one txn + 12 adds.
	if fields["version"] != 12.0 || fields["size"] != 15.0 || fields["sizeInBytes"] != float64(info.Size) || fields["numOfAddFiles"] != 12.0 {
		t.Fatalf("_last_checkpoint %s (checkpoint is %d bytes)", raw, info.Size)
	}
	want, err := tbl.Snapshot(ctx)
	must(t, err)
	faults := objstore.NewFaults(1)
	got, err := delta.OpenTable(objstore.NewFaulty(s, faults), "t").Snapshot(ctx)
	must(t, err)
	if n := faults.Calls(objstore.OpList); n != 0 {
		t.Fatalf("a reader with _last_checkpoint listed the log %d times", n)
	}
	// _last_checkpoint, the checkpoint in one read, version 13 (absent):
	// no ranged reads, which cost a request per page on S3.
	if gets, opens := faults.Calls(objstore.OpGet), faults.Calls(objstore.OpOpen); gets != 3 || opens != 0 {
		t.Fatalf("a reader from _last_checkpoint made %d gets and %d ranged opens, want 3 and 0", gets, opens)
	}
	if got.Version != 12 || !reflect.DeepEqual(got.Files, dataChangeFalse(want.Files)) {
		t.Fatalf("snapshot from _last_checkpoint: v%d %d files", got.Version, len(got.Files))
	}
}

// TestCheckpointFallback damages the newest checkpoint or _last_checkpoint
// in each way a crash or a bad disk can, with the commits the newest
// checkpoint covers deleted where the case allows it, so the reader can only
// succeed by falling back to the previous checkpoint (or to the log).
func TestCheckpointFallback(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// damage breaks the table after checkpoints at 10 and 20 (of 25
		// versions); it returns the commits it is safe to delete (those
		// the surviving start point covers).
		damage func(t *testing.T, s objstore.Store, tbl *delta.Table) (deleteThrough int64)
	}{
		{"partial checkpoint parquet", func(t *testing.T, s objstore.Store, tbl *delta.Table) int64 {
			data, err := s.Get(ctx, tbl.CheckpointKey(20))
			must(t, err)
			must(t, s.Put(ctx, tbl.CheckpointKey(20), data[:len(data)/2]))
			return 10
		}},
		{"garbage checkpoint parquet", func(t *testing.T, s objstore.Store, tbl *delta.Table) int64 {
			must(t, s.Put(ctx, tbl.CheckpointKey(20), []byte("PAR1 not really PAR1")))
			return 10
		}},
		{"_last_checkpoint names a missing checkpoint", func(t *testing.T, s objstore.Store, tbl *delta.Table) int64 {
			must(t, s.Delete(ctx, tbl.CheckpointKey(20)))
			return 10
		}},
		{"_last_checkpoint names a future checkpoint", func(t *testing.T, s objstore.Store, tbl *delta.Table) int64 {
			must(t, s.Put(ctx, tbl.LastCheckpointKey(), []byte(`{"version":30,"size":40}`)))
			return 20
		}},
		{"_last_checkpoint size disagrees", func(t *testing.T, s objstore.Store, tbl *delta.Table) int64 {
			must(t, s.Put(ctx, tbl.LastCheckpointKey(), []byte(`{"version":20,"size":3}`)))
			return 20
		}},
		{"_last_checkpoint is not JSON", func(t *testing.T, s objstore.Store, tbl *delta.Table) int64 {
			must(t, s.Put(ctx, tbl.LastCheckpointKey(), []byte(`{"vers`)))
			return 20
		}},
		{"_last_checkpoint missing", func(t *testing.T, s objstore.Store, tbl *delta.Table) int64 {
			must(t, s.Delete(ctx, tbl.LastCheckpointKey()))
			return 20
		}},
		{"every checkpoint damaged, full log", func(t *testing.T, s objstore.Store, tbl *delta.Table) int64 {
			must(t, s.Put(ctx, tbl.CheckpointKey(10), []byte("x")))
			must(t, s.Put(ctx, tbl.CheckpointKey(20), []byte("x")))
			return -1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			tbl := buildLog(t, s, 10)
			_, err := tbl.Checkpoint(ctx)
			must(t, err)
			buildLogAt(t, s, tbl, 11, 20)
			_, err = tbl.Checkpoint(ctx)
			must(t, err)
			buildLogAt(t, s, tbl, 21, 25)
			want, err := delta.OpenTable(s, "t").Snapshot(ctx)
			must(t, err)
			sameTable(t, s, want)
			through := tc.damage(t, s, tbl)
			for v := int64(0); v <= through; v++ {
				must(t, s.Delete(ctx, tbl.CommitKey(v)))
			}
			sameTable(t, s, want)
		})
	}
}

// buildLogAt appends versions from..to like buildLog.
func buildLogAt(t *testing.T, s objstore.Store, tbl *delta.Table, from, to int) {
	t.Helper()
	for v := from; v <= to; v++ {
		a := putFile(t, s, tbl, fmt.Sprintf("tenant=a/f%03d.parquet", v), 8)
		must(t, tbl.Commit(context.Background(), int64(v), []delta.Action{{Add: &a}, {Txn: &delta.Txn{AppID: "quarry", Version: int64(10 * v)}}}))
	}
}

// crashDirEnv makes TestCheckpointCrashChild checkpoint the table in that
// directory (with a crash point armed by the parent).
const crashDirEnv = "QUARRY_DELTA_CHECKPOINT_CRASH_DIR"

func TestCheckpointCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCheckpointCrashBeforeLastCheckpoint")
	}
	s, err := objstore.NewLocal(dir)
	must(t, err)
	_, err = delta.OpenTable(s, "t").Checkpoint(context.Background())
	t.Fatalf("checkpoint returned (%v): the crash point did not fire", err)
}

// TestCheckpointCrashBeforeLastCheckpoint kills a process between the
// checkpoint Parquet write and _last_checkpoint: the table stays readable
// (from the old _last_checkpoint, and from the listing once the log it
// covers is gone, even when the new checkpoint is torn), and the next
// checkpoint moves _last_checkpoint on.
func TestCheckpointCrashBeforeLastCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := objstore.NewLocal(dir)
	must(t, err)
	tbl := buildLog(t, s, 10)
	_, err = tbl.Checkpoint(ctx)
	must(t, err)
	buildLogAt(t, s, tbl, 11, 20)
	want, err := tbl.Snapshot(ctx)
	must(t, err)

	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashpoint.Env+"="+delta.CrashBeforeLastCheckpoint)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != crashpoint.ExitCode {
		t.Fatalf("child: %v, want exit %d\n%s", err, crashpoint.ExitCode, out)
	}
	if _, err := s.Stat(ctx, tbl.CheckpointKey(20)); err != nil {
		t.Fatalf("the crash came before the checkpoint was written: %v", err)
	}
	if lc := lastCheckpoint(t, s, tbl); lc.Version != 10 {
		t.Fatalf("_last_checkpoint moved to %d before the crash point", lc.Version)
	}
	sameTable(t, s, want)
	// A torn new checkpoint (a store without atomic puts) is skipped too.
	data, err := s.Get(ctx, tbl.CheckpointKey(20))
	must(t, err)
	must(t, s.Put(ctx, tbl.CheckpointKey(20), data[:len(data)-9]))
	sameTable(t, s, want)
	// The next interval's checkpoint repairs it and moves the pointer.
	v, err := delta.OpenTable(s, "t").Checkpoint(ctx)
	if err != nil || v != 20 {
		t.Fatalf("checkpoint after the crash: %d, %v", v, err)
	}
	if lc := lastCheckpoint(t, s, tbl); lc.Version != 20 {
		t.Fatalf("_last_checkpoint after the retry: %d", lc.Version)
	}
	for v := int64(0); v <= 20; v++ {
		must(t, s.Delete(ctx, tbl.CommitKey(v)))
	}
	sameTable(t, s, want)
}
