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
// replay all of it. One listing of one key finds the log's first version;
// Stat on commit keys (galloping up from it, then a binary search: the
// commits are contiguous) finds the newest, about 2*log2(versions) Stats;
// then it lists only the entries from tailWindow versions below the newest
// on (no upper end, so a gap above the start point is still found),
// doubling the window while it holds no checkpoint that reads whole. A
// table checkpointed every N versions costs one one-key listing, about
// 2*log2(versions) Stats, about log2(N/128)+1 listings of at most about 2N
// versions' entries, and the reads of one checkpoint and the commits after
// it. (A folder reads every name of the log for each listing, but stats
// only what it returns.)
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

// listRange lists the log's entries of versions from to to, in pages
// sized to the range, stopping at the first entry past to.
func (t *Table) listRange(ctx context.Context, from, to int64) ([]objstore.Info, error) {
	var out []objstore.Info
	after := t.versionStartAfter(from)
	limit := int(min(to-from+1, 1<<20)) + 8
	for {
		page, err := objstore.ListAfter(ctx, t.store, t.LogDir(), after, limit)
		if err != nil {
			return nil, fmt.Errorf("list %s from version %d: %w", t.LogDir(), from, err)
		}
		for _, in := range page {
			if v, ok := entryVersion(strings.TrimPrefix(in.Key, t.LogDir())); !ok || v > to {
				return out, nil
			}
			out = append(out, in)
		}
		if len(page) < limit {
			return out, nil
		}
		after = page[len(page)-1].Key
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

// newestVersion is the log's newest commit version at or above lo, given
// that the log's first version is lo: the commits are contiguous, so a
// commit key exists up to the newest and not after it.
func (t *Table) newestVersion(ctx context.Context, lo int64) (int64, error) {
	exists := func(v int64) (bool, error) {
		ok, err := t.exists(ctx, t.CommitKey(v))
		if err != nil {
			return false, fmt.Errorf("stat version %d: %w", v, err)
		}
		return ok, nil
	}
	hi := int64(-1) // the least version above lo known to be absent
	for step := int64(1); hi < 0; step *= 2 {
		if step > 1<<61 {
			return 0, fmt.Errorf("table %s: no end of the log found: %w", t.root, ErrCorrupt)
		}
		ok, err := exists(lo + step)
		if err != nil {
			return 0, err
		}
		if !ok {
			hi = lo + step
		} else {
			lo += step
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := exists(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
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
