package delta

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/quarrylake/quarry/internal/objstore"
)

// tailWindow is how many versions below the newest a replay without
// _last_checkpoint first lists; the window doubles until it holds a
// checkpoint that reads whole or reaches the log's first version.
const tailWindow = 128

// replayFromTail is replayFromListing for stores that list from a key
// (objstore.RangeLister): it never lists the whole log unless it has to
// replay all of it. It finds the log's first and newest versions with
// listings of one key each (a galloping then binary search over "the
// first entry at or after version v", about 2*log2(versions) calls), then
// lists only the newest tailWindow versions, doubling the window while it
// holds no checkpoint that reads whole. A table checkpointed every N
// versions costs O(log versions) one-key listings, about log2(N/128)+1
// listings of at most about 2N versions' entries, and the reads of one
// checkpoint and the commits after it.
func (t *Table) replayFromTail(ctx context.Context) (*state, error) {
	first, ok, err := t.firstVersionFrom(ctx, 0)
	if err != nil {
		return nil, err
	}
	if !ok {
		return newState(), nil // no log
	}
	newest, err := t.newestVersion(ctx, first)
	if err != nil {
		return nil, err
	}
	for w := int64(tailWindow); ; w *= 2 {
		from := max(first, newest-w)
		infos, err := objstore.ListAfter(ctx, t.store, t.LogDir(), t.versionStartAfter(from), 0)
		if err != nil {
			return nil, fmt.Errorf("list %s from version %d: %w", t.LogDir(), from, err)
		}
		versions, cps := t.logVersions(infos)
		whole := from == first
		st, err := t.replayListed(ctx, versions, cps)
		if err != nil && !whole && errors.Is(err, ErrCorrupt) {
			continue // no checkpoint in the window reads whole: widen it
		}
		return st, err
	}
}

// versionStartAfter is the key a listing of the log's entries of version v
// and later starts after: every entry of version v-1 ("<v-1>.json",
// "<v-1>.checkpoint.parquet", "<v-1>.crc", ...) sorts at or before it, every
// entry of a later version after it.
func (t *Table) versionStartAfter(v int64) string {
	if v <= 0 {
		return t.LogDir()
	}
	return t.key(fmt.Sprintf("_delta_log/%020d.~", v-1))
}

// firstVersionFrom is the smallest version at or above v with any entry in
// the log, from a listing of one key.
func (t *Table) firstVersionFrom(ctx context.Context, v int64) (int64, bool, error) {
	infos, err := objstore.ListAfter(ctx, t.store, t.LogDir(), t.versionStartAfter(v), 1)
	if err != nil {
		return 0, false, fmt.Errorf("list %s from version %d: %w", t.LogDir(), v, err)
	}
	if len(infos) == 0 {
		return 0, false, nil
	}
	got, ok := entryVersion(strings.TrimPrefix(infos[0].Key, t.LogDir()))
	return got, ok, nil
}

// newestVersion is the log's newest version, given a present one: the log's
// versions are contiguous, so "some entry at or after v" holds up to the
// newest and no further.
func (t *Table) newestVersion(ctx context.Context, lo int64) (int64, error) {
	hi := int64(-1) // the least version known to have nothing at or after it; -1: none yet
	for step := int64(1); hi < 0; step *= 2 {
		v, ok, err := t.firstVersionFrom(ctx, lo+step)
		if err != nil {
			return 0, err
		}
		if !ok {
			hi = lo + step
			break
		}
		lo = v
		if step > 1<<61 {
			return 0, fmt.Errorf("table %s: no end of the log found: %w", t.root, ErrCorrupt)
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		v, ok, err := t.firstVersionFrom(ctx, mid)
		if err != nil {
			return 0, err
		}
		if !ok {
			hi = mid
		} else {
			lo = v
		}
	}
	return lo, nil
}

// entryVersion is the version of a log entry name that starts with twenty
// digits and a dot (a commit, a checkpoint or part of one, a .crc, ...);
// false for _last_checkpoint, _sidecars/ and the like.
func entryVersion(name string) (int64, bool) {
	if len(name) < 21 || name[20] != '.' {
		return 0, false
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}
