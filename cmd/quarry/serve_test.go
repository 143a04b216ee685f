package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quarrylake/quarry/internal/syncbuf"
	"github.com/quarrylake/quarry/internal/web"
	"github.com/quarrylake/quarry/pipeline"
	"github.com/quarrylake/quarry/producer"
)

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "localhost:80": true, "[::1]:8080": true, "127.0.0.2:1": true,
		":8080": false, "0.0.0.0:8080": false, "10.1.2.3:80": false, "[::]:80": false, "example.com:80": false, "nonsense": false,
	} {
		if got := loopbackOnly(addr); got != want {
			t.Errorf("loopbackOnly(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestServeRefusesOpenAddressWithoutCredentials: without credentials serve
// listens on loopback only; with a token it may listen anywhere (it then
// gets as far as opening the lake).
func TestServeRefusesOpenAddressWithoutCredentials(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nolake")
	var out, errb strings.Builder
	e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := runMain(context.Background(), e, []string{"serve", "--lake", missing, "--http", ":0"}); code != 2 ||
		!strings.Contains(errb.String(), "loopback address only") {
		t.Fatalf("exit %d, stderr %q; want 2 and the loopback rule", code, errb.String())
	}
	errb.Reset()
	e.getenv = func(k string) string {
		if k == web.EnvTokens {
			return "tok=*"
		}
		return ""
	}
	if code := runMain(context.Background(), e, []string{"serve", "--lake", missing, "--http", ":0"}); code != 2 ||
		!strings.Contains(errb.String(), "no such directory") {
		t.Fatalf("with a token: exit %d, stderr %q; want the missing lake", code, errb.String())
	}
	errb.Reset()
	e.getenv = func(k string) string {
		if k == web.EnvTokens {
			return "tok"
		}
		return ""
	}
	if code := runMain(context.Background(), e, []string{"serve", "--lake", missing}); code != 2 ||
		!strings.Contains(errb.String(), web.EnvTokens+" entry 1") {
		t.Fatalf("bad tokens: exit %d, stderr %q", code, errb.String())
	}
}

// chromium finds a Chromium or Chrome binary.
func chromium() string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// startServe runs `quarry serve` in-process and returns its base URL; the
// server stops at the end of the test.
func startServe(t *testing.T, getenv func(string) string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, &env{stdout: &stderr, stderr: &stderr, getenv: getenv}, append([]string{"serve", "--http", "127.0.0.1:0"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exit %d:\n%s", code, stderr.String())
		}
	})
	re := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	deadline := time.Now().Add(time.Minute)
	for {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			if getenv(web.EnvTokens) == "" && !strings.Contains(stderr.String(), "loopback only") {
				t.Errorf("serve without credentials does not say it is loopback only:\n%s", stderr.String())
			}
			return "http://" + m[1]
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServePage drives the page in headless Chromium against a running
// pipeline, as a person would: type a query, see the lines, open a line's
// template, see its plot, look at the pipeline view. Without a Chromium
// binary it skips, except under CI=true, where it fails.
func TestServePage(t *testing.T) {
	bin := chromium()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium binary on PATH (CI=true): .ci/run installs Debian's chromium package")
		}
		t.Skip("no chromium binary on PATH: apt-get install chromium to run the browser test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, cfg := startPipeline(ctx, t, 1)
	lines := producer.NewGenerator(3, []string{"acme"}).Lines("acme", 400)
	for i := range 25 {
		lines = append(lines, fmt.Sprintf("payment failed for order %d status=%d", 1000+i, 500+i%3))
	}
	_, last := publishCommitted(ctx, t, p, producer.Config{Tenant: "acme"}, strings.Join(lines, "\n")+"\n")
	base := startServe(t, func(string) string { return "" }, "--lake", cfg.LakeURL(), "--nats", p.URL)

	// The API answers on the running pipeline too.
	resp, err := http.Get(base + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	var st web.Report
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !st.NATS || st.HighWater < last || st.WALLastSeq != last || len(st.Stages) != 4 || len(st.Errors) != 0 {
		t.Fatalf("status %+v, want high-water and WAL at %d", st, last)
	}

	resp, err = http.Get(base + "/api/search?q=" + url.QueryEscape(`"payment failed" | count by template`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rows := strings.Split(strings.TrimSpace(string(body)), "\n"); len(rows) != 3 || !strings.Contains(rows[1], `"count":25`) {
		t.Fatalf("count by template over the lake:\n%s", body)
	}
	if resp, err := http.Get(base + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	alloc, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Headless, chromedp.WindowSize(1280, 900))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(alloc)
	defer bcancel()
	shots := os.Getenv("QUARRY_SCREENSHOT_DIR")
	if shots == "" {
		shots = t.TempDir()
	}
	shot := func(name string) {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			shot("failed.png")
			t.Fatalf("%s: %v (screenshot in %s)", what, err, shots)
		}
	}
	eval := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return s
	}

	// Search: type a query, see the lines with the term highlighted.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("q")),
		chromedp.SendKeys(chromedp.ID("q"), `"payment failed" status>=501`),
		chromedp.Click(chromedp.ID("go")),
	); err != nil {
		t.Fatal(err)
	}
	waitFor("search results", `document.querySelectorAll("#results li.hit").length > 0 && /lines in/.test(document.getElementById("summary").textContent)`)
	hits := eval(`Array.from(document.querySelectorAll("#results li.hit .line")).map(e => e.textContent).join("\n")`)
	got := strings.Split(hits, "\n")
	if len(got) != 16 {
		t.Fatalf("%d lines, want the 16 with status 501 or 502:\n%s", len(got), hits)
	}
	for _, l := range got {
		if !strings.HasPrefix(l, "payment failed for order ") || strings.HasSuffix(l, "status=500") {
			t.Fatalf("line %q does not match the query", l)
		}
	}
	if m := eval(`document.querySelector("#results li.hit mark").textContent`); m != "payment failed" {
		t.Fatalf("highlight %q", m)
	}
	shot("search.png")

	// A bad query shows the error and its column.
	if err := chromedp.Do(bctx, chromedp.SetValue(chromedp.ID("q"), "status=404 | top x path"), chromedp.Click(chromedp.ID("go"))); err != nil {
		t.Fatal(err)
	}
	waitFor("query error", `!document.getElementById("error").hidden`)
	if c := eval(`document.getElementById("error-caret").textContent`); !strings.HasSuffix(c, "\n"+strings.Repeat(" ", 17)+"^") {
		t.Fatalf("caret %q", c)
	}
	if err := chromedp.Do(bctx, chromedp.SetValue(chromedp.ID("q"), `"payment failed"`), chromedp.Click(chromedp.ID("go"))); err != nil {
		t.Fatal(err)
	}
	waitFor("search results", `document.getElementById("error").hidden && document.querySelectorAll("#results li.hit").length == 25`)

	// Open the template of a line: its text, versions, samples and plot.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#results li.hit a.tpl"))); err != nil {
		t.Fatal(err)
	}
	waitFor("template plot", `document.querySelectorAll("#tpl-plot rect.pt").length > 0 && document.querySelectorAll("#tpl-samples li").length > 0`)
	if txt := eval(`document.getElementById("tpl-text").textContent`); !strings.Contains(txt, "payment failed for order") {
		t.Fatalf("template text %q", txt)
	}
	if n := eval(`String(Array.from(document.querySelectorAll("#tpl-plot rect.pt")).reduce((s, r) => s + +r.dataset.count, 0))`); n != "25" {
		t.Fatalf("the plot counts %s records, want 25", n)
	}
	if v := eval(`String(document.querySelectorAll("#tpl-versions tbody tr").length)`); v == "0" {
		t.Fatal("no versions")
	}
	waitFor("template list", `document.querySelectorAll("#tpl-list li[data-id]").length > 1`)
	shot("template.png")

	// The pipeline view plots lag per stage from /api/status.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`nav a[data-view="pipeline"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor("pipeline plots", `document.querySelectorAll("#plot-lag polyline.series").length >= 4 && document.querySelectorAll("#plot-rate polyline.series").length >= 2`)
	shot("pipeline.png")

	// A link to a query runs it, though another query is in the box (the
	// page is the same document: only its hash changes).
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/#search?q="+url.PathEscape(`"payment failed" status=500`))); err != nil {
		t.Fatal(err)
	}
	waitFor("the linked query's results", `!document.getElementById("view-search").hidden && document.getElementById("q").value == '"payment failed" status=500' && /^9 lines in/.test(document.getElementById("summary").textContent)`)
	// A hash that names no view shows the search view, not an empty page.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/#nosuch")); err != nil {
		t.Fatal(err)
	}
	waitFor("the search view for an unknown hash", `!document.getElementById("view-search").hidden && document.getElementById("view-pipeline").hidden`)
	t.Logf("screenshots in %s", shots)
}

// TestServeLearnsPairs: serve over a lake a running pipeline wrote (busy
// files of one template: no byte pairs in their footers) learns their versions' pairs in
// the background (learnPairs), which its metric counts, and a search for
// a parameter's value (in no template's text) still finds its line; serve
// then stops cleanly (startServe's cleanup: exit 0).
func TestServeLearnsPairs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, cfg := startPipeline(ctx, t, 1)
	// Lines of one template: whatever the encoder's flushes, a file of 64
	// rows or more has a version with a byte set, which learns pairs.
	var lines []string
	for i := range 3000 {
		lines = append(lines, fmt.Sprintf("session opened for user u%05d from 10.%d.%d.%d", i*7919%100000, i%200, i%13, i%251))
	}
	lines = append(lines, "session opened for user zq7xw2k from 10.9.8.7")
	publishCommitted(ctx, t, p, producer.Config{Tenant: "acme"}, strings.Join(lines, "\n")+"\n")
	base := startServe(t, func(string) string { return "" }, "--lake", cfg.LakeURL())
	re := regexp.MustCompile(`(?m)^quarry_serve_pairs_learned_files_total (\d+)`)
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := re.FindSubmatch(body); m != nil && string(m[1]) != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve learned no file's pairs in a minute:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get(base + "/api/search?format=raw&q=" + url.QueryEscape("zq7xw2k"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := strings.TrimSpace(string(body)); got != "session opened for user zq7xw2k from 10.9.8.7" {
		t.Fatalf("search zq7xw2k after learning: %q", got)
	}
}

// startPipeline starts the whole pipeline on an embedded NATS server in a
// test directory, closed when the test ends.
func startPipeline(ctx context.Context, t *testing.T, encoders int) (*pipeline.Pipeline, pipeline.Config) {
	t.Helper()
	cfg := pipeline.Config{Server: pipeline.ServerConfig{DataDir: filepath.Join(t.TempDir(), "data"), Encoders: encoders}}
	p, err := pipeline.Start(ctx, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, cfg
}

// publishCommitted publishes the lines of in through p's WAL (a reader
// source of cfg) and waits until the lake has committed them; it returns
// the source and the WAL's last sequence.
func publishCommitted(ctx context.Context, t *testing.T, p *pipeline.Pipeline, cfg producer.Config, in string) (*producer.Lines, uint64) {
	t.Helper()
	src, err := producer.NewReader(cfg, producer.Deps{JS: p.JS}, strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Run(ctx); err != nil {
		t.Fatal(err)
	}
	last, err := p.WALLastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitCommitted(ctx, last, 0, nil); err != nil {
		t.Fatal(err)
	}
	return src, last
}
