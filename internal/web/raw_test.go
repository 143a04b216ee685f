package web

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quarrylake/quarry/internal/query"
)

// rawBody reads a format=raw answer, which must be a 200 of text lines.
func rawBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return string(b)
}

// rawLake is the fake lake with its own SearchRaw (a RawSearcher): its
// lines carry a mark, so a test sees which path answered.
type rawLake struct{ *fakeLake }

func (f rawLake) SearchRaw(ctx context.Context, q *query.Query, o Options, limit int, w io.Writer) error {
	n := 0
	err := f.Search(ctx, q, o, func(h *Hit) error {
		if limit > 0 && n == limit {
			return errPageFull
		}
		n++
		_, err := io.WriteString(w, "raw:"+h.Line+"\n")
		return err
	})
	if errors.Is(err, errPageFull) {
		return nil
	}
	return err
}

// TestSearchRaw: format=raw answers the lines of the NDJSON hits, one a
// line, with the same page size, paging and tenant rules; through the
// Searcher's SearchRaw when it has one; a count as VALUE<TAB>COUNT lines.
func TestSearchRaw(t *testing.T) {
	f := smallLake()
	ts := newTestServer(t, f, nil)
	withRaw := httptest.NewServer(New(Config{}, Deps{Searcher: rawLake{f}, Catalog: f}).Handler())
	t.Cleanup(withRaw.Close)
	for _, tc := range [][]string{
		{""},
		{"disk full"},
		{`"logged in" -u0`},
		{"template:2 | limit 3"},
		{"", "limit", "4"},
		{"", "limit", "0"},
		{"", "tenant", "beta"},
		{"", "cursor", "3.0", "limit", "5"},
		{"nothing-matches"},
	} {
		want := lines(ndjson(t, get(t, ts, search(tc[0], tc[1:]...))))
		extra := append(tc[1:len(tc):len(tc)], "format", "raw")
		got := rawBody(t, get(t, ts, search(tc[0], extra...)))
		if w := strings.Join(want, "\n") + "\n"; len(want) > 0 && got != w || len(want) == 0 && got != "" {
			t.Fatalf("%q: raw\n%s\nwant the hits' lines\n%s", tc, got, w)
		}
		got = rawBody(t, get(t, withRaw, search(tc[0], extra...)))
		if w := "raw:" + strings.Join(want, "\nraw:") + "\n"; len(want) > 0 && got != w || len(want) == 0 && got != "" {
			t.Fatalf("%q through SearchRaw: raw\n%s\nwant\n%s", tc, got, w)
		}
	}
	if got := rawBody(t, get(t, ts, search("| count by template", "format", "raw"))); got != "1\t10\n2\t10\n3\t10\n" {
		t.Fatalf("count by template, raw: %q", got)
	}
	if resp := get(t, ts, search("", "format", "xml")); resp.StatusCode != 400 {
		t.Fatalf("format=xml: status %d, want 400", resp.StatusCode)
	}
}

// TestSearchRawErrorCutsStream: raw lines have no end line, so a search
// that fails after its first line aborts the response (the client reads an
// error, never a clean end of a short answer); one that fails before any
// line is a 500.
func TestSearchRawErrorCutsStream(t *testing.T) {
	boom := errors.New("boom")
	for _, at := range []int{0, 5} {
		f := smallLake()
		f.each = func(_ context.Context, i int) error {
			if i == at {
				return boom
			}
			return nil
		}
		ts := newTestServer(t, f, nil)
		resp := get(t, ts, search("", "format", "raw"))
		if at == 0 {
			if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 500 || !strings.Contains(string(b), "boom") {
				t.Fatalf("error before the first line: status %d %s, want 500", resp.StatusCode, b)
			}
			continue
		}
		br := bufio.NewReader(resp.Body)
		n := 0
		var err error
		for err == nil {
			if _, err = br.ReadString('\n'); err == nil {
				n++
			}
		}
		if n != at || errors.Is(err, io.EOF) {
			t.Fatalf("%d lines then %v; want %d lines and a cut stream (not EOF)", n, err, at)
		}
	}
}
