package streams_test

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/quarrylake/quarry/streams"
)

// goldenFrame and goldenMined are the values behind the golden bytes.
func goldenFrame() streams.Frame {
	return streams.Frame{Source: "file-a", Tenant: "acme", FirstOffset: 10, NextOffset: 300, Records: []streams.Record{
		{TS: 1700000000123, Text: "user alice logged in"},
		{TS: -5, Text: "", Attrs: []streams.Attr{{Key: "op", Value: "insert"}}},
	}}
}

func goldenMined() streams.MinedBatch {
	return streams.MinedBatch{
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
}

// Bytes written by earlier versions, which the decoders still read.
const (
	goldenFrameV1 = "5146010666696c652d610461636d650aac0202f6a1abfef962147573657220616c696365206c6f6767656420696e00090001026f7006696e73657274"
	goldenMinedV2 = "514d022a280461636d650367656e157175617272792e77616c2e6c696e65732e61636d6501090202000e03020201610001016b0176ac020f90030100000202030461636d65020578203c2a3e037820790003050461636d65010578203c2a3e0378207a03"
)

// The wire formats are fixed: these bytes must never change. A new version
// gets a new case; the old ones move to TestGoldenOldVersionsDecode.
func TestGoldenBytes(t *testing.T) {
	frame := goldenFrame()
	frame.Records[0].TSSource = streams.TSEvent
	frame.Records[1].TSSource = streams.TSPrevious
	mined := goldenMined()
	mined.Records[0].TSSource = streams.TSEvent
	mined.Records[1].TSSource = streams.TSPrevious
	mined.Templates[0].Kinds = []string{"ipv4"}
	mined.Templates = append(mined.Templates, streams.TemplateDef{Kind: streams.TemplateCreated, ID: 6, Tenant: "acme", Version: 1, Text: "<*> at <*>", Kinds: []string{"", "ts"}})
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"frame/2", streams.AppendFrame(nil, &frame), "5146020666696c652d610461636d650aac0202f6a1abfef96201147573657220616c696365206c6f6767656420696e0009020001026f7006696e73657274"},
		{"mined/3", streams.AppendMinedBatch(nil, &mined), "514d032a280461636d650367656e157175617272792e77616c2e6c696e65732e61636d6501090202000e0103020201610001016b0176ac020f0290030100000302030461636d65020578203c2a3e037820790001046970763403050461636d65010578203c2a3e0378207a030001060461636d65010a3c2a3e206174203c2a3e00000200027473"},
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

// Payloads of earlier versions decode to the same values, with every record
// TSRead and no template kinds.
func TestGoldenOldVersionsDecode(t *testing.T) {
	b, _ := hex.DecodeString(goldenFrameV1)
	f, err := streams.DecodeFrame(b)
	if err != nil {
		t.Fatalf("frame/1: %v", err)
	}
	if want := goldenFrame(); !reflect.DeepEqual(*f, want) {
		t.Errorf("frame/1 decode:\n got %+v\nwant %+v", *f, want)
	}
	b, _ = hex.DecodeString(goldenMinedV2)
	m, err := streams.DecodeMinedBatch(b)
	if err != nil {
		t.Fatalf("mined/2: %v", err)
	}
	if want := goldenMined(); !reflect.DeepEqual(*m, want) {
		t.Errorf("mined/2 decode:\n got %+v\nwant %+v", *m, want)
	}
}
