package delta

import (
	"context"
	"errors"
	"fmt"

	"github.com/quarrylake/quarry/internal/objstore"
)

// maxProblems caps how many problems ValidateLog reports.
const maxProblems = 50

// ValidateLog checks the table at root: every version from 0 (or from the
// newest checkpoint) to the newest is present and parses; each commit obeys
// the per-commit rules; the first version has protocol and metaData; no file
// is added while it is already active; and every active file exists in the
// store with the size its add action states. It returns nil for a valid log
// (or no log at all), else every problem found joined, each wrapping
// ErrCorrupt.
func ValidateLog(ctx context.Context, store objstore.Store, root string) error {
	t := OpenTable(store, root)
	versions, cps, err := t.listVersions(ctx)
	if err != nil {
		return err
	}
	var problems []error
	report := func(err error) bool {
		problems = append(problems, err)
		return len(problems) < maxProblems
	}
	// A damaged newest checkpoint is not a damaged table: readers fall back
	// to an older one or to the log, and so does this check.
	st, start, _, err := t.startState(ctx, versions, cps)
	if err != nil {
		return err
	}
	present := map[int64]bool{}
	var newest int64 = -1
	for _, v := range versions {
		present[v] = true
		newest = max(newest, v)
	}
	for v := start; v <= newest; v++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !present[v] {
			if !report(fmt.Errorf("%s: version %d missing: %w", root, v, ErrCorrupt)) {
				break
			}
			continue
		}
		actions, err := t.readCommit(ctx, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return err
			}
			if !report(fmt.Errorf("%s: %w", root, err)) {
				break
			}
			continue
		}
		for _, a := range actions {
			if a.Add == nil {
				continue
			}
			if _, active := st.files[a.Add.Path]; active && !removedIn(actions, a.Add.Path) {
				report(fmt.Errorf("%s: version %d adds %s, which is already active: %w", root, v, a.Add.Path, ErrCorrupt))
			}
		}
		if err := st.apply(v, actions); err != nil {
			if !report(fmt.Errorf("%s: %w", root, err)) {
				break
			}
			// Keep replaying the well-formed rest to find more problems.
			st.version = v
		}
	}
	for p, add := range st.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := store.Stat(ctx, t.FileKey(p))
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			if !report(fmt.Errorf("%s: active file %s is missing from the store: %w", root, p, ErrCorrupt)) {
				return errors.Join(problems...)
			}
		case err != nil:
			return err
		case info.Size != add.Size:
			if !report(fmt.Errorf("%s: active file %s has %d bytes, its add says %d: %w", root, p, info.Size, add.Size, ErrCorrupt)) {
				return errors.Join(problems...)
			}
		}
	}
	return errors.Join(problems...)
}

func removedIn(actions []Action, p string) bool {
	for _, a := range actions {
		if a.Remove != nil && a.Remove.Path == p {
			return true
		}
	}
	return false
}

// ReferencedFiles returns every data file path (relative to the table
// root) that any readable version of the log names in an add or remove
// action: the newest readable checkpoint's files and tombstones and every commit
// file present. Vacuum must never delete these.
func (t *Table) ReferencedFiles(ctx context.Context) (map[string]bool, error) {
	versions, cps, err := t.listVersions(ctx)
	if err != nil {
		return nil, err
	}
	refs := map[string]bool{}
	// The newest readable checkpoint; with every commit present below, an
	// unreadable newer one names nothing the union misses.
	st, _, _, err := t.startState(ctx, versions, cps)
	if err != nil {
		return nil, err
	}
	for p := range st.files {
		refs[p] = true
	}
	for p := range st.tombstones {
		refs[p] = true
	}
	for _, v := range versions {
		actions, err := t.readCommit(ctx, v)
		if err != nil {
			return nil, err
		}
		for _, a := range actions {
			switch {
			case a.Add != nil:
				refs[a.Add.Path] = true
			case a.Remove != nil:
				refs[a.Remove.Path] = true
			}
		}
	}
	return refs, nil
}
