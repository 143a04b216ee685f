package otlp

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/quarrylake/quarry/streams"
)

func strValue(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

// unique renames as uniqueSeen does, keys repeated or not, short lists
// and long.
func TestUniqueAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", "a#2", "a#3", "b#2", "c", "severity_text", "resource.host", "d", "e", "f", "g"}
	for range 20000 {
		n := r.IntN(40)
		var in []streams.Attr
		for i := range n {
			in = append(in, streams.Attr{Key: keys[r.IntN(len(keys))] + fmt.Sprint(r.IntN(1+n/4)), Value: fmt.Sprint(i)})
		}
		got := unique(slices.Clone(in))
		want := in
		if len(in) >= 2 {
			want = uniqueSeen(slices.Clone(in))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%v:\nunique     %v\nuniqueSeen %v", in, got, want)
		}
	}
}

// A request's entries, whose attributes are cut from one slab, are each
// what Entry makes of its record alone, across slabs and when flattened
// maps outgrow a record's estimate.
func TestEntriesSlab(t *testing.T) {
	var recs []*logspb.LogRecord
	for i := range 700 {
		lr := &logspb.LogRecord{Body: strValue(fmt.Sprint("line ", i))}
		switch i % 4 {
		case 1:
			lr.SeverityText = "INFO"
			lr.Attributes = []*commonpb.KeyValue{{Key: "k", Value: strValue("v")}, {Key: "k", Value: strValue("again")}}
		case 2:
			var sub []*commonpb.KeyValue
			for j := range 40 { // flattens to 40 attributes from one
				sub = append(sub, &commonpb.KeyValue{Key: fmt.Sprint("s", j), Value: strValue("x")})
			}
			lr.Attributes = []*commonpb.KeyValue{{Key: "m", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: sub}}}}}
		case 3:
			lr.SeverityNumber = 9
		}
		recs = append(recs, lr)
	}
	res := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: strValue("api")}}}
	req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{
		{Resource: res, ScopeLogs: []*logspb.ScopeLogs{{LogRecords: recs[:350]}}},
		{ScopeLogs: []*logspb.ScopeLogs{{Scope: &commonpb.InstrumentationScope{Name: "lib"}, LogRecords: recs[350:]}}},
	}}
	got := Entries(req)
	for i, lr := range recs {
		var want = Entry(lr, flatten(nil, PrefixResource, res.GetAttributes()), nil)
		if i >= 350 {
			want = Entry(lr, nil, []streams.Attr{{Key: KeyScopeName, Value: "lib"}})
		}
		if !reflect.DeepEqual(got[i], want) || cap(got[i].Attrs) != len(got[i].Attrs) {
			t.Fatalf("record %d: %+v (cap %d)\nwant %+v", i, got[i], cap(got[i].Attrs), want)
		}
	}
}
