package lake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
)

// Vacuum deletes data files under each table root that no version of the
// table's log references (no add or remove in any commit file or the
// checkpoint) and whose modification time is older than retention. It
// never touches _delta_log or any other path with a segment starting with
// '_' or '.', and never a referenced file. It returns the keys deleted (or,
// with dryRun, that would be), sorted.
//
// retention must exceed the longest time between an encoder's upload and
// the committer's commit of that file: a file uploaded but not yet committed
// is unreferenced, and only its age protects it.
func (l *Lake) Vacuum(ctx context.Context, retention time.Duration, dryRun bool) ([]string, error) {
	if retention < 0 {
		return nil, fmt.Errorf("vacuum: negative retention %v", retention)
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
		cutoff := time.Now().Add(-retention)
		for _, in := range infos {
			rel := strings.TrimPrefix(in.Key, t.Root()+"/")
			if hidden(rel) || refs[rel] || !in.ModTime.Before(cutoff) {
				continue
			}
			if !dryRun {
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
