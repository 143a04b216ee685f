package otlp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/quarrylake/quarry/internal/shippertest"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/internal/recvtest"
	"github.com/quarrylake/quarry/producer/otlp"
	"github.com/quarrylake/quarry/streams"
)

// The OpenTelemetry Go SDK's OTLP log exporters, over HTTP (protobuf,
// gzip) and gRPC (gzip), send to the receivers: once the logger provider
// has shut down (every export acknowledged), every record is in the WAL
// exactly once for the header's tenant, with its time, severity, trace
// and span ids, resource, scope and record attributes.
func TestSDKExporters(t *testing.T) {
	hub, js := recvtest.Hub(t, producer.Config{}, nil)
	s := start(t, hub, otlp.Config{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"})
	httpAddr, grpcAddr := s.Addrs()
	const n = 3000
	base := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sid := trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	for _, tt := range []struct {
		name string
		exp  func(ctx context.Context) (sdklog.Exporter, error)
	}{
		{"http", func(ctx context.Context) (sdklog.Exporter, error) {
			return otlploghttp.New(ctx, otlploghttp.WithEndpoint(httpAddr.String()), otlploghttp.WithInsecure(),
				otlploghttp.WithCompression(otlploghttp.GzipCompression),
				otlploghttp.WithHeaders(map[string]string{otlp.TenantHeader: "http"}))
		}},
		{"grpc", func(ctx context.Context) (sdklog.Exporter, error) {
			return otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(grpcAddr.String()), otlploggrpc.WithInsecure(),
				otlploggrpc.WithCompressor("gzip"), otlploggrpc.WithHeaders(map[string]string{"x-quarry-tenant": "grpc"}))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			exp, err := tt.exp(ctx)
			if err != nil {
				t.Fatal(err)
			}
			lp := sdklog.NewLoggerProvider(
				sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"), attribute.String("host.name", "web1"))),
				sdklog.WithProcessor(sdklog.NewBatchProcessor(exp, sdklog.WithMaxQueueSize(2*n), sdklog.WithExportMaxBatchSize(400))),
			)
			lg := lp.Logger("quarry/test", log.WithInstrumentationVersion("1.2.3"))
			sctx := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
			want := make([]string, n)
			for i := range n {
				want[i] = fmt.Sprintf("%s record %05d", tt.name, i)
				var r log.Record
				r.SetTimestamp(base.Add(time.Duration(i) * time.Millisecond))
				r.SetBody(attribute.StringValue(want[i]))
				r.SetSeverity(log.SeverityWarn)
				r.SetSeverityText("WARN")
				r.AddAttributes(attribute.Int("i", i), attribute.Map("http", attribute.String("method", "GET"), attribute.Int("status", 200)))
				lg.Emit(sctx, r)
			}
			if err := lp.Shutdown(ctx); err != nil {
				t.Fatalf("logger provider shutdown (export): %v", err)
			}
			// Shut down means acknowledged, and acknowledged means durable:
			// the records are in the WAL now.
			recs := recvtest.Records(t, js, tt.name)
			got := make([]string, len(recs))
			for i, r := range recs {
				got[i] = r.Text
				var k int
				fmt.Sscanf(r.Text[len(tt.name)+1:], "record %d", &k)
				wantAttrs := map[string]string{
					"i": fmt.Sprint(k), "http.method": "GET", "http.status": "200",
					"severity_text": "WARN", "severity_number": "13", "flags": "1",
					"trace_id": tid.String(), "span_id": sid.String(),
					"resource.service.name": "checkout", "resource.host.name": "web1",
					"scope.name": "quarry/test", "scope.version": "1.2.3",
				}
				for key, v := range wantAttrs {
					if recvtest.Attr(r, key) != v {
						t.Fatalf("record %q: attribute %s = %q, want %q (attrs %v)", r.Text, key, recvtest.Attr(r, key), v, r.Attrs)
					}
				}
				if r.TSSource != streams.TSEvent || r.TS != base.Add(time.Duration(k)*time.Millisecond).UnixNano() {
					t.Fatalf("record %q: time %d (%v)", r.Text, r.TS, r.TSSource)
				}
			}
			shippertest.ExactlyOnce(t, got, want)
		})
	}
	if dl := recvtest.DeadLetters(t, js); len(dl) != 0 {
		t.Fatalf("dead letters %+v", dl)
	}
}
