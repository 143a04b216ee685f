package streams

import "fmt"

// MinedRecord is one record after mining. The original text is
// Render(template text of (TemplateID, TemplateVersion), Params).
type MinedRecord struct {
	// Index is the record's position in its frame.
	Index uint32
	TS    int64
	// TSSource says what TS is (the frame record's TSSource).
	TSSource        TSSource
	TemplateID      uint64
	TemplateVersion uint32
	Params          []string
	Attrs           []Attr
}

// TemplateKind says whether a template was born or changed.
type TemplateKind uint8

// Template kinds.
const (
	TemplateCreated TemplateKind = 1
	TemplateChanged TemplateKind = 2
	// TemplateMerged retires template ID into template Into: the miner found
	// them to be one. It adds no version: records keep the (ID, Version) they
	// were mined with, and that version's text stays valid.
	TemplateMerged TemplateKind = 3
)

func (k TemplateKind) String() string {
	switch k {
	case TemplateCreated:
		return "created"
	case TemplateChanged:
		return "changed"
	case TemplateMerged:
		return "merged"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// TemplateDef is a template version born in a batch, or a merge: every
// created or changed (ID, Version) appears in exactly one mined batch, the
// one whose frame created it; a merge of ID appears once, in the batch whose
// frame caused it.
type TemplateDef struct {
	Kind     TemplateKind
	ID       uint64
	Tenant   string
	Version  uint32 // for TemplateMerged: ID's last version
	Text     string // parameters written as <*>; for TemplateMerged, Into's text
	Previous string // the text of Version-1 for TemplateChanged; ID's text for TemplateMerged
	Into     uint64 // TemplateMerged: the surviving template
	// Kinds is, for TemplateCreated and TemplateChanged, the kind of each
	// <*> of Text in order: the name of the mining mask that made the
	// parameter, or "" (nil when no parameter came from a mask). Always
	// nil for TemplateMerged and in mined/1-2.
	Kinds []string
}

// MinedBatch is the miner's output for one WAL frame (format FormatMined,
// "mined/3"), published on MinedSubject(Tenant) with Nats-Msg-Id
// MinedMsgID(WALSeq).
//
// Every WAL message yields exactly one batch, possibly with no records (a
// frame that was dead-lettered whole has Quarantined set and no records).
// PrevSeq is the WAL sequence of the batch the miner produced before this
// one (0 for the first): the committer's drain barrier follows this chain, so
// gaps in WAL sequences never stall it.
type MinedBatch struct {
	WALSeq      uint64
	PrevSeq     uint64
	Tenant      string
	Source      string
	Subject     string // the WAL subject of the frame
	FirstOffset uint64
	NextOffset  uint64
	Records     []MinedRecord
	Templates   []TemplateDef
	// Quarantined counts records of the frame sent to the dead-letter stream.
	Quarantined uint32
}

// minedVersion is the version AppendMinedBatch writes; DecodeMinedBatch also
// reads version 2 (no ts source, no kinds) and version 1 (no merges, no into
// field either).
const minedVersion = 3

// AppendMinedBatch appends the "mined/3" encoding of m to b.
//
// Layout: 'Q' 'M' version:u8, walseq:uvarint, prevseq:uvarint, tenant:str,
// source:str, subject:str, first:uvarint, next:uvarint, quarantined:uvarint,
// n:uvarint records of (index:uvarint, ts:varint, tssource:u8, id:uvarint,
// version:uvarint, params:(n:uvarint, str*), attrs), then
// n:uvarint templates of (kind:u8, id:uvarint, tenant:str, version:uvarint,
// text:str, previous:str, into:uvarint, kinds:(n:uvarint, str*)).
// Version 2 had no tssource and no kinds; version 1 had no into either.
func AppendMinedBatch(b []byte, m *MinedBatch) []byte {
	e := newEnc(b)
	e.U8('Q')
	e.U8('M')
	e.U8(minedVersion)
	e.Uvarint(m.WALSeq)
	e.Uvarint(m.PrevSeq)
	e.Str(m.Tenant)
	e.Str(m.Source)
	e.Str(m.Subject)
	e.Uvarint(m.FirstOffset)
	e.Uvarint(m.NextOffset)
	e.Uvarint(uint64(m.Quarantined))
	e.Uvarint(uint64(len(m.Records)))
	for i := range m.Records {
		r := &m.Records[i]
		e.Uvarint(uint64(r.Index))
		e.Varint(r.TS)
		e.U8(uint8(r.TSSource))
		e.Uvarint(r.TemplateID)
		e.Uvarint(uint64(r.TemplateVersion))
		e.Uvarint(uint64(len(r.Params)))
		for _, p := range r.Params {
			e.Str(p)
		}
		e.attrs(r.Attrs)
	}
	e.Uvarint(uint64(len(m.Templates)))
	for i := range m.Templates {
		t := &m.Templates[i]
		e.U8(uint8(t.Kind))
		e.Uvarint(t.ID)
		e.Str(t.Tenant)
		e.Uvarint(uint64(t.Version))
		e.Str(t.Text)
		e.Str(t.Previous)
		e.Uvarint(t.Into)
		e.Uvarint(uint64(len(t.Kinds)))
		for _, k := range t.Kinds {
			e.Str(k)
		}
	}
	return e.B
}

// DecodeMinedBatch decodes a "mined/3" payload, or a "mined/2" one (written
// before event time: records TSRead, no kinds) or a "mined/1" one (written
// before merges existed: no into field either). Errors wrap ErrMalformed.
func DecodeMinedBatch(b []byte) (*MinedBatch, error) {
	m := &MinedBatch{}
	if err := decodeMinedBatch(newDec(b), m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeMinedBatchShared is DecodeMinedBatch whose strings alias b and
// whose records' parameter slices are cut from shared arrays, with the
// terms of DecodeFrameShared: b must not change while the batch or
// anything taken from it is in use, and what is kept keeps b in memory.
func DecodeMinedBatchShared(b []byte) (*MinedBatch, error) {
	m := &MinedBatch{}
	if err := decodeMinedBatch(newSharedDec(b), m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeMinedBatchSharedInto is DecodeMinedBatchShared into m, whose
// Records array it reuses when large enough: a consumer that is done with
// the records (not with their parameters, which are cut from arrays of
// their own) decodes the next batch without a new array of them. Every
// other field of m is replaced. After an error m holds no batch.
func DecodeMinedBatchSharedInto(m *MinedBatch, b []byte) error {
	return decodeMinedBatch(newSharedDec(b), m)
}

func decodeMinedBatch(d dec, m *MinedBatch) error {
	recs := m.Records[:0]
	*m = MinedBatch{}
	err := decodeMinedBatchTo(&d, m, recs)
	if err != nil {
		// No batch, and nothing of the payload kept through the array.
		clear(m.Records)
		*m = MinedBatch{Records: m.Records[:0]}
	}
	return err
}

func decodeMinedBatchTo(d *dec, m *MinedBatch, recs []MinedRecord) error {
	version := d.VersionedHeader('Q', 'M', 1, minedVersion, "mined batch")
	m.WALSeq = d.Uvarint("wal seq")
	m.PrevSeq = d.Uvarint("prev seq")
	m.Tenant = d.str("tenant")
	m.Source = d.str("source")
	m.Subject = d.str("subject")
	m.FirstOffset = d.Uvarint("first offset")
	m.NextOffset = d.Uvarint("next offset")
	q := d.Uvarint("quarantined")
	if q > 1<<32-1 {
		d.Fail("quarantined count overflows")
	}
	m.Quarantined = uint32(q)
	if n := d.Count("records", 6); n > 0 {
		// Every field of a record is written: a reused array may hold
		// the last batch's.
		if cap(recs) >= n {
			m.Records = recs[:n]
		} else {
			m.Records = make([]MinedRecord, n)
		}
		for i := range m.Records {
			var r MinedRecord
			idx := d.Uvarint("index")
			r.TS = d.Varint("ts")
			if version >= 3 {
				r.TSSource = d.tsSource()
			}
			r.TemplateID = d.Uvarint("template id")
			ver := d.Uvarint("template version")
			if idx > 1<<32-1 || ver > 1<<32-1 {
				d.Fail("index or version overflows")
			}
			r.Index, r.TemplateVersion = uint32(idx), uint32(ver)
			if np := d.Count("params", 1); np > 0 {
				r.Params = d.strings(np)
				for j := range r.Params {
					r.Params[j] = d.str("param")
				}
			}
			r.Attrs = d.attrs()
			m.Records[i] = r
		}
	}
	if n := d.Count("templates", 6); n > 0 {
		m.Templates = make([]TemplateDef, n)
		for i := range m.Templates {
			t := &m.Templates[i]
			t.Kind = TemplateKind(d.U8("template kind"))
			t.ID = d.Uvarint("template id")
			t.Tenant = d.own("template tenant")
			ver := d.Uvarint("template version")
			if ver > 1<<32-1 {
				d.Fail("template version overflows")
			}
			t.Version = uint32(ver)
			t.Text = d.own("template text")
			t.Previous = d.own("template previous")
			if version >= 2 {
				t.Into = d.Uvarint("template into")
			}
			if version >= 3 {
				if nk := d.Count("template kinds", 1); nk > 0 {
					t.Kinds = make([]string, nk)
					for j := range t.Kinds {
						t.Kinds[j] = d.own("template kind name")
					}
				}
			}
			switch {
			case d.Err() != nil:
			case t.Kind == TemplateCreated || t.Kind == TemplateChanged:
				if t.Into != 0 {
					d.Fail(fmt.Sprintf("template %d of kind %s merged into %d", t.ID, t.Kind, t.Into))
				}
			case t.Kind == TemplateMerged:
				if t.Into == 0 || t.Into == t.ID {
					d.Fail(fmt.Sprintf("template %d merged into %d", t.ID, t.Into))
				} else if t.Kinds != nil {
					d.Fail(fmt.Sprintf("merge of template %d with kinds", t.ID))
				}
			default:
				d.Fail(fmt.Sprintf("template kind %d", t.Kind))
			}
		}
	}
	if err := d.End("mined batch"); err != nil {
		return err
	}
	if m.WALSeq == 0 || m.PrevSeq >= m.WALSeq {
		return fmt.Errorf("%w: wal seq %d, prev seq %d", ErrMalformed, m.WALSeq, m.PrevSeq)
	}
	return nil
}
