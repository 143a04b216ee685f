package otlp

import (
	"reflect"
	"strings"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/quarrylake/quarry/producer"
)

func wireRequests() []*collogspb.ExportLogsServiceRequest {
	kv := func(k string, v *commonpb.AnyValue) *commonpb.KeyValue { return &commonpb.KeyValue{Key: k, Value: v} }
	b := func(v bool) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}
	}
	i := func(v int64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}
	}
	f := func(v float64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}
	}
	kvl := func(kvs ...*commonpb.KeyValue) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs}}}
	}
	full := &logspb.LogRecord{TimeUnixNano: 1764410400000000001, ObservedTimeUnixNano: 2, SeverityNumber: 9, SeverityText: "INFO",
		Body: strValue("GET / 200\r\n"), Flags: 1, TraceId: []byte{1, 2, 3}, SpanId: []byte{4}, EventName: "ev", DroppedAttributesCount: 3,
		Attributes: []*commonpb.KeyValue{kv("k", strValue("v")), kv("b", b(true)), kv("i", i(-7)), kv("f", f(0.5)), kv("k", strValue("again")), kv("nil", nil), kv("empty", &commonpb.AnyValue{})}}
	return []*collogspb.ExportLogsServiceRequest{
		{},
		{ResourceLogs: []*logspb.ResourceLogs{{}}},
		{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{Body: strValue("a")}, {}, {Body: &commonpb.AnyValue{}}}}}}}},
		{ResourceLogs: []*logspb.ResourceLogs{
			{Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", strValue("api")), kv("n", i(3))}, DroppedAttributesCount: 1}, SchemaUrl: "u",
				ScopeLogs: []*logspb.ScopeLogs{
					{Scope: &commonpb.InstrumentationScope{Name: "lib", Version: "1", Attributes: []*commonpb.KeyValue{kv("s", strValue("x"))}, DroppedAttributesCount: 2}, SchemaUrl: "v",
						LogRecords: []*logspb.LogRecord{full, {ObservedTimeUnixNano: 5, Body: strValue("é ✓")}, {TimeUnixNano: 1 << 63, Body: strValue("far")}}},
					{Scope: &commonpb.InstrumentationScope{}, LogRecords: []*logspb.LogRecord{{Body: strValue("bare")}}},
				}},
			{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{Body: strValue("second resource"), SeverityNumber: -1}}}}},
		}},
		// The full path's: a map, an array, bytes and a non-string body.
		{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{Body: strValue("m"), Attributes: []*commonpb.KeyValue{kv("m", kvl(kv("a", strValue("b"))))}}}}}}}},
		{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{Body: i(5)}}}}}}},
		{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte("x")}}}}}}}}},
	}
}

// checkWire: where wireEntries answers, proto.Unmarshal takes the request
// and entries gives the same entries. It reports whether wireEntries
// answered.
func checkWire(t *testing.T, b []byte, check func(*producer.Entry)) bool {
	t.Helper()
	got, ok := wireEntries(b, check)
	if !ok {
		return false
	}
	req := &collogspb.ExportLogsServiceRequest{}
	if err := proto.Unmarshal(b, req); err != nil {
		t.Fatalf("%x: wireEntries took a request proto.Unmarshal refuses: %v", b, err)
	}
	want := entries(req, check)
	if len(got) == 0 && len(want) == 0 {
		return true
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%x:\nwire  %+v\nproto %+v", b, got, want)
	}
	return true
}

// badCheck makes a line holding "bad" Bad, as a limit would.
func badCheck(e *producer.Entry) {
	if strings.Contains(e.Text, "bad") {
		e.Bad = "bad"
	}
}

// wireEntries reads what the full decode reads wherever it answers, and
// answers the requests SDKs send.
func TestWireEntriesAgrees(t *testing.T) {
	answered := 0
	for _, req := range wireRequests() {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if checkWire(t, b, nil) {
			answered++
		}
		checkWire(t, b, badCheck)
	}
	if answered != 4 {
		t.Fatalf("wireEntries answered %d requests, want 4", answered)
	}
	b, _ := proto.Marshal(&collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{Body: strValue("a bad line")}}}}}}})
	if _, ok := wireEntries(b, badCheck); ok {
		t.Fatal("wireEntries answered a request with a line the check makes bad")
	}
}

func FuzzWireEntriesAgrees(f *testing.F) {
	for _, req := range wireRequests() {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkWire(t, b, nil)
		checkWire(t, b, badCheck)
	})
}

// A Resource or a Scope given twice is merged by proto.Unmarshal (their
// attributes concatenated): the wire path must not take only one of them.
func TestWireEntriesRepeatedSingular(t *testing.T) {
	kv := func(k string) []*commonpb.KeyValue { return []*commonpb.KeyValue{{Key: k, Value: strValue(k)}} }
	rec := []*logspb.LogRecord{{Body: strValue("line")}}
	wrap := func(num protowire.Number, msg []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), msg)
	}
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Concatenated messages of one type are one merged message.
	resources := append(
		marshal(&logspb.ResourceLogs{Resource: &resourcepb.Resource{Attributes: kv("r1")}, ScopeLogs: []*logspb.ScopeLogs{{LogRecords: rec}}}),
		marshal(&logspb.ResourceLogs{Resource: &resourcepb.Resource{Attributes: kv("r2")}})...)
	scopes := append(
		marshal(&logspb.ScopeLogs{Scope: &commonpb.InstrumentationScope{Attributes: kv("s1")}, LogRecords: rec}),
		marshal(&logspb.ScopeLogs{Scope: &commonpb.InstrumentationScope{Attributes: kv("s2")}})...)
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"resource", wrap(1, resources)},
		{"scope", wrap(1, wrap(2, scopes))},
	} {
		name, b := tc.name, tc.b
		req := &collogspb.ExportLogsServiceRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n := len(entries(req, nil)[0].Attrs); n < 2 {
			t.Fatalf("%s: proto.Unmarshal kept %d attributes, the test wants a merge", name, n)
		}
		checkWire(t, b, nil)
	}
}
