package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

// The attribute keys of a record's own fields. Resource attributes are
// prefixed "resource.", scope fields "scope."; the record's attributes
// keep their keys. A key seen before in the same record (a record
// attribute named like a field, or a flattened map colliding with a
// dotted key) gets "#2", "#3", …: nothing is dropped.
const (
	KeySeverityText   = "severity_text"
	KeySeverityNumber = "severity_number"
	KeyTraceID        = "trace_id"
	KeySpanID         = "span_id"
	KeyFlags          = "flags"
	KeyEventName      = "event_name"
	KeyScopeName      = "scope.name"
	KeyScopeVersion   = "scope.version"
	PrefixResource    = "resource."
	PrefixScope       = "scope."
)

// Entries turns every LogRecord of req into a line, in order (see the
// package doc). It does not apply limits (ingest.Hub.Check does).
func Entries(req *collogspb.ExportLogsServiceRequest) []producer.Entry {
	return entries(req, nil)
}

// entries is Entries with check (nil: none) applied to each entry: one it
// makes Bad is dead-lettered as its record in OTLP JSON (deadLetter).
func entries(req *collogspb.ExportLogsServiceRequest, check func(*producer.Entry)) []producer.Entry {
	n := 0
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			n += len(sl.GetLogRecords())
		}
	}
	out := make([]producer.Entry, 0, n)
	var slab []streams.Attr // the records' attributes, cut from one slab
	for _, rl := range req.GetResourceLogs() {
		res := flatten(nil, PrefixResource, rl.GetResource().GetAttributes())
		for _, sl := range rl.GetScopeLogs() {
			var scope []streams.Attr
			if s := sl.GetScope(); s != nil {
				if s.GetName() != "" {
					scope = append(scope, streams.Attr{Key: KeyScopeName, Value: s.GetName()})
				}
				if s.GetVersion() != "" {
					scope = append(scope, streams.Attr{Key: KeyScopeVersion, Value: s.GetVersion()})
				}
				scope = flatten(scope, PrefixScope, s.GetAttributes())
			}
			for _, lr := range sl.GetLogRecords() {
				e := entry(lr, res, scope, &slab)
				if check != nil {
					if check(&e); e.Bad != "" {
						e.Text, e.Attrs, e.TS = deadLetter(rl.GetResource(), rl.GetSchemaUrl(), sl.GetScope(), sl.GetSchemaUrl(), lr), nil, time.Time{}
					}
				}
				out = append(out, e)
			}
		}
	}
	return out
}

// Entry turns one record into a line; res and scope are the attributes
// of its resource and scope, already prefixed.
func Entry(lr *logspb.LogRecord, res, scope []streams.Attr) producer.Entry {
	return entry(lr, res, scope, nil)
}

// slabAttrs is how many attributes a request's records allocate at once.
const slabAttrs = 1024

// entry is Entry with the attributes cut from *slab when slab is not nil
// (one allocation for many records, not one each), their capacity capped
// so that no entry's attributes run into another's.
func entry(lr *logspb.LogRecord, res, scope []streams.Attr, slab *[]streams.Attr) producer.Entry {
	e := producer.Entry{Text: bodyText(lr.GetBody())}
	if ns := lr.GetTimeUnixNano(); ns != 0 && ns <= math.MaxInt64 {
		e.TS = time.Unix(0, int64(ns)).UTC()
	} else if ns := lr.GetObservedTimeUnixNano(); ns != 0 && ns <= math.MaxInt64 {
		e.TS = time.Unix(0, int64(ns)).UTC()
	}
	var attrs []streams.Attr
	first := 0
	if slab != nil {
		if n := 6 + len(res) + len(scope) + len(lr.GetAttributes()); cap(*slab)-len(*slab) < n {
			*slab = make([]streams.Attr, 0, max(n, slabAttrs))
		}
		attrs, first = *slab, len(*slab)
	}
	if s := lr.GetSeverityText(); s != "" {
		attrs = append(attrs, streams.Attr{Key: KeySeverityText, Value: s})
	}
	if s := lr.GetSeverityNumber(); s != 0 {
		attrs = append(attrs, streams.Attr{Key: KeySeverityNumber, Value: strconv.Itoa(int(s))})
	}
	if id := lr.GetTraceId(); len(id) > 0 {
		attrs = append(attrs, streams.Attr{Key: KeyTraceID, Value: hex.EncodeToString(id)})
	}
	if id := lr.GetSpanId(); len(id) > 0 {
		attrs = append(attrs, streams.Attr{Key: KeySpanID, Value: hex.EncodeToString(id)})
	}
	if f := lr.GetFlags(); f != 0 {
		attrs = append(attrs, streams.Attr{Key: KeyFlags, Value: strconv.FormatUint(uint64(f), 10)})
	}
	if s := lr.GetEventName(); s != "" {
		attrs = append(attrs, streams.Attr{Key: KeyEventName, Value: s})
	}
	attrs = append(attrs, res...)
	attrs = append(attrs, scope...)
	attrs = flatten(attrs, "", lr.GetAttributes())
	if slab != nil {
		*slab = attrs
		attrs = attrs[first:len(attrs):len(attrs)]
		if len(attrs) == 0 {
			attrs = nil // as Entry makes it
		}
	}
	e.Attrs = unique(attrs)
	return e
}

// bodyText is a body as a line: a string as is (a trailing newline
// dropped), nothing as "", any other value as its JSON.
func bodyText(v *commonpb.AnyValue) string {
	if v == nil || v.GetValue() == nil {
		return ""
	}
	if s, ok := v.GetValue().(*commonpb.AnyValue_StringValue); ok {
		t := strings.TrimSuffix(s.StringValue, "\n")
		return strings.TrimSuffix(t, "\r")
	}
	b, _ := json.Marshal(plain(v))
	return string(b)
}

// plain is v as a value encoding/json renders: maps as objects, bytes as
// base64, a non-finite double as its name.
func plain(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		if math.IsNaN(x.DoubleValue) || math.IsInf(x.DoubleValue, 0) {
			return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
		}
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return base64.StdEncoding.EncodeToString(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, plain(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		out := make(map[string]any, len(x.KvlistValue.GetValues()))
		for _, kv := range x.KvlistValue.GetValues() {
			out[kv.GetKey()] = plain(kv.GetValue())
		}
		return out
	case *commonpb.AnyValue_StringValueStrindex:
		// Only meaningful with a profiles dictionary; logs have none.
		return x.StringValueStrindex
	}
	return nil
}

// flatten appends kvs to out, keys prefixed: scalars as their text, maps
// flattened to "<key>.<sub>", arrays as their JSON; empty values skipped.
func flatten(out []streams.Attr, prefix string, kvs []*commonpb.KeyValue) []streams.Attr {
	for _, kv := range kvs {
		v := kv.GetValue()
		key := prefix + kv.GetKey()
		switch x := v.GetValue().(type) {
		case nil:
		case *commonpb.AnyValue_StringValue:
			out = append(out, streams.Attr{Key: key, Value: x.StringValue})
		case *commonpb.AnyValue_KvlistValue:
			out = flatten(out, key+".", x.KvlistValue.GetValues())
		case *commonpb.AnyValue_BoolValue:
			out = append(out, streams.Attr{Key: key, Value: strconv.FormatBool(x.BoolValue)})
		case *commonpb.AnyValue_IntValue:
			out = append(out, streams.Attr{Key: key, Value: strconv.FormatInt(x.IntValue, 10)})
		case *commonpb.AnyValue_DoubleValue:
			out = append(out, streams.Attr{Key: key, Value: strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)})
		default:
			b, _ := json.Marshal(plain(v))
			out = append(out, streams.Attr{Key: key, Value: string(b)})
		}
	}
	return out
}

// unique renames every repeated key k to "k#2", "k#3", … (the first
// free), so that no attribute hides another in the lake's attrs map.
func unique(attrs []streams.Attr) []streams.Attr {
	if len(attrs) < 2 {
		return attrs
	}
	if len(attrs) <= 32 {
		// Most records repeat no key: find that out without a map.
		repeated := false
		for i := 1; i < len(attrs) && !repeated; i++ {
			for j := range i {
				if attrs[i].Key == attrs[j].Key {
					repeated = true
					break
				}
			}
		}
		if !repeated {
			return attrs
		}
	}
	return uniqueSeen(attrs)
}

// uniqueSeen is unique through a set of the keys seen.
func uniqueSeen(attrs []streams.Attr) []streams.Attr {
	seen := make(map[string]bool, len(attrs))
	for i := range attrs {
		k := attrs[i].Key
		if seen[k] {
			for n := 2; ; n++ {
				c := k + "#" + strconv.Itoa(n)
				if !seen[c] {
					k = c
					break
				}
			}
			attrs[i].Key = k
		}
		seen[k] = true
	}
	return attrs
}

// deadLetter is the text a rejected record is dead-lettered with: a
// one-record request in OTLP JSON, which /v1/logs takes back.
func deadLetter(res *resourcepb.Resource, resURL string, scope *commonpb.InstrumentationScope, scopeURL string, lr *logspb.LogRecord) string {
	req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: res, SchemaUrl: resURL,
		ScopeLogs: []*logspb.ScopeLogs{{Scope: scope, SchemaUrl: scopeURL, LogRecords: []*logspb.LogRecord{lr}}},
	}}}
	b, err := protojson.MarshalOptions{}.Marshal(req)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
