package streams_test

import (
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/quarrylake/quarry/streams"
)

func FuzzDecodeFrame(f *testing.F) {
	f.Add(streams.AppendFrame(nil, &streams.Frame{Source: "s", Tenant: "t", NextOffset: 4, Records: []streams.Record{{TS: 1, Text: "abc", Attrs: []streams.Attr{{"k", "v"}}}}}))
	f.Add(streams.AppendFrame(nil, &streams.Frame{Source: "s", Tenant: "t", NextOffset: 9, Records: []streams.Record{
		{TS: 1, TSSource: streams.TSEvent, Text: "2026-01-02T03:04:05Z a"}, {TS: 1, TSSource: streams.TSPrevious, Text: "\tat x"}, {TS: 2, Text: "b"}}}))
	f.Add(mustHex(goldenFrameV1))
	f.Add([]byte("QF\x01"))
	f.Add([]byte("QF\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := streams.DecodeFrame(b)
		if err != nil {
			return
		}
		again, err := streams.DecodeFrame(streams.AppendFrame(nil, fr))
		if err != nil || !reflect.DeepEqual(fr, again) {
			t.Fatalf("re-encode of a decoded frame differs: %v", err)
		}
		if shared, err := streams.DecodeFrameShared(b); err != nil || !reflect.DeepEqual(fr, shared) {
			t.Fatalf("shared decode differs: %v", err)
		}
	})
}

func FuzzDecodeMinedBatch(f *testing.F) {
	f.Add(streams.AppendMinedBatch(nil, &streams.MinedBatch{WALSeq: 2, PrevSeq: 1, Tenant: "t", Records: []streams.MinedRecord{{TemplateID: 1, TemplateVersion: 1, Params: []string{"x"}}},
		Templates: []streams.TemplateDef{{Kind: streams.TemplateCreated, ID: 1, Tenant: "t", Version: 1, Text: "a <*>"}}}))
	f.Add(streams.AppendMinedBatch(nil, &streams.MinedBatch{WALSeq: 3, PrevSeq: 2, Tenant: "t",
		Records: []streams.MinedRecord{{TS: 5, TSSource: streams.TSEvent, TemplateID: 1, TemplateVersion: 2, Params: []string{"x", "1.2.3.4"}}, {TS: 5, TSSource: streams.TSPrevious, TemplateID: 2, TemplateVersion: 1}},
		Templates: []streams.TemplateDef{
			{Kind: streams.TemplateChanged, ID: 1, Tenant: "t", Version: 2, Text: "a <*> <*>", Previous: "a <*> b", Kinds: []string{"", "ipv4"}},
			{Kind: streams.TemplateMerged, ID: 4, Tenant: "t", Version: 1, Text: "a <*> <*>", Previous: "c", Into: 1}}}))
	f.Add(mustHex(goldenMinedV2)) // mined/2
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := streams.DecodeMinedBatch(b)
		// Into an array that holds another batch's records: none of them
		// may show through.
		into := streams.MinedBatch{Records: staleRecords()}
		if ierr := streams.DecodeMinedBatchSharedInto(&into, b); (ierr == nil) != (err == nil) {
			t.Fatalf("decode into a used batch: %v, decode: %v", ierr, err)
		} else if err == nil && !reflect.DeepEqual(m, &into) {
			t.Fatalf("decode into a used batch differs:\n%+v\n%+v", m, &into)
		} else if err != nil && (!reflect.DeepEqual(into, streams.MinedBatch{Records: into.Records}) || len(into.Records) != 0) {
			t.Fatalf("a failed decode into a batch left %+v", into)
		}
		if err != nil {
			return
		}
		again, err := streams.DecodeMinedBatch(streams.AppendMinedBatch(nil, m))
		if err != nil || !reflect.DeepEqual(m, again) {
			t.Fatalf("re-encode of a decoded batch differs: %v", err)
		}
		if shared, err := streams.DecodeMinedBatchShared(b); err != nil || !reflect.DeepEqual(m, shared) {
			t.Fatalf("shared decode differs: %v", err)
		}
	})
}

// staleRecords are records with every field set, in an array with room.
func staleRecords() []streams.MinedRecord {
	recs := make([]streams.MinedRecord, 8, 64)
	for i := range recs {
		recs[i] = streams.MinedRecord{Index: 9, TS: 9, TSSource: streams.TSEvent, TemplateID: 9, TemplateVersion: 9,
			Params: []string{"stale"}, Attrs: []streams.Attr{{Key: "stale", Value: "stale"}}}
	}
	return recs
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

func FuzzDecodeNotice(f *testing.F) {
	f.Add([]byte(goldenNoticeJSON))
	f.Add([]byte(goldenNotice2JSON))
	f.Add([]byte(`{"table":"records","version":0,"adds":[],"removes":[]}`))
	f.Add([]byte(`{"table":"records","version":3,"adds":[{"path":"/x","rows":-2}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := streams.DecodeNotice(b)
		if err != nil {
			return
		}
		if n.Table == "" || n.Version < 0 {
			t.Fatalf("notice %q version %d accepted", n.Table, n.Version)
		}
		for _, f := range append(n.Adds, n.Removes...) {
			if f.Path == "" || f.Rows < -1 || (f.MinDate == "") != (f.MaxDate == "") || f.MinDate > f.MaxDate {
				t.Fatalf("file %+v accepted", f)
			}
		}
		// A decoded notice re-encodes to a payload that decodes to it.
		again, err := streams.EncodeNotice(n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := streams.DecodeNotice(again)
		if err != nil || !reflect.DeepEqual(n, m) {
			t.Fatalf("re-decode differs: %v\n%+v\n%+v", err, n, m)
		}
	})
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}
