package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/query"
)

// Options narrow a search beyond its query.
type Options struct {
	// Tenants, when not nil, are the only tenants a search may return
	// (the caller's grant); nil allows every tenant.
	Tenants []string
	// Since (inclusive) and Until (exclusive) bound the record time; zero
	// is unbounded.
	Since, Until time.Time
	// After resumes a search after this position (a previous page's last
	// hit); the zero Cursor starts at the beginning.
	After Cursor
}

// allows reports whether tenant is inside o.Tenants.
func (o Options) allows(tenant string) bool {
	return o.Tenants == nil || slices.Contains(o.Tenants, tenant)
}

// Cursor is a position in the lake's (wal_seq, record_index) order.
type Cursor struct {
	WALSeq uint64
	Index  uint32
}

// IsZero reports whether c is the beginning.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// String is the cursor's wire form, "WALSEQ.INDEX".
func (c Cursor) String() string {
	return strconv.FormatUint(c.WALSeq, 10) + "." + strconv.FormatUint(uint64(c.Index), 10)
}

// ParseCursor parses Cursor.String's form; "" is the zero Cursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	a, b, ok := strings.Cut(s, ".")
	seq, err1 := strconv.ParseUint(a, 10, 64)
	idx, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return Cursor{}, fmt.Errorf("bad cursor %q: want WALSEQ.INDEX", s)
	}
	return Cursor{seq, uint32(idx)}, nil
}

// after reports whether r lies after c.
func (c Cursor) before(r *lake.Record) bool {
	return r.WALSeq > c.WALSeq || r.WALSeq == c.WALSeq && r.Index > c.Index
}

// Hit is one matching record and the text of its template version.
type Hit struct {
	lake.Record
	Template string `json:"template"`
}

// appendMembers appends h's JSON members without the braces: the
// record's as `quarry query --format jsonl` writes them (line_base64 too,
// for a line that is not UTF-8), then "template".
func (h *Hit) appendMembers(dst []byte) []byte {
	dst = lake.AppendJSONMembers(dst, &h.Record)
	dst = append(dst, `,"template":`...)
	return lake.AppendJSONString(dst, h.Template)
}

// MarshalJSON writes h as one object (appendMembers).
func (h *Hit) MarshalJSON() ([]byte, error) {
	return append(h.appendMembers([]byte{'{'}), '}'), nil
}

// Cursor is the position of h, to resume after it.
func (h *Hit) Cursor() Cursor { return Cursor{h.WALSeq, h.Index} }

// Searcher evaluates queries over the lake.
type Searcher interface {
	// Search calls fn for each record q's filter matches, in (wal_seq,
	// record_index) order, until fn returns an error (returned), ctx ends
	// (ctx.Err() returned) or the records end. It ignores q's pipes.
	Search(ctx context.Context, q *query.Query, o Options, fn func(*Hit) error) error
	// Aggregate counts q's matches by q's count or top pipe; q must
	// aggregate (q.Aggregates()).
	Aggregate(ctx context.Context, q *query.Query, o Options) (*query.Aggregator, error)
}

// RawSearcher is a Searcher that writes the matches' lines itself
// (/api/search?format=raw); a Searcher without it answers raw through
// Search.
type RawSearcher interface {
	// SearchRaw writes the line of each record q's filter matches, and a
	// newline, to w in Search's order, at most limit of them (0: no
	// limit, besides the query's own | limit). It ignores q's pipes.
	SearchRaw(ctx context.Context, q *query.Query, o Options, limit int, w io.Writer) error
}

// Catalog lists committed templates; *lake.Lake is one.
type Catalog interface {
	Templates(ctx context.Context, tenant string) ([]lake.TemplateInfo, error)
}

// errNotAggregate: Aggregate was given a query without count or top.
var errNotAggregate = errors.New("query has no count or top pipe")

// ScanSearcher is the Searcher over today's lake reader: it streams
// lake.Query's records (pruned by the query's tenant and time bounds) and
// matches each with query.Match. It reads every record in range; a
// template-aware searcher is the fast path that replaces it.
type ScanSearcher struct {
	Lake *lake.Lake
}

// templates maps (id, version) to text for the tenant ("" = all).
func (s ScanSearcher) templates(ctx context.Context, tenant string) (map[[2]uint64]string, error) {
	infos, err := s.Lake.Templates(ctx, tenant)
	if err != nil {
		return nil, err
	}
	m := make(map[[2]uint64]string, len(infos))
	for _, t := range infos {
		m[[2]uint64{t.TemplateID, uint64(t.Version)}] = t.Text
	}
	return m, nil
}

// filter is the lake filter for q's bounds and o; ok is false when
// nothing can match (the query's tenant is outside o.Tenants).
func filter(q *query.Query, o Options) (lake.Filter, bool) {
	b := q.Bounds()
	f := lake.Filter{Tenant: b.Tenant, Since: b.Since, Until: b.Until}
	if f.Tenant == "" && len(o.Tenants) == 1 {
		f.Tenant = o.Tenants[0]
	}
	if f.Tenant != "" && !o.allows(f.Tenant) {
		return f, false
	}
	if !o.Since.IsZero() && o.Since.After(f.Since) {
		f.Since = o.Since
	}
	if !o.Until.IsZero() && (f.Until.IsZero() || o.Until.Before(f.Until)) {
		f.Until = o.Until
	}
	return f, true
}

func (s ScanSearcher) scan(ctx context.Context, q *query.Query, o Options, fn func(*Hit, *query.Record) error) error {
	f, ok := filter(q, o)
	if !ok {
		return nil
	}
	texts, err := s.templates(ctx, f.Tenant)
	if err != nil {
		return err
	}
	var h Hit
	var qr query.Record
	return s.Lake.Query(ctx, f, func(r lake.Record) error {
		if !o.After.IsZero() && !o.After.before(&r) {
			return nil
		}
		if !o.allows(r.Tenant) {
			return nil
		}
		h = Hit{Record: r, Template: texts[[2]uint64{r.TemplateID, uint64(r.TemplateVersion)}]}
		qr = query.Record{Tenant: r.Tenant, Source: r.Source, TS: r.TS, TemplateID: r.TemplateID,
			TemplateVersion: r.TemplateVersion, Template: h.Template, Params: r.Params, Attrs: r.Attrs,
			Line: []byte(r.Line)}
		if !q.Match(&qr) {
			return nil
		}
		return fn(&h, &qr)
	})
}

// Search implements Searcher.
func (s ScanSearcher) Search(ctx context.Context, q *query.Query, o Options, fn func(*Hit) error) error {
	return s.scan(ctx, q, o, func(h *Hit, _ *query.Record) error { return fn(h) })
}

// Aggregate implements Searcher.
func (s ScanSearcher) Aggregate(ctx context.Context, q *query.Query, o Options) (*query.Aggregator, error) {
	agg := q.NewAggregator()
	if agg == nil {
		return nil, errNotAggregate
	}
	err := s.scan(ctx, q, o, func(_ *Hit, r *query.Record) error { agg.Add(r); return nil })
	if err != nil {
		return nil, err
	}
	return agg, nil
}
