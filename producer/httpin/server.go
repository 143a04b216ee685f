package httpin

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/streams"
)

// TenantHeader names the tenant of a request when neither its path nor
// its credential does.
const TenantHeader = "X-Quarry-Tenant"

// Server serves the JSON-lines and _bulk endpoints over an ingest.Hub.
type Server struct {
	hub *ingest.Hub
	rc  producer.ReceiversConfig
	log *slog.Logger
	l   net.Listener
	srv *http.Server
}

// Listen opens addr (port 0 picks one), with TLS when tlsCfg is not nil,
// and returns the server; Run serves it.
func Listen(addr string, tlsCfg *tls.Config, hub *ingest.Hub) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http listen %s: %w", addr, err)
	}
	if tlsCfg != nil {
		l = tls.NewListener(l, tlsCfg)
	}
	s := &Server{hub: hub, rc: hub.Config(), log: hub.Log().With("receiver", "http"), l: l}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.l.Addr() }

// Run serves until ctx ends, then shuts down: requests in progress get
// their answers (each waits at most AckTimeout) before it returns.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.rc.AckTimeout+5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		s.srv.Close()
	}
	<-errc
	return nil
}

// Handler is the endpoints' handler: POST /_bulk, /<tenant>/_bulk and
// /jsonline, and the few Elasticsearch GET/HEAD/PUT calls shippers make
// before they send (version probe, templates), answered so that they go
// on.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jsonline", s.jsonline)
	mux.HandleFunc("PUT /jsonline", s.jsonline)
	mux.HandleFunc("POST /_bulk", s.bulk)
	mux.HandleFunc("PUT /_bulk", s.bulk)
	mux.HandleFunc("POST /{tenant}/_bulk", s.bulk)
	mux.HandleFunc("PUT /{tenant}/_bulk", s.bulk)
	mux.HandleFunc("/", s.esProbe)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Elasticsearch clients (Filebeat, Logstash) check this header.
		w.Header().Set("X-Elastic-Product", "Elasticsearch")
		mux.ServeHTTP(w, r)
	})
}

// esProbe answers the requests Elasticsearch shippers make besides _bulk:
// GET / (the version), HEAD and GET of templates, policies and licenses,
// PUT of templates. Nothing is stored.
func (s *Server) esProbe(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.auth(w, r, ""); !ok {
		return
	}
	// Shippers configured with a path prefix (the tenant: Filebeat's path,
	// Logstash's path, Fluent Bit's Path, Vector's endpoint path) probe
	// under it: /<tenant>/ is the root, /<tenant>/_license the license.
	p := strings.Trim(r.URL.Path, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 && !strings.HasPrefix(p, "_") {
		p = p[i+1:]
	} else if !strings.HasPrefix(p, "_") {
		p = ""
	}
	switch {
	case p == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		writeJSON(w, http.StatusOK, map[string]any{
			"name": "quarry", "cluster_name": "quarry", "cluster_uuid": "quarry",
			"version": map[string]any{"number": "8.11.0", "build_flavor": "default", "lucene_version": "9.8.0",
				"minimum_wire_compatibility_version": "7.17.0", "minimum_index_compatibility_version": "7.0.0"},
			"tagline": "You Know, for Search",
		})
	case r.Method == http.MethodGet && strings.HasPrefix(p, "_license"):
		writeJSON(w, http.StatusOK, map[string]any{"license": map[string]any{"status": "active", "type": "basic", "uid": "quarry"}})
	case r.Method == http.MethodGet && strings.HasPrefix(p, "_xpack"):
		writeJSON(w, http.StatusOK, map[string]any{"features": map[string]any{}, "license": map[string]any{"status": "active", "type": "basic"}})
	case r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodPut || r.Method == http.MethodPost:
		// Templates, pipelines, ILM policies: acknowledged, not kept.
		io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		writeJSON(w, http.StatusOK, map[string]any{"acknowledged": true})
	default:
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" "+r.URL.Path+" is not served", 0)
	}
}

// token is the credential of r: "Bearer T", "ApiKey T" (T or, base64 of
// "id:key", the key) or Basic auth's password.
func token(r *http.Request) []string {
	h := r.Header.Get("Authorization")
	scheme, val, _ := strings.Cut(h, " ")
	val = strings.TrimSpace(val)
	switch strings.ToLower(scheme) {
	case "bearer":
		return []string{val}
	case "apikey":
		out := []string{val}
		if b, err := base64.StdEncoding.DecodeString(val); err == nil {
			if _, key, ok := strings.Cut(string(b), ":"); ok {
				out = append(out, key)
			}
		}
		return out
	case "basic":
		if _, pass, ok := r.BasicAuth(); ok {
			return []string{pass}
		}
	}
	return nil
}

// auth checks r's credential and resolves its tenant: the credential's
// tenant, which a path, query or header tenant (explicit) must match;
// without tokens configured, explicit, else the header's, else the
// default. It answers 401 or 403 itself when !ok.
func (s *Server) auth(w http.ResponseWriter, r *http.Request, explicit string) (string, bool) {
	if explicit == "" {
		explicit = r.Header.Get(TenantHeader)
	}
	credTenant := ""
	if s.hub.AuthRequired() {
		ok := false
		for _, t := range token(r) {
			if credTenant, ok = s.hub.Authenticate(t); ok {
				break
			}
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="quarry"`)
			writeError(w, http.StatusUnauthorized, "security_exception", "missing or unknown token (Authorization: Bearer, ApiKey or Basic with the token as password)", 0)
			return "", false
		}
		if explicit != "" && explicit != credTenant {
			writeError(w, http.StatusForbidden, "security_exception", fmt.Sprintf("the token writes for tenant %q, not %q", credTenant, explicit), 0)
			return "", false
		}
		return credTenant, true
	}
	if explicit == "" {
		explicit = s.hub.DefaultTenant()
	}
	if err := streams.CheckToken(explicit); err != nil {
		writeError(w, http.StatusBadRequest, "illegal_argument_exception", "tenant: "+err.Error(), 0)
		return "", false
	}
	return explicit, true
}

// body reads r's body, gunzipped when Content-Encoding says gzip, up to
// MaxBodyBytes; it answers 429, 413 or 400 itself when !ok.
func (s *Server) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	// Refuse before reading what would be refused after: bodies waiting
	// for room are not held in memory.
	if r.ContentLength > 0 && s.hub.Busy(r.ContentLength) {
		writeError(w, http.StatusTooManyRequests, "es_rejected_execution_exception", ingest.ErrBusy.Error(), 1)
		return nil, false
	}
	var rd io.Reader = http.MaxBytesReader(w, r.Body, s.rc.MaxBodyBytes)
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(rd)
		if err != nil {
			writeError(w, http.StatusBadRequest, "parse_exception", "gzip body: "+err.Error(), 0)
			return nil, false
		}
		defer zr.Close()
		rd = io.LimitReader(zr, s.rc.MaxBodyBytes+1)
	}
	b, err := ingest.ReadBody(rd, r.ContentLength, s.rc.MaxBodyBytes)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || int64(len(b)) > s.rc.MaxBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "content_too_long_exception",
			fmt.Sprintf("body exceeds producer.receivers.max_body_bytes %d", s.rc.MaxBodyBytes), 0)
		return nil, false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "parse_exception", "read body: "+err.Error(), 0)
		return nil, false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		writeError(w, http.StatusBadRequest, "parse_exception", "request body is required", 0)
		return nil, false
	}
	return b, true
}

// bodyString is b, a body as body read it, as a string without a copy:
// nothing writes b after it is read, and its lines' entries, which share
// it, outlive the request (copying a request's body was 2% of the JSON-
// lines receiver's CPU, as much as reading its JSON).
func bodyString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// lines splits a body at '\n' (a '\r' before it is dropped), skipping
// empty lines; each keeps its 1-based line number. The lines are b's
// substrings.
func lines(b string) (out []string, nums []int) {
	c := strings.Count(b, "\n") + 1
	out, nums = make([]string, 0, c), make([]int, 0, c)
	n := 0
	for len(b) > 0 {
		n++
		ln := b
		if i := strings.IndexByte(b, '\n'); i >= 0 {
			ln, b = b[:i], b[i+1:]
		} else {
			b = ""
		}
		ln = strings.TrimSuffix(ln, "\r")
		if len(strings.TrimSpace(ln)) == 0 {
			continue
		}
		out, nums = append(out, ln), append(nums, n)
	}
	return out, nums
}

// entry converts one document, applying the limits; a bad one keeps the
// raw document (its first 64 KiB when too long) for the dead-letter
// stream. doc is a substring of the request's body, as are the entry's
// strings where they can be: the body is copied once, not per line.
func (s *Server) entry(doc string) producer.Entry {
	if len(doc) > s.rc.MaxLineBytes {
		return producer.Entry{Text: doc[:min(len(doc), 64<<10)],
			Bad: fmt.Sprintf("line of %d bytes exceeds producer.receivers.max_line_bytes %d", len(doc), s.rc.MaxLineBytes)}
	}
	e, err := entryOf(doc, s.rc.MessageFields)
	if err != nil {
		return producer.Entry{Text: doc, Bad: err.Error()}
	}
	s.hub.Check(&e)
	if e.Bad != "" {
		e.Text, e.Attrs, e.TS = doc, nil, time.Time{}
	}
	return e
}

// ingest writes entries and answers the failure itself when !ok.
func (s *Server) ingest(w http.ResponseWriter, r *http.Request, receiver, tenant string, entries []producer.Entry, size int) (producer.Ingested, bool) {
	in, err := s.hub.Ingest(r.Context(), receiver, tenant, entries, int64(size))
	switch {
	case err == nil:
		return in, true
	case errors.Is(err, ingest.ErrBusy):
		writeError(w, http.StatusTooManyRequests, "es_rejected_execution_exception", err.Error(), 1)
	case errors.Is(err, ingest.ErrUnavailable), errors.Is(err, ingest.ErrNotDurable), errors.Is(err, ingest.ErrTooManyTenants):
		writeError(w, http.StatusServiceUnavailable, "unavailable_shards_exception", err.Error(), 5)
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		writeError(w, http.StatusBadRequest, "illegal_argument_exception", err.Error(), 0)
	}
	return in, false
}

// LineError is one failed line of a JSON-lines request.
type LineError struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// JSONLinesResponse answers POST /jsonline: 200 when every line was
// written, 400 when some were malformed (dead-lettered, listed in Failed;
// the others written).
type JSONLinesResponse struct {
	Tenant   string      `json:"tenant"`
	Accepted int         `json:"accepted"`
	Failed   []LineError `json:"failed,omitempty"`
}

// jsonline serves POST /jsonline?tenant=T: one JSON object per line.
func (s *Server) jsonline(w http.ResponseWriter, r *http.Request) {
	tenant, ok := s.auth(w, r, r.URL.Query().Get("tenant"))
	if !ok {
		return
	}
	b, ok := s.body(w, r)
	if !ok {
		return
	}
	docs, nums := lines(bodyString(b))
	entries := make([]producer.Entry, len(docs))
	resp := JSONLinesResponse{Tenant: tenant}
	for i, d := range docs {
		entries[i] = s.entry(d)
		if entries[i].Bad != "" {
			resp.Failed = append(resp.Failed, LineError{Line: nums[i], Reason: entries[i].Bad})
		}
	}
	if _, ok := s.ingest(w, r, "jsonline", tenant, entries, len(b)); !ok {
		return
	}
	resp.Accepted = len(entries) - len(resp.Failed)
	code := http.StatusOK
	if len(resp.Failed) > 0 {
		code = http.StatusBadRequest
	}
	writeJSON(w, code, resp)
}

// BulkItem is one item of a _bulk response, under its action's name.
type BulkItem map[string]BulkResult

// BulkResult is an item's outcome.
type BulkResult struct {
	Index  string     `json:"_index"`
	ID     string     `json:"_id,omitempty"`
	Status int        `json:"status"`
	Result string     `json:"result,omitempty"`
	Error  *BulkError `json:"error,omitempty"`
}

// BulkError is an item's error, as Elasticsearch writes it.
type BulkError struct {
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// BulkResponse is the _bulk answer: Errors says whether any item failed;
// shippers resend only items with a retryable status.
type BulkResponse struct {
	Took   int64      `json:"took"`
	Errors bool       `json:"errors"`
	Items  []BulkItem `json:"items"`
}

type bulkAction struct {
	Index string `json:"_index"`
	ID    string `json:"_id"`
}

// bulk serves the Elasticsearch _bulk API: index and create actions write
// their document; delete and update are refused per item (400), as is a
// malformed action or document, which is dead-lettered with the reason.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	tenant, ok := s.auth(w, r, r.PathValue("tenant"))
	if !ok {
		return
	}
	b, ok := s.body(w, r)
	if !ok {
		return
	}
	entries, items, entryItem := parseBulk(bodyString(b), tenant, s.entry)
	in, ok := s.ingest(w, r, "bulk", tenant, entries, len(b))
	if !ok {
		return
	}
	for i, it := range entryItem {
		if res := &items[it].res; res.ID == "" && res.Status < 300 {
			items[it].msgID = in.FirstOffset + uint64(i) + 1
		}
	}
	errs := false
	for i := range items {
		if items[i].res.Status >= 300 {
			errs = true
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(appendBulkResponse(make([]byte, 0, 64+len(items)*96), time.Since(start).Milliseconds(), errs, items, in.Source))
}

// bulkItem is one item of a _bulk answer: its action and outcome. A
// written document without an _id of its own is answered with its
// record's message id, streams.FrameMsgID(source, msgID-1): msgID is that
// offset plus one, 0 for none (appended as the answer is written, not
// formatted per item).
type bulkItem struct {
	op    string
	res   BulkResult
	msgID uint64
}

// parseBulk reads a _bulk body into the entries to write and the
// response items, in order; entries[i] answers items[entryItem[i]]. entry
// converts one document (a bad one has Bad set). Every line of the body
// is an item's action or document: a malformed action is dead-lettered
// with the document after it (unless that is an action itself), so
// nothing is skipped silently.
func parseBulk(b string, tenant string, entry func(string) producer.Entry) (entries []producer.Entry, items []bulkItem, entryItem []int) {
	docs, _ := lines(b)
	entries = make([]producer.Entry, 0, len(docs)/2+1)
	items = make([]bulkItem, 0, len(docs)/2+1)
	entryItem = make([]int, 0, len(docs)/2+1)
	for i := 0; i < len(docs); i++ {
		op, act, err := parseAction(docs[i])
		if err != nil {
			// The pair's shape is lost: take the next line as its
			// document unless it is an action itself.
			raw := docs[i]
			if i+1 < len(docs) {
				if _, _, err2 := parseAction(docs[i+1]); err2 != nil {
					i++
					raw += "\n" + docs[i]
				}
			}
			entries = append(entries, producer.Entry{Text: raw, Bad: "bulk action: " + err.Error()})
			entryItem = append(entryItem, len(items))
			items = append(items, bulkItem{op: "index", res: BulkResult{Index: tenant, Status: http.StatusBadRequest,
				Error: &BulkError{Type: "illegal_argument_exception", Reason: "malformed action line: " + err.Error()}}})
			continue
		}
		idx := act.Index
		if idx == "" {
			idx = tenant
		}
		switch op {
		case "delete":
			items = append(items, bulkItem{op: op, res: BulkResult{Index: idx, ID: act.ID, Status: http.StatusBadRequest,
				Error: &BulkError{Type: "illegal_argument_exception", Reason: "delete is not supported: quarry is append-only"}}})
			continue
		case "update":
			if i+1 < len(docs) {
				i++
			}
			items = append(items, bulkItem{op: op, res: BulkResult{Index: idx, ID: act.ID, Status: http.StatusBadRequest,
				Error: &BulkError{Type: "illegal_argument_exception", Reason: "update is not supported: quarry is append-only"}}})
			continue
		}
		if i+1 >= len(docs) {
			entries = append(entries, producer.Entry{Text: docs[i], Bad: "bulk action without its document (the body ends)"})
			entryItem = append(entryItem, len(items))
			items = append(items, bulkItem{op: op, res: BulkResult{Index: idx, ID: act.ID, Status: http.StatusBadRequest,
				Error: &BulkError{Type: "illegal_argument_exception", Reason: "action without its document"}}})
			continue
		}
		i++
		e := entry(docs[i])
		res := BulkResult{Index: idx, ID: act.ID, Status: http.StatusCreated, Result: "created"}
		if e.Bad != "" {
			res = BulkResult{Index: idx, ID: act.ID, Status: http.StatusBadRequest,
				Error: &BulkError{Type: "mapper_parsing_exception", Reason: e.Bad}}
		}
		entries = append(entries, e)
		entryItem = append(entryItem, len(items))
		items = append(items, bulkItem{op: op, res: res})
	}
	return entries, items, entryItem
}

// parseAction reads a _bulk action line: {"index"|"create"|"delete"|
// "update": {...}}.
func parseAction(b string) (string, bulkAction, error) {
	// What shippers send on nearly every line, without two JSON decodes.
	switch strings.TrimSpace(b) {
	case `{"index":{}}`:
		return "index", bulkAction{}, nil
	case `{"create":{}}`:
		return "create", bulkAction{}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(b), &m); err != nil {
		return "", bulkAction{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if len(m) != 1 {
		return "", bulkAction{}, fmt.Errorf("want one of index, create, delete, update; got %d keys", len(m))
	}
	for op, raw := range m {
		switch op {
		case "index", "create", "delete", "update":
		default:
			return "", bulkAction{}, fmt.Errorf("unknown action %q", op)
		}
		var a bulkAction
		if err := json.Unmarshal(raw, &a); err != nil {
			return "", bulkAction{}, fmt.Errorf("%s: %w", op, err)
		}
		return op, a, nil
	}
	panic("unreachable")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in Elasticsearch's error format, with Retry-After
// when retryAfter > 0 seconds.
func writeError(w http.ResponseWriter, code int, typ, reason string, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeJSON(w, code, map[string]any{
		"error":  map[string]any{"type": typ, "reason": reason, "root_cause": []map[string]string{{"type": typ, "reason": reason}}},
		"status": code,
	})
}
