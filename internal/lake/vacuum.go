package lake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
)

// DefaultGrace is how long Vacuum keeps a removed file by default: a week of
// time travel, and far longer than any running reader's query.
const DefaultGrace = 7 * 24 * time.Hour

// VacuumOptions says what Vacuum may delete.
type VacuumOptions struct {
	// Retention protects files no version of the log references (orphans:
	// uploaded and never committed, or written by a compaction that did not
	// commit) younger than it, by modification time. It must exceed the
	// longest time between an encoder's upload and the committer's commit
	// of that file: a file uploaded but not yet committed is unreferenced,
	// and only its age protects it.
	Retention time.Duration
	// Grace protects files the log removed (compaction, retention) for this
	// long after their remove action's deletionTimestamp, so time travel to
	// a version before the remove and readers that started before it keep
	// working. Zero means each table's delta.deletedFileRetentionDuration
	// when its metadata sets one, else DefaultGrace; negative is an error.
	Grace time.Duration
	// DryRun lists what would be deleted and deletes nothing.
	DryRun bool
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Vacuum deletes, under each table root, data files no version of the
// table's log references and older than o.Retention, and files the newest
// version removed (a tombstone) longer than o.Grace ago. It never deletes a
// live file, never touches _delta_log or any other path with a segment
// starting with '_' or '.'. It returns the keys deleted (or, with DryRun,
// that would be), sorted by table and key.
func (l *Lake) Vacuum(ctx context.Context, o VacuumOptions) ([]string, error) {
	if o.Retention < 0 {
		return nil, fmt.Errorf("vacuum: negative retention %v", o.Retention)
	}
	if o.Grace < 0 {
		return nil, fmt.Errorf("vacuum: negative grace %v", o.Grace)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	var out []string
	var errs []error
	for _, t := range []*delta.Table{l.records, l.templates, l.progress} {
		// List before reading the log: a file committed after the listing
		// is then in the references we read.
		infos, err := l.store.List(ctx, t.Root()+"/")
		if err != nil {
			return out, fmt.Errorf("vacuum %s: %w", t.Root(), err)
		}
		refs, err := t.ReferencedFiles(ctx)
		if err != nil {
			return out, fmt.Errorf("vacuum %s: %w", t.Root(), err)
		}
		// A fresh reader of the newest version (not l's cached table).
		snap, err := delta.OpenTable(l.store, t.Root()).Snapshot(ctx)
		if err != nil {
			return out, fmt.Errorf("vacuum %s: %w", t.Root(), err)
		}
		live := make(map[string]bool, len(snap.Files))
		for _, f := range snap.Files {
			live[f.Path] = true
		}
		grace := o.Grace
		if grace == 0 {
			grace = DefaultGrace
			props, _ := delta.ReadProperties(snap.Metadata.Configuration) // an unreadable value: the default
			if props.DeletedFileRetention > 0 {
				grace = props.DeletedFileRetention
			}
		}
		removed := make(map[string]int64, len(snap.Tombstones))
		for _, r := range snap.Tombstones {
			removed[r.Path] = r.DeletionTimestamp
		}
		orphanCutoff := now().Add(-o.Retention)
		graceCutoff := now().Add(-grace)
		for _, in := range infos {
			rel := strings.TrimPrefix(in.Key, t.Root()+"/")
			if hidden(rel) || live[rel] {
				continue
			}
			if ts, ok := removed[rel]; ok {
				// A remove without a deletionTimestamp counts from the
				// file's own time.
				when := in.ModTime
				if ts > 0 {
					when = time.UnixMilli(ts)
				}
				if !when.Before(graceCutoff) {
					continue
				}
			} else if refs[rel] || !in.ModTime.Before(orphanCutoff) {
				continue
			}
			if !o.DryRun {
				if err := l.store.Delete(ctx, in.Key); err != nil {
					errs = append(errs, fmt.Errorf("vacuum delete %s: %w", in.Key, err))
					continue
				}
			}
			out = append(out, in.Key)
		}
	}
	return out, errors.Join(errs...)
}

// hidden reports whether any segment of rel starts with '_' or '.'.
func hidden(rel string) bool {
	for _, seg := range strings.Split(rel, "/") {
		if strings.HasPrefix(seg, "_") || strings.HasPrefix(seg, ".") {
			return true
		}
	}
	return false
}
