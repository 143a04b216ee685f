package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
)

// `quarry run --follow --listen-otlp --listen-otlp-grpc`: records sent by
// the OpenTelemetry Go SDK's OTLP log exporters over HTTP and gRPC reach
// the lake exactly once, for the header's tenant, with their resource and
// record attributes in attrs.
func TestRunFollowOTLP(t *testing.T) {
	data := t.TempDir()
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	ctx, cancel, done, errb := startFollow(t, "otlp logs over grpc on", "run", "--follow", "--data", data, "--tenant", "def", "--encoders", "1",
		"--listen-otlp", httpAddr, "--listen-otlp-grpc", grpcAddr)
	defer cancel()

	var want []string
	for _, c := range []struct {
		name string
		exp  func() (sdklog.Exporter, error)
	}{
		{"http", func() (sdklog.Exporter, error) {
			return otlploghttp.New(ctx, otlploghttp.WithEndpoint(httpAddr), otlploghttp.WithInsecure(),
				otlploghttp.WithHeaders(map[string]string{"X-Quarry-Tenant": "otel"}))
		}},
		{"grpc", func() (sdklog.Exporter, error) {
			return otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(grpcAddr), otlploggrpc.WithInsecure(),
				otlploggrpc.WithHeaders(map[string]string{"x-quarry-tenant": "otel"}))
		}},
	} {
		exp, err := c.exp()
		if err != nil {
			t.Fatal(err)
		}
		lp := sdklog.NewLoggerProvider(
			sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))),
			sdklog.WithProcessor(sdklog.NewBatchProcessor(exp, sdklog.WithMaxQueueSize(1000))))
		lg := lp.Logger("quarry/cmdtest")
		for i := range 300 {
			l := fmt.Sprintf("otlp %s user %d logged in", c.name, i)
			var r log.Record
			r.SetTimestamp(time.Now())
			r.SetBody(attribute.StringValue(l))
			r.AddAttributes(attribute.String("via", c.name))
			lg.Emit(ctx, r)
			want = append(want, l)
		}
		if err := lp.Shutdown(ctx); err != nil {
			t.Fatalf("%s exporter: %v", c.name, err)
		}
	}

	stopWhenCommitted(t, filepath.Join(data, "lake"), want, cancel, done, errb)
	jl, _ := runCLI(t, "", "query", "--lake", filepath.Join(data, "lake"), "--tenant", "otel", "--format", "jsonl")
	if n := strings.Count(jl, `"resource.service.name":"checkout"`); n != 600 {
		t.Fatalf("%d records carry resource.service.name=checkout, want 600", n)
	}
	for _, via := range []string{"http", "grpc"} {
		if n := strings.Count(jl, `"via":"`+via+`"`); n != 300 {
			t.Fatalf("%d records carry via=%s, want 300", n, via)
		}
	}
}

// The OTLP flags are checked before anything starts.
func TestOTLPFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"run", "--data", t.TempDir(), "--listen-otlp", "127.0.0.1:0"}, "need --follow"},
		{[]string{"run", "--follow", "--data", t.TempDir(), "--listen-otlp", "nohostport"}, "listen_otlp"},
		{[]string{"run", "--follow", "--data", t.TempDir(), "--listen-otlp-grpc", "nohostport"}, "listen_otlp_grpc"},
	} {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		code := runMain(ctx, e, tt.args)
		cancel()
		if code == 0 || !strings.Contains(errb.String(), tt.msg) {
			t.Errorf("quarry %v: exit %d, stderr %q; want an error mentioning %q", tt.args, code, errb.String(), tt.msg)
		}
	}
}
