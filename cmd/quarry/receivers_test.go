package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/objstore"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startFollow runs quarry with args in the background until the returned
// cancel, and waits until its log says ready (a receiver listening).
func startFollow(t *testing.T, ready string, args ...string) (context.Context, context.CancelFunc, chan int, *syncBuf) {
	t.Helper()
	return startEnv(t, nil, ready, args...)
}

// startEnv is startFollow with environ as the process environment.
func startEnv(t *testing.T, environ map[string]string, ready string, args ...string) (context.Context, context.CancelFunc, chan int, *syncBuf) {
	t.Helper()
	var out, errb syncBuf
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return environ[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runMain(ctx, e, args) }()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(errb.String(), ready) {
		select {
		case code := <-done:
			t.Fatalf("run exited %d:\n%s", code, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("receivers not listening:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ctx, cancel, done, &errb
}

// stopWhenCommitted waits until the lake holds as many lines as want,
// stops the run started by startFollow, and checks want exactly once.
func stopWhenCommitted(t *testing.T, lakeDir string, want []string, cancel context.CancelFunc, done chan int, errb *syncBuf) {
	t.Helper()
	store, err := objstore.Open(context.Background(), lakeDir, objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got, err := laketest.Lines(context.Background(), store)
		if err == nil && len(got) >= len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lake holds %d lines of %d (err %v):\n%s", len(got), len(want), err, errb.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d:\n%s", code, errb.String())
	}
	laketest.ExactlyOnce(t, store, want)
}

// `quarry run --follow --listen-syslog --listen-http`: lines sent by
// logger over TCP and posted to /jsonline and /_bulk reach the lake
// exactly once, each in its tenant (--tenant for syslog, the path or query
// for HTTP), with the syslog app searchable as an attribute.
func TestRunFollowReceivers(t *testing.T) {
	data := t.TempDir()
	sysAddr, httpAddr := freeAddr(t), freeAddr(t)
	_, cancel, done, errb := startFollow(t, "http ingest on", "run", "--follow", "--data", data, "--tenant", "sys", "--encoders", "1",
		"--listen-syslog", sysAddr, "--listen-http", httpAddr)
	defer cancel()

	var want []string
	// HTTP: JSON lines and _bulk, acknowledged only once durable.
	var jl, bulk strings.Builder
	for i := range 300 {
		l := fmt.Sprintf("json line %d", i)
		fmt.Fprintf(&jl, `{"message":%q,"svc":"api"}`+"\n", l)
		b := fmt.Sprintf("bulk line %d", i)
		fmt.Fprintf(&bulk, "{\"index\":{}}\n{\"message\":%q}\n", b)
		want = append(want, l, b)
	}
	for _, p := range []struct{ url, body string }{
		{"http://" + httpAddr + "/jsonline?tenant=web", jl.String()},
		{"http://" + httpAddr + "/web/_bulk", bulk.String()},
	} {
		resp, err := http.Post(p.url, "application/x-ndjson", strings.NewReader(p.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", p.url, resp.StatusCode)
		}
	}
	// Syslog over TCP, from logger when it is installed (with CI=true it
	// must be).
	logger, lerr := exec.LookPath("logger")
	if lerr != nil && os.Getenv("CI") == "true" {
		t.Fatalf("logger (bsdutils) is required with CI=true: %v", lerr)
	}
	if lerr != nil {
		t.Logf("logger not installed (apt-get install bsdutils): syslog part skipped")
	}
	if lerr == nil {
		var b strings.Builder
		for i := range 300 {
			l := fmt.Sprintf("syslog line %d", i)
			b.WriteString(l + "\n")
			want = append(want, l)
		}
		_, port, _ := net.SplitHostPort(sysAddr)
		cmd := exec.Command(logger, "--tcp", "-n", "127.0.0.1", "-P", port, "-t", "quarrytest")
		cmd.Stdin = strings.NewReader(b.String())
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("logger: %v\n%s", err, o)
		}
	}

	stopWhenCommitted(t, filepath.Join(data, "lake"), want, cancel, done, errb)
	if raw, _ := runCLI(t, "", "query", "--lake", filepath.Join(data, "lake"), "--tenant", "web", "--format", "raw"); strings.Count(raw, "\n") != 600 {
		t.Fatalf("tenant web holds %d lines, want 600", strings.Count(raw, "\n"))
	}
	// Attributes land in the records' attrs and are searchable.
	jl2, _ := runCLI(t, "", "query", "--lake", filepath.Join(data, "lake"), "--tenant", "web", "--format", "jsonl")
	if n := strings.Count(jl2, `"svc":"api"`); n != 300 {
		t.Fatalf("%d records carry attrs svc=api, want 300", n)
	}
	if raw, _ := runCLI(t, "", "query", "--lake", filepath.Join(data, "lake"), "--tenant", "web", "--format", "raw", "attrs.svc:api"); strings.Count(raw, "\n") != 300 || strings.Contains(raw, "bulk line") {
		t.Fatalf("attrs.svc:api finds %d lines, want the 300 JSON lines", strings.Count(raw, "\n"))
	}
	if lerr == nil {
		sys, _ := runCLI(t, "", "query", "--lake", filepath.Join(data, "lake"), "--tenant", "sys", "--format", "jsonl")
		if n := strings.Count(sys, `"app":"quarrytest"`); n != 300 {
			t.Fatalf("%d syslog records carry attrs app=quarrytest, want 300", n)
		}
		if raw, _ := runCLI(t, "", "query", "--lake", filepath.Join(data, "lake"), "--tenant", "sys", "--format", "raw", "attrs.app:quarrytest"); strings.Count(raw, "\n") != 300 {
			t.Fatalf("attrs.app:quarrytest finds %d lines, want 300", strings.Count(raw, "\n"))
		}
	}
}

// Receiver flags are checked before anything starts: they need --follow
// in `quarry run`, TLS needs a certificate, and a bad token list is an
// error naming the variable.
func TestReceiverFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		msg  string
	}{
		{[]string{"run", "--data", t.TempDir(), "--listen-http", "127.0.0.1:0"}, nil, "need --follow"},
		{[]string{"run", "--follow", "--data", t.TempDir(), "--listen-syslog-tls", "127.0.0.1:0"}, nil, "listen_syslog_tls: needs tls_cert and tls_key"},
		{[]string{"run", "--follow", "--data", t.TempDir(), "--listen-http", "nohostport"}, nil, "listen_http"},
		{[]string{"run", "--follow", "--data", t.TempDir(), "--listen-http", "127.0.0.1:0"}, map[string]string{"QUARRY_INGEST_TOKENS": "justatoken"}, "QUARRY_INGEST_TOKENS"},
		{[]string{"run", "--follow", "--data", t.TempDir(), "--listen-http", "127.0.0.1:0"}, map[string]string{"QUARRY_INGEST_CLIENT_TENANTS": "cn=no.dots"}, "QUARRY_INGEST_CLIENT_TENANTS"},
	} {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return tt.env[k] }}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		code := runMain(ctx, e, tt.args)
		cancel()
		if code == 0 || !strings.Contains(errb.String(), tt.msg) {
			t.Errorf("quarry %v: exit %d, stderr %q; want an error mentioning %q", tt.args, code, errb.String(), tt.msg)
		}
	}
}
