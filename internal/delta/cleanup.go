package delta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/objstore"
)

// CrashMidLogCleanup: CleanupLog deleted the oldest log entry of its range
// and not the rest.
const CrashMidLogCleanup = "delta.log-cleanup.partway"

// maxCheckpointProbes bounds how many versions below the cut-off commit
// CleanupLog looks at for a checkpoint (a table checkpointed every N
// versions needs N at most).
const maxCheckpointProbes = 10_000

// Cleanup is what one CleanupLog call did.
type Cleanup struct {
	// Start is the oldest version in the log afterwards (-1: no log).
	Start int64
	// Checkpoint is the cut-off checkpoint the log now starts from, -1
	// when nothing was deleted.
	Checkpoint int64
	// Versions counts the versions whose commit (and checkpoint, if it had
	// one) were deleted.
	Versions int
}

// CleanupLog deletes the log entries older than before that no reader
// needs, as PROTOCOL.md's "Metadata Cleanup" lays it out: the cut-off
// commit is the newest commit written at or before before (by the store's
// modification time) and not newer than the checkpoint _last_checkpoint
// names; the cut-off checkpoint is the newest checkpoint at or below it
// that reads whole. Every JSON commit and checkpoint below the cut-off
// checkpoint is deleted, oldest first, so the log stays a contiguous run
// of versions from some version on at every moment (a crash part way
// leaves a shorter prefix deleted, never a gap). The cut-off checkpoint,
// the commit of its version and everything after stay: a reader starting
// from _last_checkpoint or from a listing reaches the newest version, and
// time travel reaches every version from the cut-off checkpoint on.
//
// It lists nothing: the log's oldest version and the cut-off commit are
// found by binary search with Stat, the cut-off checkpoint by probing
// down from the cut-off commit. Without _last_checkpoint it does nothing.
func (t *Table) CleanupLog(ctx context.Context, before time.Time) (Cleanup, error) {
	res := Cleanup{Start: -1, Checkpoint: -1}
	lc, err := t.readLastCheckpoint(ctx)
	if errors.Is(err, objstore.ErrNotFound) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("log cleanup %s: %w", t.root, err)
	}
	newest := lc.Version
	if _, err := t.store.Stat(ctx, t.CommitKey(newest)); err != nil {
		return res, fmt.Errorf("log cleanup %s: commit of the checkpoint version %d: %w", t.root, newest, err)
	}
	// Oldest present version: the log is a contiguous run ending at or
	// after newest, so presence is monotone in [0, newest].
	lo, hi := int64(0), newest
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, err := t.exists(ctx, t.CommitKey(mid))
		if err != nil {
			return res, fmt.Errorf("log cleanup %s: %w", t.root, err)
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	start := lo
	res.Start = start
	// Cut-off commit: the newest version in [start, newest] modified at or
	// before before (commit times only grow, up to clock skew).
	modTime := func(v int64) (time.Time, error) {
		info, err := t.store.Stat(ctx, t.CommitKey(v))
		if err != nil {
			return time.Time{}, fmt.Errorf("log cleanup %s: %w", t.root, err)
		}
		return info.ModTime, nil
	}
	first, err := modTime(start)
	if err != nil || first.After(before) {
		return res, err
	}
	lo, hi = start, newest
	for lo < hi {
		mid := hi - (hi-lo)/2
		mt, err := modTime(mid)
		if err != nil {
			return res, err
		}
		if mt.After(before) {
			hi = mid - 1
		} else {
			lo = mid
		}
	}
	cutoffCommit := lo
	// Cut-off checkpoint: the newest one at or below the cut-off commit
	// that reads whole (a torn one is passed over).
	cp := int64(-1)
	for v := cutoffCommit; v > start && v > cutoffCommit-maxCheckpointProbes; v-- {
		ok, err := t.exists(ctx, t.CheckpointKey(v))
		if err != nil {
			return res, fmt.Errorf("log cleanup %s: %w", t.root, err)
		}
		if !ok {
			continue
		}
		if _, _, err := t.readCheckpoint(ctx, v); err != nil {
			if errors.Is(err, ErrCorrupt) || errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return res, fmt.Errorf("log cleanup %s: %w", t.root, err)
		}
		cp = v
		break
	}
	if cp <= start {
		return res, nil
	}
	for v := start; v < cp; v++ {
		for _, key := range []string{t.CommitKey(v), t.CheckpointKey(v)} {
			if err := t.store.Delete(ctx, key); err != nil {
				return res, fmt.Errorf("log cleanup %s: %w", t.root, err)
			}
		}
		res.Versions++
		res.Start = v + 1
		crashpoint.Hit(CrashMidLogCleanup)
	}
	res.Checkpoint = cp
	return res, nil
}

func (t *Table) exists(ctx context.Context, key string) (bool, error) {
	_, err := t.store.Stat(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
