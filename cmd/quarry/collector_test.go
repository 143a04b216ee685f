package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/syncbuf"
)

// otelcolBinary is $QUARRY_OTELCOL_BIN or <repo>/bin/tools/otelcol, built
// by scripts/build-otelcol.sh (make tools). Without it the test is
// skipped, except under CI=true, where it fails.
func otelcolBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("QUARRY_OTELCOL_BIN")
	if p == "" {
		dir, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
			if filepath.Dir(dir) == dir {
				t.Fatal("no go.mod above the working directory")
			}
			dir = filepath.Dir(dir)
		}
		p = filepath.Join(dir, "bin", "tools", "otelcol")
	}
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("no OpenTelemetry Collector at %s (run scripts/build-otelcol.sh or make tools, or set QUARRY_OTELCOL_BIN): %v", p, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: not skipping)")
		}
		t.Skip(msg)
	}
	return p
}

// A real OpenTelemetry Collector (filelog receiver; otlphttp and otlp
// gRPC exporters, built from the collector's modules) tails two files and
// exports them to `quarry run --follow --listen-otlp --listen-otlp-grpc`:
// every line is in the lake exactly once, in the tenant its exporter's
// header names, with the collector's file attribute searchable.
func TestRunFollowCollector(t *testing.T) {
	bin := otelcolBinary(t)
	data, dir := t.TempDir(), t.TempDir()
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	_, cancel, done, errb := startFollow(t, "otlp logs over grpc on", "run", "--follow", "--data", data, "--tenant", "def", "--encoders", "1",
		"--listen-otlp", httpAddr, "--listen-otlp-grpc", grpcAddr)
	defer cancel()

	const n = 2000
	var want []string
	files := map[string]string{}
	for _, via := range []string{"http", "grpc"} {
		var b strings.Builder
		for i := range n {
			l := fmt.Sprintf("collector %s user %d logged in from 10.0.%d.%d", via, i, i/250, i%250)
			b.WriteString(l + "\n")
			want = append(want, l)
		}
		files[via] = filepath.Join(dir, via+".log")
		if err := os.WriteFile(files[via], []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`receivers:
  filelog/http:
    include: [%q]
    start_at: beginning
  filelog/grpc:
    include: [%q]
    start_at: beginning
exporters:
  otlphttp:
    endpoint: http://%s
    compression: gzip
    headers:
      X-Quarry-Tenant: colhttp
  otlp:
    endpoint: %s
    tls:
      insecure: true
    headers:
      x-quarry-tenant: colgrpc
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    logs/http:
      receivers: [filelog/http]
      exporters: [otlphttp]
    logs/grpc:
      receivers: [filelog/grpc]
      exporters: [otlp]
`, files["http"], files["grpc"], httpAddr, grpcAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	var colOut syncbuf.Buffer
	col := exec.Command(bin, "--config", conf)
	col.Stdout, col.Stderr = &colOut, &colOut
	if err := col.Start(); err != nil {
		t.Fatal(err)
	}
	colDone := make(chan error, 1)
	go func() { colDone <- col.Wait() }()
	defer func() {
		col.Process.Signal(syscall.SIGTERM)
		select {
		case <-colDone:
		case <-time.After(30 * time.Second):
			col.Process.Kill()
			<-colDone
		}
		if t.Failed() {
			t.Logf("collector output:\n%s", colOut.String())
		}
	}()
	stopWhenCommitted(t, filepath.Join(data, "lake"), want, cancel, done, errb)
	lake := filepath.Join(data, "lake")
	for _, via := range []string{"http", "grpc"} {
		raw, _ := runCLI(t, "", "query", "--lake", lake, "--tenant", "col"+via, "--format", "raw")
		if c := strings.Count(raw, "\n"); c != n || strings.Count(raw, "collector "+via+" ") != n {
			t.Fatalf("tenant col%s holds %d lines, want its %d", via, c, n)
		}
		// filelog's attribute log.file.name is in attrs and searchable.
		found, _ := runCLI(t, "", "query", "--lake", lake, "--tenant", "col"+via, "--format", "raw", "attrs.log.file.name:"+via+".log")
		if c := strings.Count(found, "\n"); c != n {
			t.Fatalf("attrs.log.file.name:%s.log finds %d lines in col%s, want %d", via, c, via, n)
		}
	}
}
