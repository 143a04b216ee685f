package otlp_test

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/otlp"
	"github.com/quarrylake/quarry/streams"
)

func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}
func i64(n int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
}
func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}
func kvlist(kvs ...*commonpb.KeyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs}}}
}
func array(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}

func attrs(kv ...string) []streams.Attr {
	var out []streams.Attr
	for i := 0; i < len(kv); i += 2 {
		out = append(out, streams.Attr{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestEntry(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	tests := []struct {
		name       string
		lr         *logspb.LogRecord
		res, scope []streams.Attr
		want       producer.Entry
	}{
		{name: "string body, time, severity, ids",
			lr: &logspb.LogRecord{TimeUnixNano: uint64(ts.UnixNano()), ObservedTimeUnixNano: 1, Body: str("GET / 200"),
				SeverityText: "INFO", SeverityNumber: logspb.SeverityNumber_SEVERITY_NUMBER_INFO,
				TraceId: []byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10},
				SpanId:  []byte{0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8}, Flags: 1, EventName: "http.request",
				Attributes: []*commonpb.KeyValue{kv("http.status", i64(200))}},
			res: attrs("resource.service.name", "api"), scope: attrs("scope.name", "net/http"),
			want: producer.Entry{Text: "GET / 200", TS: ts, Attrs: attrs(
				"severity_text", "INFO", "severity_number", "9",
				"trace_id", "0102030405060708090a0b0c0d0e0f10", "span_id", "a1a2a3a4a5a6a7a8", "flags", "1",
				"event_name", "http.request", "resource.service.name", "api", "scope.name", "net/http", "http.status", "200")}},
		{name: "observed time when no time",
			lr:   &logspb.LogRecord{ObservedTimeUnixNano: uint64(ts.UnixNano()), Body: str("x\n")},
			want: producer.Entry{Text: "x", TS: ts}},
		{name: "no time, no body",
			lr:   &logspb.LogRecord{Attributes: []*commonpb.KeyValue{kv("k", str("v"))}},
			want: producer.Entry{Text: "", Attrs: attrs("k", "v")}},
		{name: "time beyond int64 is no time",
			lr:   &logspb.LogRecord{TimeUnixNano: math.MaxUint64, Body: str("x")},
			want: producer.Entry{Text: "x"}},
		{name: "map body as JSON",
			lr:   &logspb.LogRecord{Body: kvlist(kv("msg", str("hi")), kv("n", i64(3)), kv("l", array(str("a"), i64(1))))},
			want: producer.Entry{Text: `{"l":["a",1],"msg":"hi","n":3}`}},
		{name: "scalar bodies as JSON",
			lr:   &logspb.LogRecord{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}}},
			want: producer.Entry{Text: `1.5`}},
		{name: "bytes body as base64 JSON string",
			lr:   &logspb.LogRecord{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte("hi")}}},
			want: producer.Entry{Text: `"aGk="`}},
		{name: "non-finite double body",
			lr:   &logspb.LogRecord{Body: array(&commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: math.Inf(1)}})},
			want: producer.Entry{Text: `["+Inf"]`}},
		{name: "attributes flattened: maps dotted, arrays JSON, empty skipped",
			lr: &logspb.LogRecord{Body: str("m"), Attributes: []*commonpb.KeyValue{
				kv("http", kvlist(kv("method", str("GET")), kv("req", kvlist(kv("size", i64(12)))))),
				kv("tags", array(str("a"), str("b"))), kv("ok", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}),
				kv("nil", &commonpb.AnyValue{}), kv("nothing", nil),
				kv("raw", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0xff}}}),
				kv("ratio", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 0.25}})}},
			want: producer.Entry{Text: "m", Attrs: attrs("http.method", "GET", "http.req.size", "12", "tags", `["a","b"]`,
				"ok", "true", "raw", `"/w=="`, "ratio", "0.25")}},
		{name: "colliding keys are renamed, not dropped",
			lr: &logspb.LogRecord{Body: str("m"), SeverityText: "WARN", Attributes: []*commonpb.KeyValue{
				kv("severity_text", str("mine")), kv("a.b", str("1")), kv("a", kvlist(kv("b", str("2")))), kv("severity_text#2", str("x"))}},
			want: producer.Entry{Text: "m", Attrs: attrs("severity_text", "WARN", "severity_text#2", "mine", "a.b", "1", "a.b#2", "2", "severity_text#2#2", "x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := otlp.Entry(tt.lr, tt.res, tt.scope)
			if !got.TS.Equal(tt.want.TS) {
				t.Fatalf("TS %v, want %v", got.TS, tt.want.TS)
			}
			got.TS, tt.want.TS = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// Entries walks resources and scopes in order, prefixing their
// attributes, and keeps one entry per record.
func TestEntries(t *testing.T) {
	req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{
		{Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("api")), kv("host", kvlist(kv("name", str("h1"))))}},
			ScopeLogs: []*logspb.ScopeLogs{
				{Scope: &commonpb.InstrumentationScope{Name: "lib", Version: "1.2", Attributes: []*commonpb.KeyValue{kv("k", str("v"))}},
					LogRecords: []*logspb.LogRecord{{Body: str("a")}, {Body: str("b")}}},
				{LogRecords: []*logspb.LogRecord{{Body: str("c")}}},
			}},
		{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{Body: str("d")}}}}},
		{},
	}}
	got := otlp.Entries(req)
	res := attrs("resource.service.name", "api", "resource.host.name", "h1")
	want := []producer.Entry{
		{Text: "a", Attrs: append(append([]streams.Attr{}, res...), attrs("scope.name", "lib", "scope.version", "1.2", "scope.k", "v")...)},
		{Text: "b", Attrs: append(append([]streams.Attr{}, res...), attrs("scope.name", "lib", "scope.version", "1.2", "scope.k", "v")...)},
		{Text: "c", Attrs: res},
		{Text: "d"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestUnmarshalJSON(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []producer.Entry
		bad  string
	}{
		{name: "spec example shape: hex ids, string ints, numeric enum",
			doc: `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
			"scopeLogs":[{"scope":{"name":"my.lib","version":"1.0.0"},"logRecords":[{"timeUnixNano":"1544712660300000000",
			"observedTimeUnixNano":"1544712660300000001","severityNumber":10,"severityText":"Information",
			"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","body":{"stringValue":"Example log record"},
			"attributes":[{"key":"int.attribute","value":{"intValue":"10"}},{"key":"double.attribute","value":{"doubleValue":637.704}},
			{"key":"array.attribute","value":{"arrayValue":{"values":[{"stringValue":"many"},{"stringValue":"values"}]}}},
			{"key":"map.attribute","value":{"kvlistValue":{"values":[{"key":"some.map.key","value":{"stringValue":"some value"}}]}}}],
			"unknownField":true}]}]}]}`,
			want: []producer.Entry{{Text: "Example log record", TS: time.Unix(0, 1544712660300000000).UTC(), Attrs: attrs(
				"severity_text", "Information", "severity_number", "10", "trace_id", "5b8efff798038103d269b633813fc60c", "span_id", "eee19b7ec3c1b174",
				"resource.service.name", "svc", "scope.name", "my.lib", "scope.version", "1.0.0",
				"int.attribute", "10", "double.attribute", "637.704", "array.attribute", `["many","values"]`, "map.attribute.some.map.key", "some value")}}},
		{name: "proto field names, base64 ids, enum name",
			doc:  `{"resource_logs":[{"scope_logs":[{"log_records":[{"trace_id":"AQIDBAUGBwgJCgsMDQ4PEA==","span_id":"","severity_number":"SEVERITY_NUMBER_WARN","body":{"string_value":"w"}}]}]}]}`,
			want: []producer.Entry{{Text: "w", Attrs: attrs("severity_number", "13", "trace_id", "0102030405060708090a0b0c0d0e0f10")}}},
		{name: "empty request", doc: `{}`, want: []producer.Entry{}},
		{name: "bad hex id", doc: `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"zz8EFFF798038103D269B633813FC60C"}]}]}]}`, bad: "want 32 hex digits"},
		{name: "not JSON", doc: `{"resourceLogs":`, bad: "OTLP JSON"},
		{name: "wrong type", doc: `{"resourceLogs":{"a":1}}`, bad: "OTLP JSON"},
		{name: "two values", doc: `{"spanId":""} {}`, bad: "more than one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := otlp.UnmarshalJSON([]byte(tt.doc))
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("err %v, want one containing %q", err, tt.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := otlp.Entries(req)
			for i := range got {
				if i < len(tt.want) && !got[i].TS.Equal(tt.want[i].TS) {
					t.Fatalf("entry %d: TS %v, want %v", i, got[i].TS, tt.want[i].TS)
				}
				got[i].TS = time.Time{}
			}
			for i := range tt.want {
				tt.want[i].TS = time.Time{}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func FuzzUnmarshalJSON(f *testing.F) {
	for _, s := range []string{
		`{"resourceLogs":[{"resource":{"attributes":[{"key":"a","value":{"kvlistValue":{"values":[{"key":"b","value":{"intValue":"1"}}]}}}]},"scopeLogs":[{"scope":{"name":"s"},"logRecords":[{"timeUnixNano":"1","traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","body":{"arrayValue":{"values":[{"doubleValue":1.5},{"bytesValue":"aGk="}]}},"attributes":[{"key":"a.b","value":{"stringValue":"x"}}]}]}]}]}`,
		`{"resource_logs":[{"scope_logs":[{"log_records":[{"trace_id":"","body":{"string_value":"w"}}]}]}]}`,
		`{}`, `null`, `[]`, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"spanId":"zz"}]}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := otlp.UnmarshalJSON(b)
		if err != nil {
			return
		}
		n := 0
		for _, rl := range req.GetResourceLogs() {
			for _, sl := range rl.GetScopeLogs() {
				n += len(sl.GetLogRecords())
			}
		}
		es := otlp.Entries(req)
		if len(es) != n {
			t.Fatalf("%d entries of %d records", len(es), n)
		}
		for _, e := range es {
			seen := map[string]bool{}
			for _, a := range e.Attrs {
				if seen[a.Key] {
					t.Fatalf("attribute %q twice in %+v", a.Key, e.Attrs)
				}
				seen[a.Key] = true
			}
		}
	})
}
