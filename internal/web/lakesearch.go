package web

import (
	"context"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
)

// LakeSearcher searches with the lake's template-aware search (lake.Search:
// files and templates the plan rules out are never read or rendered);
// aggregations go through the ScanSearcher of the same lake.
type LakeSearcher struct {
	Lake *lake.Lake
}

// Search implements Searcher.
func (s LakeSearcher) Search(ctx context.Context, q *query.Query, o Options, fn func(*Hit) error) error {
	opts := lake.SearchOptions{Since: o.Since, Until: o.Until}
	if len(o.Tenants) == 1 {
		opts.Tenant = o.Tenants[0]
	} else if o.Tenants != nil && len(o.Tenants) == 0 {
		return nil // a grant of no tenant sees nothing
	}
	if !o.After.IsZero() {
		opts.After = &lake.Position{WALSeq: o.After.WALSeq, Index: o.After.Index}
	}
	texts := map[string]recfile.Templates{}
	var h Hit
	return s.Lake.Search(ctx, q, opts, func(r lake.Record) error {
		if !o.allows(r.Tenant) {
			return nil
		}
		tt, ok := texts[r.Tenant]
		if !ok {
			var err error
			if tt, err = s.Lake.TemplateTexts(ctx, r.Tenant); err != nil {
				return err
			}
			texts[r.Tenant] = tt
		}
		h = Hit{Record: r, Template: tt[recfile.Key{ID: r.TemplateID, Version: r.TemplateVersion}]}
		return fn(&h)
	})
}

// Aggregate implements Searcher.
func (s LakeSearcher) Aggregate(ctx context.Context, q *query.Query, o Options) (*query.Aggregator, error) {
	return ScanSearcher(s).Aggregate(ctx, q, o)
}
