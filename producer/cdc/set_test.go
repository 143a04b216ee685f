package cdc

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/quarrylake/quarry/internal/health"
	"github.com/quarrylake/quarry/producer/sqlserver/memsource"
	"github.com/quarrylake/quarry/streams"
)

// readyz answers GET /readyz of h: the status code and the body.
func readyz(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

// /readyz of `quarry producer mssql` is not ready until every capture
// instance has started, is ready while they stream, and is not ready again,
// naming the capture instance and its error, once one of them has failed
// while the others go on.
func TestSetReadyReportsFailedCaptureInstance(t *testing.T) {
	e := newCDCEnv(t, "a", "b")
	cfg := cdcTestConfig("dbo_a", "dbo_b")
	g, err := NewSet(cfg, Deps{JS: e.js, Source: e.db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	hs := health.New(nil, nil)
	hs.Add("cdc", g.Ready)
	h := hs.Handler()
	if code, body := readyz(t, h); code != http.StatusServiceUnavailable || !strings.Contains(body, "0 of 2 capture instances started") {
		t.Fatalf("before start: %d %q", code, body)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.insert("a", 0, 3)
	e.insert("b", 0, 3)
	sa, sb := streams.CDCSubject("shop", "dbo_a"), streams.CDCSubject("shop", "dbo_b")
	cdcWait(t, "both streaming and ready", func() bool {
		code, _ := readyz(t, h)
		return len(cdcRecords(t, e.js, sa)) == 3 && len(cdcRecords(t, e.js, sb)) == 3 && code == http.StatusOK
	})

	// The cleanup job purges a's changes before its stream reads them: a
	// stops with ErrPurgedRange, b goes on.
	var once sync.Once
	e.db.Hook(memsource.MethodChanges, func(ci string) {
		if ci == "dbo_a" {
			once.Do(func() { e.db.CleanupInstance("dbo_a", e.db.Tick()) })
		}
	})
	e.insert("a", 3, 2)
	var code int
	var body string
	cdcWait(t, "a reported failed", func() bool {
		code, body = readyz(t, h)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "capture instance dbo_a")
	})
	if !strings.Contains(body, "purged range") || strings.Contains(body, "dbo_b") {
		t.Fatalf("/readyz body %q: want dbo_a's purged range and nothing about dbo_b", body)
	}
	if err := g.Ready(); !errors.Is(err, ErrPurgedRange) {
		t.Fatalf("Ready() = %v, want ErrPurgedRange", err)
	}
	e.insert("b", 3, 2)
	cdcWait(t, "b continues", func() bool { return len(cdcRecords(t, e.js, sb)) == 5 })
}

// checks records what Run registers.
type checks struct {
	mu sync.Mutex
	c  map[string]health.Check
}

func (c *checks) Add(name string, chk health.Check) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.c[name] = chk
}

// Run registers the set's readiness check before it connects to SQL
// Server, so a producer that cannot reach its database is not ready.
func TestRunRegistersReadiness(t *testing.T) {
	e := newCDCEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there: the ping is refused
	c := &checks{c: map[string]health.Check{}}
	dsn := "sqlserver://quarry:secret@" + addr + "?database=shop&dial+timeout=2"
	if err := Run(context.Background(), cdcTestConfig("dbo_a"), dsn, Deps{JS: e.js}, c); err == nil {
		t.Fatal("Run against an unreachable SQL Server returned nil")
	}
	chk, ok := c.c["cdc"]
	if !ok {
		t.Fatal("Run registered no readiness check")
	}
	if err := chk(); err == nil || !strings.Contains(err.Error(), "start failed") {
		t.Fatalf("readiness after a failed connect: %v", err)
	}
}
