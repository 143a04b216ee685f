package web

import (
	"context"
	"errors"
	"io"

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

// searchOptions are the lake's options for o; ok is false when the grant
// holds no tenant (nothing to see).
func searchOptions(o Options) (opts lake.SearchOptions, ok bool) {
	opts = lake.SearchOptions{Since: o.Since, Until: o.Until}
	if len(o.Tenants) == 1 {
		opts.Tenant = o.Tenants[0]
	} else if o.Tenants != nil && len(o.Tenants) == 0 {
		return opts, false
	}
	if !o.After.IsZero() {
		opts.After = &lake.Position{WALSeq: o.After.WALSeq, Index: o.After.Index}
	}
	return opts, true
}

// Search implements Searcher.
func (s LakeSearcher) Search(ctx context.Context, q *query.Query, o Options, fn func(*Hit) error) error {
	opts, ok := searchOptions(o)
	if !ok {
		return nil
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

// SearchRaw implements RawSearcher with lake.SearchRaw: the lines of the
// kept rows are rendered from their columns straight into the output, with
// no record, template lookup or JSON per match. A grant of several tenants
// (a query without tenant:) is filtered record by record through
// lake.Search instead.
func (s LakeSearcher) SearchRaw(ctx context.Context, q *query.Query, o Options, limit int, w io.Writer) error {
	opts, ok := searchOptions(o)
	if !ok {
		return nil
	}
	opts.LineOnly = true
	if len(o.Tenants) < 2 || q.Bounds().Tenant != "" {
		opts.Limit = limit
		return s.Lake.SearchRaw(ctx, q, opts, w)
	}
	var line []byte
	n := 0
	err := s.Lake.Search(ctx, q, opts, func(r lake.Record) error {
		if !o.allows(r.Tenant) {
			return nil
		}
		if limit > 0 && n == limit {
			return errPageFull
		}
		n++
		line = append(append(line[:0], r.Line...), '\n')
		_, err := w.Write(line)
		return err
	})
	if errors.Is(err, errPageFull) {
		return nil
	}
	return err
}
