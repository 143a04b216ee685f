package web

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/query"
)

//go:embed static
var static embed.FS

// Config tunes the API.
type Config struct {
	// DefaultLimit is the page size of a search without limit= (default
	// 1000); limit=0 streams every match.
	DefaultLimit int
	// FlushInterval bounds how long a produced hit waits in the response
	// buffer (default 100ms); the first hit is flushed at once.
	FlushInterval time.Duration
}

// Defaults returns c with unset fields set.
func (c Config) Defaults() Config {
	if c.DefaultLimit == 0 {
		c.DefaultLimit = 1000
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = 100 * time.Millisecond
	}
	return c
}

// Deps are the server's collaborators. Status may be nil (no status).
type Deps struct {
	Searcher Searcher
	Catalog  Catalog
	Status   *Status
	Access   *Access
	Log      *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Server serves the API under /api/ and the page under /.
type Server struct {
	cfg Config
	d   Deps
}

// New returns a server.
func New(cfg Config, d Deps) *Server {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Access == nil {
		d.Access = &Access{}
	}
	return &Server{cfg: cfg.Defaults(), d: d}
}

type grantKey struct{}

// Handler returns the HTTP handler: the API (behind Access) and the page's
// static files (which hold no data and need no credentials, so that the
// page can ask for a token).
func (s *Server) Handler() http.Handler {
	api := http.NewServeMux()
	api.HandleFunc("GET /api/search", s.search)
	api.HandleFunc("GET /api/templates", s.templates)
	api.HandleFunc("GET /api/templates/new", s.newTemplates)
	api.HandleFunc("GET /api/templates/{id}", s.template)
	api.HandleFunc("GET /api/status", s.status)
	api.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint", 0)
	})
	sub, _ := fs.Sub(static, "static")
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServerFS(sub))
	mux.Handle("/api/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, err := s.d.Access.Check(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", s.d.Access.challenge())
			writeError(w, http.StatusUnauthorized, err.Error(), 0)
			return
		}
		api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), grantKey{}, g)))
	}))
	return mux
}

func grantOf(r *http.Request) Grant {
	g, _ := r.Context().Value(grantKey{}).(Grant)
	return g
}

// apiError is the body of every error response.
type apiError struct {
	Error string `json:"error"`
	// Column is the 1-based column of a query's mistake (0: none).
	Column int    `json:"column,omitempty"`
	Caret  string `json:"caret,omitempty"`
}

func writeError(w http.ResponseWriter, code int, msg string, col int) {
	writeJSON(w, code, apiError{Error: msg, Column: col})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// errForbidden is a request for a tenant outside the caller's grant.
var errForbidden = errors.New("tenant not granted to these credentials")

// options reads tenant, since and until, checking the tenant (of the
// parameter and of the query's tenant: filter) against the grant.
func (s *Server) options(r *http.Request, q *query.Query) (Options, int, error) {
	g := grantOf(r)
	o := Options{Tenants: g.Tenants}
	if t := r.FormValue("tenant"); t != "" {
		if !g.Allows(t) {
			return o, http.StatusForbidden, fmt.Errorf("tenant %q: %w", t, errForbidden)
		}
		o.Tenants = []string{t}
	}
	if q != nil {
		if t := q.Bounds().Tenant; t != "" && !g.Allows(t) {
			return o, http.StatusForbidden, fmt.Errorf("tenant %q: %w", t, errForbidden)
		}
	}
	var err error
	if o.Since, err = s.timeParam(r, "since"); err != nil {
		return o, http.StatusBadRequest, err
	}
	if o.Until, err = s.timeParam(r, "until"); err != nil {
		return o, http.StatusBadRequest, err
	}
	return o, 0, nil
}

// timeParam parses an RFC 3339 time, a UTC date or a duration ago (1h).
func (s *Server) timeParam(r *http.Request, name string) (time.Time, error) {
	v := r.FormValue(name)
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return s.d.Now().Add(-d), nil
	}
	if d, ok := days(v); ok {
		return s.d.Now().Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s=%q: want RFC 3339, YYYY-MM-DD or a duration ago like 15m, 1h or 7d", name, v)
}

func days(v string) (time.Duration, bool) {
	n, err := strconv.Atoi(strings.TrimSuffix(v, "d"))
	// At most what a duration holds: more days wrapped around, 213505d
	// to a day.
	if !strings.HasSuffix(v, "d") || err != nil || n <= 0 || n > int(math.MaxInt64/int64(24*time.Hour)) {
		return 0, false
	}
	return time.Duration(n) * 24 * time.Hour, true
}

// compile compiles the q parameter, answering 400 with the column of a
// mistake.
func (s *Server) compile(w http.ResponseWriter, src string) *query.Query {
	q, err := query.CompileAt(src, s.d.Now())
	if err != nil {
		var pe *query.ParseError
		if errors.As(err, &pe) {
			writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error(), Column: pe.Column, Caret: pe.Caret()})
		} else {
			writeError(w, http.StatusBadRequest, err.Error(), 0)
		}
		return nil
	}
	return q
}

// errPageFull stops a search one hit past the page.
var errPageFull = errors.New("page full")

// searchEnd is the last NDJSON line of a search.
type searchEnd struct {
	Type  string `json:"type"` // "end" or "error"
	Count int    `json:"count"`
	// More is true when the page is full and another match follows;
	// Cursor then resumes after the last hit sent.
	More   bool   `json:"more"`
	Cursor string `json:"cursor,omitempty"`
	Error  string `json:"error,omitempty"`
}

// search streams a query's matches as NDJSON: {"type":"hit",...} lines,
// then {"type":"end",...}; an aggregating query answers
// {"type":"columns"}, {"type":"row"} lines, then the end line.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := s.compile(w, r.FormValue("q"))
	if q == nil {
		return
	}
	o, code, err := s.options(r, q)
	if err != nil {
		writeError(w, code, err.Error(), 0)
		return
	}
	if o.After, err = ParseCursor(r.FormValue("cursor")); err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	limit := s.cfg.DefaultLimit
	if v := r.FormValue("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit=%q: want a count, 0 for no limit", v), 0)
			return
		}
	}
	// A query's own limit ends its result: the page holds it all.
	final := false
	if ql := q.Limit(); ql > 0 && !q.Aggregates() && (limit == 0 || ql <= limit) {
		limit, final = ql, true
	}
	raw := false
	switch f := r.FormValue("format"); f {
	case "", "ndjson":
	case "raw":
		raw = true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("format=%q: want ndjson (the default) or raw", f), 0)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if raw {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		s.searchRaw(w, r, q, o, limit)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if q.Aggregates() {
		s.aggregate(w, r, q, o)
		return
	}
	out := newStream(w, s.cfg.FlushInterval)
	end := searchEnd{Type: "end"}
	var last Cursor
	err = s.d.Searcher.Search(r.Context(), q, o, func(h *Hit) error {
		if limit > 0 && end.Count == limit {
			end.More = !final
			return errPageFull
		}
		end.Count++
		last = h.Cursor()
		return out.writeHit(h)
	})
	if r.Context().Err() != nil {
		return // the client is gone
	}
	if err != nil && !errors.Is(err, errPageFull) {
		s.d.Log.Warn("search", "query", q.Source(), "err", err)
		end.Type, end.Error = "error", err.Error()
	}
	if end.More {
		end.Cursor = last.String()
	}
	_ = out.write(end)
	out.flush()
}

// searchRaw streams the matches' lines (format=raw), through the
// Searcher's SearchRaw when it has one, or an aggregation's rows as
// VALUE<TAB>COUNT lines (lake.WriteRows' raw format). There is no end
// line: an error before the first byte is a 500, one after it aborts the
// response, so a client sees a cut stream, never a short answer.
func (s *Server) searchRaw(w http.ResponseWriter, r *http.Request, q *query.Query, o Options, limit int) {
	ctx := r.Context()
	out := newStream(w, s.cfg.FlushInterval)
	var err error
	if rs, ok := s.d.Searcher.(RawSearcher); ok && !q.Aggregates() {
		err = rs.SearchRaw(ctx, q, o, limit, out)
	} else if !q.Aggregates() {
		n := 0
		var line []byte
		err = s.d.Searcher.Search(ctx, q, o, func(h *Hit) error {
			if limit > 0 && n == limit {
				return errPageFull
			}
			n++
			line = append(append(line[:0], h.Line...), '\n')
			_, err := out.Write(line)
			return err
		})
	} else {
		var agg *query.Aggregator
		if agg, err = s.d.Searcher.Aggregate(ctx, q, o); err == nil {
			err = lake.WriteRows(out, "raw", agg.Header(), agg.Rows())
		}
	}
	if ctx.Err() != nil {
		return // the client is gone
	}
	if err != nil && !errors.Is(err, errPageFull) {
		s.d.Log.Warn("search", "query", q.Source(), "format", "raw", "err", err)
		if out.n == 0 {
			writeError(w, http.StatusInternalServerError, err.Error(), 0)
			return
		}
		out.flush() // the lines written are matches; then the cut
		panic(http.ErrAbortHandler)
	}
	out.flush()
}

func (s *Server) aggregate(w http.ResponseWriter, r *http.Request, q *query.Query, o Options) {
	agg, err := s.d.Searcher.Aggregate(r.Context(), q, o)
	if r.Context().Err() != nil {
		return
	}
	out := newStream(w, s.cfg.FlushInterval)
	if err != nil {
		s.d.Log.Warn("aggregate", "query", q.Source(), "err", err)
		_ = out.write(searchEnd{Type: "error", Error: err.Error()})
		out.flush()
		return
	}
	_ = out.write(map[string]any{"type": "columns", "columns": agg.Header()})
	rows := agg.Rows()
	for _, row := range rows {
		if out.write(map[string]any{"type": "row", "keys": row.Keys, "count": row.Count}) != nil {
			return
		}
	}
	_ = out.write(searchEnd{Type: "end", Count: len(rows)})
	out.flush()
}

// stream writes a response through a buffer, flushing the first write at
// once and later ones at least every interval, so that a client sees hits
// as they are produced without a flush per line. write encodes an NDJSON
// line; Write takes lines already written out (format=raw).
type stream struct {
	bw        *bufio.Writer
	enc       *json.Encoder
	rc        *http.ResponseController
	interval  time.Duration
	lastFlush time.Time
	n         int    // writes so far
	buf       []byte // writeHit's line
}

func newStream(w http.ResponseWriter, interval time.Duration) *stream {
	s := &stream{bw: bufio.NewWriterSize(w, 32<<10), rc: http.NewResponseController(w), interval: interval}
	s.enc = json.NewEncoder(s) // one Write per value
	return s
}

func (s *stream) write(v any) error { return s.enc.Encode(v) }

// writeHit writes h as a search's NDJSON hit line: {"type":"hit"} and
// h's members (Hit.appendMembers), without encoding/json's reflection.
func (s *stream) writeHit(h *Hit) error {
	s.buf = append(h.appendMembers(append(s.buf[:0], `{"type":"hit",`...)), '}', '\n')
	_, err := s.Write(s.buf)
	return err
}

func (s *stream) Write(p []byte) (int, error) {
	n, err := s.bw.Write(p)
	if err != nil {
		return n, err
	}
	s.n++
	if s.n == 1 || time.Since(s.lastFlush) >= s.interval {
		return n, s.flush()
	}
	return n, nil
}

func (s *stream) flush() error {
	s.lastFlush = time.Now()
	if err := s.bw.Flush(); err != nil {
		return err
	}
	return s.rc.Flush()
}
