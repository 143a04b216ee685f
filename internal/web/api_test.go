package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/query"
)

func newTestServer(t *testing.T, f *fakeLake, a *Access) *httptest.Server {
	t.Helper()
	srv := New(Config{}, Deps{Searcher: f, Catalog: f, Access: a, Now: func() time.Time { return t0.Add(time.Hour) }})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, ts *httptest.Server, path string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func ndjson(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func lines(msgs []map[string]any) []string {
	var out []string
	for _, m := range msgs {
		if m["type"] == "hit" {
			out = append(out, m["line"].(string))
		}
	}
	return out
}

func search(q string, extra ...string) string {
	v := url.Values{"q": {q}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return "/api/search?" + v.Encode()
}

func TestSearch(t *testing.T) {
	ts := newTestServer(t, smallLake(), nil)
	for _, tc := range []struct {
		q     string
		extra []string
		want  int
		first string
	}{
		{q: "", want: 30, first: "user u0 logged in from 10.0.0.1"},
		{q: "disk full", want: 10, first: "error: disk sd1 full"},
		{q: `"logged in" -u0`, want: 9, first: "user u3 logged in from 10.0.0.1"},
		{q: "status>=400", want: 5, first: "GET /x status=400"},
		{q: "template:2 | limit 3", want: 3, first: "error: disk sd1 full"},
		{q: "", extra: []string{"tenant", "beta"}, want: 10, first: "GET /x status=400"},
		{q: "tenant:beta status=200", want: 2, first: "GET /x status=200"},
		{q: "", extra: []string{"since", "2026-11-30T10:20:00Z"}, want: 10, first: "GET /x status=200"},
		{q: "", extra: []string{"until", "50m"}, want: 10, first: "user u0 logged in from 10.0.0.1"},
		{q: "nothing-matches", want: 0},
	} {
		t.Run(tc.q, func(t *testing.T) {
			msgs := ndjson(t, get(t, ts, search(tc.q, tc.extra...)))
			got := lines(msgs)
			if len(got) != tc.want {
				t.Fatalf("%d lines, want %d: %q", len(got), tc.want, got)
			}
			if tc.want > 0 && got[0] != tc.first {
				t.Fatalf("first line %q, want %q", got[0], tc.first)
			}
			end := msgs[len(msgs)-1]
			if end["type"] != "end" || int(end["count"].(float64)) != tc.want || end["more"] != false {
				t.Fatalf("end line %v", end)
			}
			if tc.want > 0 && msgs[0]["template"] == "" {
				t.Fatalf("hit without its template: %v", msgs[0])
			}
		})
	}
}

// TestSearchPages walks a search page by page with the cursor: the pages
// together are the whole result, in order, without repeats.
func TestSearchPages(t *testing.T) {
	ts := newTestServer(t, smallLake(), nil)
	all := lines(ndjson(t, get(t, ts, search("acme OR logged OR disk"))))
	var paged []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("too many pages")
		}
		msgs := ndjson(t, get(t, ts, search("acme OR logged OR disk", "limit", "7", "cursor", cursor)))
		got := lines(msgs)
		paged = append(paged, got...)
		end := msgs[len(msgs)-1]
		if end["more"] != true {
			if len(got) > 7 {
				t.Fatalf("page of %d", len(got))
			}
			break
		}
		if len(got) != 7 {
			t.Fatalf("full page of %d lines", len(got))
		}
		cursor = end["cursor"].(string)
	}
	if strings.Join(paged, "\n") != strings.Join(all, "\n") || len(all) != 20 {
		t.Fatalf("paged %d lines, unpaged %d:\n%q\n%q", len(paged), len(all), paged, all)
	}
}

func TestAggregate(t *testing.T) {
	ts := newTestServer(t, smallLake(), nil)
	msgs := ndjson(t, get(t, ts, search("| count by template")))
	if msgs[0]["type"] != "columns" || fmt.Sprint(msgs[0]["columns"]) != "[template count]" {
		t.Fatalf("columns %v", msgs[0])
	}
	var rows []string
	for _, m := range msgs[1 : len(msgs)-1] {
		rows = append(rows, fmt.Sprint(m["keys"], m["count"]))
	}
	if got := strings.Join(rows, ";"); got != "[1] 10;[2] 10;[3] 10" {
		t.Fatalf("rows %s", got)
	}
	if end := msgs[len(msgs)-1]; end["type"] != "end" || end["count"] != 3.0 {
		t.Fatalf("end %v", end)
	}
}

// TestBadQuery: a query the parser rejects is a 400 with the message and
// the column the parser reports.
func TestBadQuery(t *testing.T) {
	ts := newTestServer(t, smallLake(), nil)
	for _, q := range []string{"status=404 | top x path", "(error", "a OR", "/[/", `"open`, "nosuch:x", "| count | count"} {
		t.Run(q, func(t *testing.T) {
			_, cerr := query.Compile(q)
			var pe *query.ParseError
			if !errors.As(cerr, &pe) {
				t.Fatalf("test query %q compiles", q)
			}
			resp := get(t, ts, search(q))
			var body apiError
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 400 || body.Column != pe.Column || body.Error != pe.Error() || body.Caret != pe.Caret() {
				t.Fatalf("status %d body %+v, want 400 column %d %q", resp.StatusCode, body, pe.Column, pe.Error())
			}
		})
	}
	for _, p := range []string{search("x", "limit", "-1"), search("x", "cursor", "zz"), search("x", "since", "yesterday")} {
		if resp := get(t, ts, p); resp.StatusCode != 400 {
			t.Fatalf("%s: status %d, want 400", p, resp.StatusCode)
		}
	}
}

// TestSearchStreams: the response starts before the scan ends. The scan
// parks after its first record until the client has read that record's
// line, so a server that buffered the response would never send it.
func TestSearchStreams(t *testing.T) {
	const n = 100_000
	f := smallLake()
	small := f.gen
	pad := strings.Repeat("x", 400)
	f.n = n
	f.gen = func(i int) Hit {
		h := small(i % 30)
		h.WALSeq, h.Index = uint64(i+1), 0
		h.Line += " " + pad
		return h
	}
	seen := make(chan struct{})
	f.each = func(ctx context.Context, i int) error {
		if i == 1 {
			select {
			case <-seen:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	ts := newTestServer(t, f, nil)
	resp := get(t, ts, search("", "limit", "0"))
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	first := make(chan error, 1)
	go func() {
		_, err := br.ReadBytes('\n')
		first <- err
	}()
	select {
	case err := <-first:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no line before the scan finished: the response is buffered")
	}
	close(seen)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	count, bytes := 1, 0
	for {
		b, err := br.ReadBytes('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		count++
		bytes += len(b)
		if count%5000 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	if count != n+1 {
		t.Fatalf("%d lines, want %d hits and the end", count, n+1)
	}
	// The response is ~45 MB; a buffered one would be on the heap whole.
	if grow := int64(peak) - int64(base); grow > int64(bytes/3) {
		t.Fatalf("heap grew by %d bytes while streaming %d bytes", grow, bytes)
	}
	t.Logf("streamed %d bytes, heap peak +%d", bytes, int64(peak)-int64(base))
}

// TestDisconnectStopsScan: a client that goes away mid-stream ends the
// scan (its context canceled, or a write reset), and no goroutine is left
// behind, in either format.
func TestDisconnectStopsScan(t *testing.T) {
	for _, format := range []string{"ndjson", "raw"} {
		t.Run(format, func(t *testing.T) { testDisconnectStopsScan(t, format) })
	}
}

func testDisconnectStopsScan(t *testing.T, format string) {
	f := smallLake()
	small := f.gen
	f.n = -1 // endless
	f.gen = func(i int) Hit { h := small(i % 30); h.WALSeq = uint64(i + 1); return h }
	f.done = make(chan error, 1)
	ts := newTestServer(t, f, nil)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+search("", "limit", "0", "format", format), nil)
	tr := &http.Transport{DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for range 100 {
		if _, err := br.ReadBytes('\n'); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	resp.Body.Close()
	select {
	case err := <-f.done:
		// The server learns of the disconnect from the request's context
		// or from a write that fails first (the peer reset the
		// connection): either ends the scan. Which one comes first is the
		// kernel's timing (CI saw the reset).
		if !errors.Is(err, context.Canceled) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("scan ended with %v, want context.Canceled or the write's connection reset", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the scan goes on after the client left")
	}
	tr.CloseIdleConnections()
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTemplatesAPI(t *testing.T) {
	ts := newTestServer(t, smallLake(), nil)
	var list struct{ Templates []Template }
	decode(t, get(t, ts, "/api/templates"), &list)
	if len(list.Templates) != 3 || len(list.Templates[0].Versions) != 2 || list.Templates[0].Text != "user <*> logged in from <*>" {
		t.Fatalf("templates %+v", list.Templates)
	}
	s := list.Templates[1].Series
	if s == nil || s.Step != "1m" || len(s.Points) != 10 || s.Points[0] != [2]int64{t0.Add(time.Minute).UnixMilli(), 1} {
		t.Fatalf("series of template 2: %+v", s)
	}
	var d TemplateDetail
	decode(t, get(t, ts, "/api/templates/3"), &d)
	if d.ID != 3 || d.Tenant != "beta" || len(d.Samples) != 10 || d.Samples[0].Line != "GET /x status=400" || d.Series == nil || len(d.Series.Points) != 10 {
		t.Fatalf("detail %+v", d)
	}
	if resp := get(t, ts, "/api/templates/99"); resp.StatusCode != 404 {
		t.Fatalf("unknown template: %d", resp.StatusCode)
	}
	// Records from minute 25 on are "new" for since=2026-11-30T10:25Z only
	// if no earlier record has their template: none is new.
	var nw struct{ Templates []NewTemplate }
	decode(t, get(t, ts, "/api/templates/new?since=2026-11-30T10:25:00Z"), &nw)
	if len(nw.Templates) != 0 {
		t.Fatalf("new templates %+v", nw.Templates)
	}
	decode(t, get(t, ts, "/api/templates/new?since=2026-11-30T10:02:00Z"), &nw)
	if len(nw.Templates) != 1 || nw.Templates[0].ID != 3 || nw.Templates[0].InWindow != 10 {
		t.Fatalf("new templates since minute 2: %+v", nw.Templates)
	}
	// More days than a duration holds is a bad request: 213505d wrapped
	// around to about a day ago.
	for since, want := range map[string]int{"7d": 200, "106751d": 200, "106752d": 400, "213505d": 400} {
		if resp := get(t, ts, "/api/templates/new?since="+since); resp.StatusCode != want {
			t.Errorf("since=%s: %d, want %d", since, resp.StatusCode, want)
		}
	}
}

func TestCoarsen(t *testing.T) {
	c := map[int64]int64{}
	for i := range 600 { // ten hours of minutes
		c[t0.Add(time.Duration(i)*time.Minute).UnixMilli()] = 1
	}
	s := coarsen(c, t0.UnixMilli(), t0.Add(599*time.Minute).UnixMilli())
	if s.Step != "15m" || len(s.Points) != 40 || s.Points[0][1] != 15 {
		t.Fatalf("step %s, %d points, first %v", s.Step, len(s.Points), s.Points[0])
	}
}

func decode(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// TestFilter: the lake filter a ScanSearcher reads with narrows to the
// query's or the grant's tenant and the tighter time bounds, and reads
// nothing for a tenant outside the grant.
func TestFilter(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, tc := range []struct {
		q      string
		o      Options
		tenant string
		since  time.Time
		until  time.Time
		ok     bool
	}{
		{q: "x", ok: true},
		{q: "tenant:acme x", tenant: "acme", ok: true},
		{q: "x", o: Options{Tenants: []string{"beta"}}, tenant: "beta", ok: true},
		{q: "x", o: Options{Tenants: []string{"acme", "beta"}}, ok: true},
		{q: "tenant:acme", o: Options{Tenants: []string{"beta"}}, tenant: "acme", ok: false},
		{q: "ts:>=2026-11-30T10:05:00Z", o: Options{Since: at(2), Until: at(9)}, since: at(5), until: at(9), ok: true},
		{q: "ts:<2026-11-30T10:05:00Z", o: Options{Since: at(2), Until: at(9)}, since: at(2), until: at(5), ok: true},
	} {
		f, ok := filter(query.MustCompile(tc.q), tc.o)
		if ok != tc.ok || f.Tenant != tc.tenant || !f.Since.Equal(tc.since) || !f.Until.Equal(tc.until) {
			t.Errorf("%q %+v: filter %+v %v, want tenant %q [%v, %v) %v", tc.q, tc.o, f, ok, tc.tenant, tc.since, tc.until, tc.ok)
		}
	}
}
