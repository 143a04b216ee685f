package streams_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/quarrylake/quarry/streams"
)

// The wire formats are fixed: these bytes were written by the encoders before
// their primitives moved to internal/wire, and must never change.
func TestGoldenBytes(t *testing.T) {
	frame := streams.Frame{Source: "file-a", Tenant: "acme", FirstOffset: 10, NextOffset: 300, Records: []streams.Record{
		{TS: 1700000000123, Text: "user alice logged in"},
		{TS: -5, Text: "", Attrs: []streams.Attr{{Key: "op", Value: "insert"}}},
	}}
	mined := streams.MinedBatch{
		WALSeq: 42, PrevSeq: 40, Tenant: "acme", Source: "gen", Subject: "quarry.wal.lines.acme",
		FirstOffset: 1, NextOffset: 9, Quarantined: 2,
		Records: []streams.MinedRecord{
			{Index: 0, TS: 7, TemplateID: 3, TemplateVersion: 2, Params: []string{"a", ""}, Attrs: []streams.Attr{{Key: "k", Value: "v"}}},
			{Index: 300, TS: -8, TemplateID: 400, TemplateVersion: 1},
		},
		Templates: []streams.TemplateDef{
			{Kind: streams.TemplateChanged, ID: 3, Tenant: "acme", Version: 2, Text: "x <*>", Previous: "x y"},
			{Kind: streams.TemplateMerged, ID: 5, Tenant: "acme", Version: 1, Text: "x <*>", Previous: "x z", Into: 3},
		},
	}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"frame/1", streams.AppendFrame(nil, &frame), "5146010666696c652d610461636d650aac0202f6a1abfef962147573657220616c696365206c6f6767656420696e00090001026f7006696e73657274"},
		{"mined/2", streams.AppendMinedBatch(nil, &mined), "514d022a280461636d650367656e157175617272792e77616c2e6c696e65732e61636d6501090202000e03020201610001016b0176ac020f90030100000202030461636d65020578203c2a3e037820790003050461636d65010578203c2a3e0378207a03"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := hex.DecodeString(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tt.got, want) {
				t.Fatalf("encoding changed:\n got %x\nwant %x", tt.got, want)
			}
		})
	}
}
