package otlp

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
)

// BenchmarkExportRequest is the OTLP/HTTP handler's own work on a
// protobuf request of 1,000 of the ingest benchmark's lines: reading the
// body, decoding it and making its entries (as the handler does: from the
// wire, else through proto.Unmarshal), without the handing over.
// bench: the ingest benchmark's records (a body each); sdk: as an SDK
// sends them, with resource attributes, a severity and two attributes.
func BenchmarkExportRequest(b *testing.B) {
	hub, err := ingest.New(producer.Config{Tenant: "acme"}, ingest.Deps{JS: struct{ jetstream.JetStream }{}})
	if err != nil {
		b.Fatal(err)
	}
	lines := producer.NewGenerator(1, []string{"acme"}).Lines("acme", 1000)
	for _, sdk := range []bool{false, true} {
		recs := make([]*logspb.LogRecord, len(lines))
		for i, l := range lines {
			recs[i] = &logspb.LogRecord{Body: strValue(l)}
			if sdk {
				recs[i].SeverityText, recs[i].SeverityNumber, recs[i].TimeUnixNano = "INFO", 9, 1764410400000000000+uint64(i)
				recs[i].Attributes = []*commonpb.KeyValue{{Key: "http.method", Value: strValue("GET")}, {Key: "user.id", Value: strValue("87368")}}
			}
		}
		rl := &logspb.ResourceLogs{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: recs}}}
		if sdk {
			rl.Resource = &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
				{Key: "service.name", Value: strValue("api")}, {Key: "host.name", Value: strValue("web-1")},
				{Key: "telemetry.sdk.language", Value: strValue("go")}, {Key: "telemetry.sdk.version", Value: strValue("1.38.0")}}}
			rl.ScopeLogs[0].Scope = &commonpb.InstrumentationScope{Name: "app"}
		}
		body, err := proto.Marshal(&collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{rl}})
		if err != nil {
			b.Fatal(err)
		}
		name := map[bool]string{false: "bench", true: "sdk"}[sdk]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				buf, err := ingest.ReadBody(bytes.NewReader(body), int64(len(body)), 64<<20)
				if err != nil {
					b.Fatal(err)
				}
				if _, ok := wireEntries(buf, hub.Check); ok {
					continue
				}
				req := &collogspb.ExportLogsServiceRequest{}
				if err := proto.Unmarshal(buf, req); err != nil {
					b.Fatal(err)
				}
				_ = entries(req, hub.Check)
			}
		})
	}
}
