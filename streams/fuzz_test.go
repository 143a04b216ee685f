package streams_test

import (
	"reflect"
	"testing"

	"github.com/quarrylake/quarry/streams"
)

func FuzzDecodeFrame(f *testing.F) {
	f.Add(streams.AppendFrame(nil, &streams.Frame{Source: "s", Tenant: "t", NextOffset: 4, Records: []streams.Record{{TS: 1, Text: "abc", Attrs: []streams.Attr{{"k", "v"}}}}}))
	f.Add([]byte("QF\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := streams.DecodeFrame(b)
		if err != nil {
			return
		}
		again, err := streams.DecodeFrame(streams.AppendFrame(nil, fr))
		if err != nil || !reflect.DeepEqual(fr, again) {
			t.Fatalf("re-encode of a decoded frame differs: %v", err)
		}
	})
}

func FuzzDecodeMinedBatch(f *testing.F) {
	f.Add(streams.AppendMinedBatch(nil, &streams.MinedBatch{WALSeq: 2, PrevSeq: 1, Tenant: "t", Records: []streams.MinedRecord{{TemplateID: 1, TemplateVersion: 1, Params: []string{"x"}}},
		Templates: []streams.TemplateDef{{Kind: streams.TemplateCreated, ID: 1, Tenant: "t", Version: 1, Text: "a <*>"}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := streams.DecodeMinedBatch(b)
		if err != nil {
			return
		}
		again, err := streams.DecodeMinedBatch(streams.AppendMinedBatch(nil, m))
		if err != nil || !reflect.DeepEqual(m, again) {
			t.Fatalf("re-encode of a decoded batch differs: %v", err)
		}
	})
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"id":"e.1","encoder":"e","batches":[{"seq":2,"prev":1}],"files":[{"table":"records","path":"p","size":3}]}`))
	f.Add([]byte(`{"report_id":"x","accepted":true}`))
	f.Add([]byte(`{"kind":"created","template_id":1,"tenant":"t","version":1,"template":"a"}`))
	f.Add([]byte(`{"kind":"merged","template_id":3,"tenant":"t","version":1,"template":"a <*>","previous":"a b","into":2}`))
	f.Add([]byte(`{"source":"s","rows":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		// None may panic; a success must satisfy the decoder's invariants.
		if r, err := streams.DecodeReport(b); err == nil && (r.ID == "" || len(r.Batches) == 0) {
			t.Fatal("report without id or batches accepted")
		}
		if v, err := streams.DecodeVerdict(b); err == nil && v.ReportID == "" {
			t.Fatal("verdict without report id accepted")
		}
		if e, err := streams.DecodeTemplateEvent(b); err == nil {
			switch {
			case e.Kind != "created" && e.Kind != "changed" && e.Kind != "merged":
				t.Fatal("bad kind accepted")
			case e.Kind == "merged" && (e.Into == 0 || e.Into == e.ID):
				t.Fatal("merge without a distinct survivor accepted")
			}
		}
		if p, err := streams.DecodeProgress(b); err == nil && p.Source == "" {
			t.Fatal("progress without source accepted")
		}
	})
}
