package web

import (
	"context"
	"fmt"
	"time"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/query"
)

// fakeLake is an in-memory Searcher and Catalog whose records are made on
// the fly by gen, so that a huge result is never held by the test.
type fakeLake struct {
	n    int // records; <0: endless
	gen  func(i int) Hit
	tpls []lake.TemplateInfo
	// each, when set, runs before record i is matched: a test parks the
	// scan there.
	each func(ctx context.Context, i int) error
	// done receives Search's return value.
	done chan error
}

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// smallLake: 3 templates over two tenants, 30 records a minute apart.
func smallLake() *fakeLake {
	tpls := []lake.TemplateInfo{
		{TemplateID: 1, Tenant: "acme", Version: 1, Text: "user <*> logged in", Kind: "new"},
		{TemplateID: 1, Tenant: "acme", Version: 2, Text: "user <*> logged in from <*>", Kind: "widened", Previous: "user <*> logged in"},
		{TemplateID: 2, Tenant: "acme", Version: 1, Text: "error: disk <*> full", Kind: "new"},
		{TemplateID: 3, Tenant: "beta", Version: 1, Text: "GET <*> status=<*>", Kind: "new"},
	}
	f := &fakeLake{n: 30, tpls: tpls}
	f.gen = func(i int) Hit {
		r := lake.Record{WALSeq: uint64(i/2 + 1), Index: uint32(i % 2), TS: t0.Add(time.Duration(i) * time.Minute), Source: "app"}
		switch i % 3 {
		case 0:
			r.Tenant, r.TemplateID, r.TemplateVersion, r.Params = "acme", 1, 2, []string{fmt.Sprint("u", i), "10.0.0.1"}
			r.Line = fmt.Sprintf("user u%d logged in from 10.0.0.1", i)
		case 1:
			r.Tenant, r.TemplateID, r.TemplateVersion, r.Params = "acme", 2, 1, []string{fmt.Sprint("sd", i)}
			r.Line = fmt.Sprintf("error: disk sd%d full", i)
		default:
			r.Tenant, r.TemplateID, r.TemplateVersion, r.Params = "beta", 3, 1, []string{"/x", fmt.Sprint(200 + 100*(i%4))}
			r.Line = fmt.Sprintf("GET /x status=%d", 200+100*(i%4))
		}
		text := ""
		for _, t := range tpls {
			if t.TemplateID == r.TemplateID && t.Version == r.TemplateVersion {
				text = t.Text
			}
		}
		return Hit{Record: r, Template: text}
	}
	return f
}

func (f *fakeLake) Templates(_ context.Context, tenant string) ([]lake.TemplateInfo, error) {
	var out []lake.TemplateInfo
	for _, t := range f.tpls {
		if tenant == "" || t.Tenant == tenant {
			out = append(out, t)
		}
	}
	return out, nil
}

func (f *fakeLake) scan(ctx context.Context, q *query.Query, o Options, fn func(*Hit, *query.Record) error) (err error) {
	if f.done != nil {
		defer func() { f.done <- err }()
	}
	fl, ok := filter(q, o)
	if !ok {
		return nil
	}
	for i := 0; f.n < 0 || i < f.n; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.each != nil {
			if err := f.each(ctx, i); err != nil {
				return err
			}
		}
		h := f.gen(i)
		r := &h.Record
		if fl.Tenant != "" && r.Tenant != fl.Tenant || !o.allows(r.Tenant) || !o.After.IsZero() && !o.After.before(r) {
			continue
		}
		if !fl.Since.IsZero() && r.TS.Before(fl.Since) || !fl.Until.IsZero() && !r.TS.Before(fl.Until) {
			continue
		}
		qr := query.Record{Tenant: r.Tenant, Source: r.Source, TS: r.TS, TemplateID: r.TemplateID,
			TemplateVersion: r.TemplateVersion, Template: h.Template, Params: r.Params, Line: []byte(r.Line)}
		if !q.Match(&qr) {
			continue
		}
		if err := fn(&h, &qr); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeLake) Search(ctx context.Context, q *query.Query, o Options, fn func(*Hit) error) error {
	return f.scan(ctx, q, o, func(h *Hit, _ *query.Record) error { return fn(h) })
}

func (f *fakeLake) Aggregate(ctx context.Context, q *query.Query, o Options) (*query.Aggregator, error) {
	agg := q.NewAggregator()
	if agg == nil {
		return nil, errNotAggregate
	}
	if err := f.scan(ctx, q, o, func(_ *Hit, r *query.Record) error { agg.Add(r); return nil }); err != nil {
		return nil, err
	}
	return agg, nil
}
