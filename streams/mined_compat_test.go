package streams

import (
	"errors"
	"reflect"
	"testing"
)

// appendMinedV1 is the mined/1 encoder as it was, for the compatibility test.
func appendMinedV1(m *MinedBatch) []byte {
	e := newEnc(nil)
	e.U8('Q')
	e.U8('M')
	e.U8(1)
	e.Uvarint(m.WALSeq)
	e.Uvarint(m.PrevSeq)
	e.Str(m.Tenant)
	e.Str(m.Source)
	e.Str(m.Subject)
	e.Uvarint(m.FirstOffset)
	e.Uvarint(m.NextOffset)
	e.Uvarint(uint64(m.Quarantined))
	e.Uvarint(uint64(len(m.Records)))
	for _, r := range m.Records {
		e.Uvarint(uint64(r.Index))
		e.Varint(r.TS)
		e.Uvarint(r.TemplateID)
		e.Uvarint(uint64(r.TemplateVersion))
		e.Uvarint(uint64(len(r.Params)))
		for _, p := range r.Params {
			e.Str(p)
		}
		e.attrs(r.Attrs)
	}
	e.Uvarint(uint64(len(m.Templates)))
	for _, t := range m.Templates {
		e.U8(uint8(t.Kind))
		e.Uvarint(t.ID)
		e.Str(t.Tenant)
		e.Uvarint(uint64(t.Version))
		e.Str(t.Text)
		e.Str(t.Previous)
	}
	return e.B
}

func TestMinedV1StillDecodes(t *testing.T) {
	m := MinedBatch{WALSeq: 9, PrevSeq: 8, Tenant: "acme", Records: []MinedRecord{{TemplateID: 1, TemplateVersion: 2, Params: []string{"x"}}},
		Templates: []TemplateDef{{Kind: TemplateChanged, ID: 1, Tenant: "acme", Version: 2, Text: "a <*>", Previous: "a b"}}}
	got, err := DecodeMinedBatch(appendMinedV1(&m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, m) {
		t.Fatalf("v1 decode:\n got %+v\nwant %+v", *got, m)
	}
}

func TestMinedMerge(t *testing.T) {
	m := MinedBatch{WALSeq: 9, PrevSeq: 8, Tenant: "acme",
		Templates: []TemplateDef{{Kind: TemplateMerged, ID: 3, Tenant: "acme", Version: 1, Text: "a <*>", Previous: "a c", Into: 1}}}
	got, err := DecodeMinedBatch(AppendMinedBatch(nil, &m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", *got, m)
	}
	for name, def := range map[string]TemplateDef{
		"merge without survivor":  {Kind: TemplateMerged, ID: 3, Tenant: "acme", Version: 1},
		"merge into itself":       {Kind: TemplateMerged, ID: 3, Tenant: "acme", Version: 1, Into: 3},
		"created with a survivor": {Kind: TemplateCreated, ID: 3, Tenant: "acme", Version: 1, Into: 1},
		"unknown kind":            {Kind: 9, ID: 3, Tenant: "acme", Version: 1},
		"merge with kinds":        {Kind: TemplateMerged, ID: 3, Tenant: "acme", Version: 1, Into: 1, Kinds: []string{"ipv4"}},
	} {
		bad := m
		bad.Templates = []TemplateDef{def}
		if _, err := DecodeMinedBatch(AppendMinedBatch(nil, &bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
	if !KnownMinedFormat("mined/1") || !KnownMinedFormat("mined/2") || !KnownMinedFormat(FormatMined) || KnownMinedFormat("mined/4") {
		t.Error("KnownMinedFormat")
	}
}

// A ts source this build does not know is malformed, in a frame and in a
// mined batch, rather than silently read as another source.
func TestUnknownTSSource(t *testing.T) {
	f := Frame{Source: "s", Tenant: "t", Records: []Record{{TS: 1, TSSource: numTSSources, Text: "x"}}}
	if _, err := DecodeFrame(AppendFrame(nil, &f)); !errors.Is(err, ErrMalformed) {
		t.Errorf("frame: got %v, want ErrMalformed", err)
	}
	m := MinedBatch{WALSeq: 2, PrevSeq: 1, Tenant: "t", Records: []MinedRecord{{TS: 1, TSSource: numTSSources, TemplateID: 1, TemplateVersion: 1}}}
	if _, err := DecodeMinedBatch(AppendMinedBatch(nil, &m)); !errors.Is(err, ErrMalformed) {
		t.Errorf("mined: got %v, want ErrMalformed", err)
	}
	for _, s := range []TSSource{TSRead, TSEvent, TSPrevious} {
		f.Records[0].TSSource = s
		got, err := DecodeFrame(AppendFrame(nil, &f))
		if err != nil || got.Records[0].TSSource != s {
			t.Errorf("frame with %s: %v %+v", s, err, got)
		}
	}
}
