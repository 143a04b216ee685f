package web

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/quarrylake/quarry/internal/query"
)

// Version is one version of a template.
type Version struct {
	Version  uint32 `json:"version"`
	Text     string `json:"text"`
	Kind     string `json:"kind"`
	Previous string `json:"previous,omitempty"`
	WALSeq   uint64 `json:"wal_seq"`
	Records  int64  `json:"records"`
}

// Template is a template id with its versions and counts.
type Template struct {
	ID         uint64    `json:"id"`
	Tenant     string    `json:"tenant"`
	Text       string    `json:"text"` // the newest version's
	Records    int64     `json:"records"`
	MergedInto uint64    `json:"merged_into,omitempty"`
	Versions   []Version `json:"versions"`
	Series     *Series   `json:"series,omitempty"`
}

// Series is a count over time: Points are (bucket start in Unix
// milliseconds, count) for the non-empty buckets of width Step.
type Series struct {
	Step   string     `json:"step"`
	StepMS int64      `json:"step_ms"`
	Points [][2]int64 `json:"points"`
}

// steps are the bucket widths a series is coarsened to.
var steps = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour,
	24 * time.Hour, 7 * 24 * time.Hour}

// maxPoints bounds the buckets of a series.
const maxPoints = 60

// coarsen re-buckets per-minute counts (bucket start -> count) to the
// smallest step in steps that spans lo..hi in at most maxPoints buckets.
// Steps divide each other from the epoch, so counts move whole.
func coarsen(counts map[int64]int64, lo, hi int64) *Series {
	step := steps[len(steps)-1]
	for _, st := range steps {
		if (hi-lo)/st.Milliseconds() < maxPoints {
			step = st
			break
		}
	}
	ms := step.Milliseconds()
	byStart := map[int64]int64{}
	for t, n := range counts {
		b := t - ((t%ms)+ms)%ms
		byStart[b] += n
	}
	s := &Series{Step: fmtStep(step), StepMS: ms, Points: [][2]int64{}}
	for t, n := range byStart {
		s.Points = append(s.Points, [2]int64{t, n})
	}
	slices.SortFunc(s.Points, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	return s
}

func fmtStep(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	case d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/time.Minute)) + "m"
}

// bucketMS parses an aggregator's bucket key (RFC 3339) to Unix ms.
func bucketMS(k string) (int64, bool) {
	t, err := time.Parse(time.RFC3339Nano, k)
	return t.UnixMilli(), err == nil
}

// catalog lists the templates r may see, grouped by id, in id order;
// tenant "" means every granted tenant.
func (s *Server) catalog(r *http.Request, tenant string) ([]*Template, error) {
	g := grantOf(r)
	infos, err := s.d.Catalog.Templates(r.Context(), tenant)
	if err != nil {
		return nil, err
	}
	var out []*Template
	byID := map[uint64]*Template{}
	for _, ti := range infos {
		if !g.Allows(ti.Tenant) {
			continue
		}
		t, ok := byID[ti.TemplateID]
		if !ok {
			t = &Template{ID: ti.TemplateID, Tenant: ti.Tenant}
			byID[ti.TemplateID] = t
			out = append(out, t)
		}
		t.Versions = append(t.Versions, Version{Version: ti.Version, Text: ti.Text, Kind: ti.Kind,
			Previous: ti.Previous, WALSeq: ti.WALSeq, Records: ti.Records})
		t.Records += ti.Records
		t.MergedInto = ti.MergedInto
		t.Text = ti.Text // sorted by version: the newest wins
	}
	slices.SortFunc(out, func(a, b *Template) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// series counts q's matches per minute, per template id when byTemplate
// (q counts by template, 1m), else overall (q counts by 1m).
func (s *Server) series(r *http.Request, q string, o Options, byTemplate bool) (map[uint64]*Series, error) {
	qq, err := query.CompileAt(q, s.d.Now())
	if err != nil {
		return nil, fmt.Errorf("internal query %q: %w", q, err)
	}
	agg, err := s.d.Searcher.Aggregate(r.Context(), qq, o)
	if err != nil {
		return nil, err
	}
	counts := map[uint64]map[int64]int64{}
	lo, hi := int64(1<<62), int64(-1<<62)
	for _, row := range agg.Rows() {
		var id uint64
		k := row.Keys[0]
		if byTemplate {
			id, _ = strconv.ParseUint(row.Keys[0], 10, 64)
			k = row.Keys[1]
		}
		t, ok := bucketMS(k)
		if !ok {
			continue
		}
		if counts[id] == nil {
			counts[id] = map[int64]int64{}
		}
		counts[id][t] += row.Count
		lo, hi = min(lo, t), max(hi, t)
	}
	out := map[uint64]*Series{}
	for id, c := range counts {
		out[id] = coarsen(c, lo, hi) // one range: every series shares its step
	}
	return out, nil
}

// templates lists templates with versions and counts over time:
// GET /api/templates?tenant=&since=&until=
func (s *Server) templates(w http.ResponseWriter, r *http.Request) {
	o, code, err := s.options(r, nil)
	if err != nil {
		writeError(w, code, err.Error(), 0)
		return
	}
	tenant := r.FormValue("tenant")
	ts, err := s.catalog(r, tenant)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
		return
	}
	series, err := s.series(r, "| count by template, 1m", o, true)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
		return
	}
	for _, t := range ts {
		t.Series = series[t.ID]
	}
	writeJSON(w, http.StatusOK, map[string]any{"templates": ts})
}

// TemplateDetail is GET /api/templates/{id}.
type TemplateDetail struct {
	*Template
	Samples []*Hit `json:"samples"`
}

// sampleSize is how many lines /api/templates/{id} shows.
const sampleSize = 20

func (s *Server) template(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("template id %q: want a positive number", r.PathValue("id")), 0)
		return
	}
	o, code, err := s.options(r, nil)
	if err != nil {
		writeError(w, code, err.Error(), 0)
		return
	}
	ts, err := s.catalog(r, r.FormValue("tenant"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
		return
	}
	i := slices.IndexFunc(ts, func(t *Template) bool { return t.ID == id })
	if i < 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("template %d: not found", id), 0)
		return
	}
	d := TemplateDetail{Template: ts[i], Samples: []*Hit{}}
	o.Tenants = []string{d.Tenant}
	q := query.MustCompile("template:" + strconv.FormatUint(id, 10))
	err = s.d.Searcher.Search(r.Context(), q, o, func(h *Hit) error {
		if len(d.Samples) == sampleSize {
			return errPageFull
		}
		c := *h
		d.Samples = append(d.Samples, &c)
		return nil
	})
	if err != nil && err != errPageFull {
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
		return
	}
	series, err := s.series(r, "template:"+strconv.FormatUint(id, 10)+" | count by 1m", o, false)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
		return
	}
	d.Series = series[0]
	if d.Series == nil {
		d.Series = &Series{Step: "1m", StepMS: time.Minute.Milliseconds(), Points: [][2]int64{}}
	}
	writeJSON(w, http.StatusOK, d)
}

// NewTemplate is a template whose first record is in the window.
type NewTemplate struct {
	*Template
	InWindow int64 `json:"in_window"`
}

// newTemplates lists templates whose first record is at or after since
// (default 1h ago): GET /api/templates/new?since=1h&tenant=
func (s *Server) newTemplates(w http.ResponseWriter, r *http.Request) {
	if r.FormValue("since") == "" {
		r.Form.Set("since", "1h")
	}
	o, code, err := s.options(r, nil)
	if err != nil {
		writeError(w, code, err.Error(), 0)
		return
	}
	cut := o.Since.UTC().Format(time.RFC3339Nano)
	o.Since, o.Until = time.Time{}, time.Time{}
	count := func(q string) (map[uint64]int64, error) {
		agg, err := s.d.Searcher.Aggregate(r.Context(), query.MustCompile(q), o)
		if err != nil {
			return nil, err
		}
		m := map[uint64]int64{}
		for _, row := range agg.Rows() {
			id, _ := strconv.ParseUint(row.Keys[0], 10, 64)
			m[id] += row.Count
		}
		return m, nil
	}
	recent, err := count("ts:>=" + cut + " | count by template")
	if err == nil {
		var old map[uint64]int64
		if old, err = count("ts:<" + cut + " | count by template"); err == nil {
			for id := range old {
				delete(recent, id)
			}
		}
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
		return
	}
	ts, err := s.catalog(r, r.FormValue("tenant"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
		return
	}
	out := []NewTemplate{}
	for _, t := range ts {
		if n, ok := recent[t.ID]; ok {
			out = append(out, NewTemplate{Template: t, InWindow: n})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"since": cut, "templates": out})
}
