package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/web"
)

// TestServeRaw: /api/search?format=raw over a lake answers, byte for byte,
// what `quarry query --format raw` prints, for a grant of every tenant, of
// one (lake.SearchRaw) and of two (filtered record by record: one of them
// has no records, so the answer is the other's); a client
// that leaves mid-stream ends the search, leaves no goroutine behind, and
// the server goes on answering.
func TestServeRaw(t *testing.T) {
	dir := t.TempDir()
	runCLI(t, "", "run", "--data", filepath.Join(dir, "data"), "--lines", "4000", "--tenants", "acme,globex")
	lk := filepath.Join(dir, "data", "lake")
	tokens := "all=*;one=globex;two=acme,nosuch"
	base := startServe(t, func(k string) string {
		if k == web.EnvTokens {
			return tokens
		}
		return ""
	}, "--lake", lk)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	fetch := func(ctx context.Context, token, q string, extra ...string) *http.Response {
		t.Helper()
		v := url.Values{"q": {q}, "format": {"raw"}, "limit": {"0"}}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/search?"+v.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s %q: status %d: %s", token, q, resp.StatusCode, b)
		}
		return resp
	}
	body := func(token, q string, extra ...string) string {
		t.Helper()
		resp := fetch(context.Background(), token, q, extra...)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		token, q string
		extra    []string
		cli      []string
	}{
		{token: "all", q: ""},
		{token: "all", q: "Exception"},
		{token: "all", q: "tenant:acme error"},
		{token: "all", q: "| limit 7"},
		{token: "all", q: "", extra: []string{"limit", "5"}, cli: []string{"--limit", "5"}},
		{token: "all", q: "| count by template"},
		{token: "one", q: "", cli: []string{"--tenant", "globex"}},
		{token: "two", q: "", cli: []string{"--tenant", "acme"}},
		{token: "two", q: "Exception", extra: []string{"limit", "9"}, cli: []string{"--tenant", "acme", "--limit", "9"}},
	} {
		want, _ := runCLI(t, "", append(append([]string{"query", "--lake", lk, "--format", "raw"}, tc.cli...), tc.q)...)
		if got := body(tc.token, tc.q, tc.extra...); got != want || len(want) == 0 {
			t.Fatalf("token %s %q %v: %d bytes, want the CLI's %d", tc.token, tc.q, tc.extra, len(got), len(want))
		}
	}

	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	resp := fetch(ctx, "all", "")
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
	want, _ := runCLI(t, "", "query", "--lake", lk, "--format", "raw", "Exception")
	if got := body("all", "Exception"); got != want {
		t.Fatalf("after a client left: %d bytes, want %d", len(got), len(want))
	}
}
