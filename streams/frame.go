package streams

import "fmt"

// Attr is one named attribute of a record: a CDC key or attribute column,
// the CDC operation or LSN, or a source-specific field. Attrs keep their
// order so that encodings are deterministic.
type Attr struct {
	Key   string
	Value string
}

// TSSource says where a record's TS came from.
type TSSource uint8

// TS sources. The values are on the wire (frame/2, mined/3): never
// renumber them.
const (
	// TSRead: the time the producer read the record (a line without a
	// timestamp and none before it in its source run, a line source with
	// timestamp: none, every record of frame/1 and mined/1-2).
	TSRead TSSource = 0
	// TSEvent: the event time the record carries: the timestamp parsed
	// from a line, the commit time of a CDC change's transaction.
	TSEvent TSSource = 1
	// TSPrevious: the event time of the previous line of the same source
	// run, for a line without a timestamp of its own (a continuation line
	// such as a stack-trace frame).
	TSPrevious TSSource = 2

	numTSSources = 3
)

func (s TSSource) String() string {
	switch s {
	case TSRead:
		return "read"
	case TSEvent:
		return "event"
	case TSPrevious:
		return "previous"
	}
	return fmt.Sprintf("TSSource(%d)", uint8(s))
}

// Record is one input value: a log line, or the mined column of a CDC row.
type Record struct {
	// TS is the record time in Unix nanoseconds: for a line its event time
	// (the timestamp it starts with, else the previous line's) or its read
	// time, as TSSource says; the commit time of a CDC change.
	TS int64
	// TSSource says what TS is.
	TSSource TSSource
	// Text is the value the miner mines. It may hold any bytes; the miner
	// decides what it can mine and dead-letters the rest.
	Text string
	// Attrs are carried to the lake unchanged.
	Attrs []Attr
}

// Frame is a batch of records from one source for one tenant, published as
// one WAL message (format FormatFrame, "frame/2"). Offsets are source positions: for a
// file the byte offset of the first record and the offset just after the
// last; a restarted producer resumes at NextOffset of the last acked frame.
type Frame struct {
	Source      string
	Tenant      string
	FirstOffset uint64
	NextOffset  uint64
	Records     []Record
}

// frameVersion is the version AppendFrame writes; DecodeFrame also reads
// version 1 (no ts source: every record TSRead).
const frameVersion = 2

// AppendFrame appends the "frame/2" encoding of f to b.
//
// Layout: 'Q' 'F' version:u8, source:str, tenant:str, first:uvarint,
// next:uvarint, n:uvarint, then n records of ts:varint, tssource:u8,
// text:str, attrs:(n:uvarint, (key:str, value:str)*). str is uvarint
// length + bytes. Version 1 had no tssource.
func AppendFrame(b []byte, f *Frame) []byte {
	e := newEnc(b)
	e.U8('Q')
	e.U8('F')
	e.U8(frameVersion)
	e.Str(f.Source)
	e.Str(f.Tenant)
	e.Uvarint(f.FirstOffset)
	e.Uvarint(f.NextOffset)
	e.Uvarint(uint64(len(f.Records)))
	for i := range f.Records {
		r := &f.Records[i]
		e.Varint(r.TS)
		e.U8(uint8(r.TSSource))
		e.Str(r.Text)
		e.attrs(r.Attrs)
	}
	return e.B
}

// EncodedRecordSize is an upper bound of the bytes r adds to a frame, for
// producers that cut frames by size.
func EncodedRecordSize(r *Record) int {
	n := 10 + 1 + 10 + len(r.Text) + 10
	for _, a := range r.Attrs {
		n += 20 + len(a.Key) + len(a.Value)
	}
	return n
}

// DecodeFrame decodes a "frame/2" payload, or a "frame/1" one (written
// before event time: its records are TSRead). Errors wrap ErrMalformed.
func DecodeFrame(b []byte) (*Frame, error) { return decodeFrame(newDec(b)) }

// DecodeFrameShared is DecodeFrame whose strings alias b instead of copying
// it: one allocation less per string for a consumer that reads a message
// once. b must not change while the frame or any string taken from it is
// in use, and each such string keeps all of b in memory (clone what is
// kept longer).
func DecodeFrameShared(b []byte) (*Frame, error) { return decodeFrame(newSharedDec(b)) }

func decodeFrame(d dec) (*Frame, error) {
	version := d.VersionedHeader('Q', 'F', 1, frameVersion, "frame")
	f := &Frame{}
	f.Source = d.str("source")
	f.Tenant = d.str("tenant")
	f.FirstOffset = d.Uvarint("first offset")
	f.NextOffset = d.Uvarint("next offset")
	n := d.Count("records", 3)
	if n > 0 {
		f.Records = make([]Record, n)
		for i := range f.Records {
			r := &f.Records[i]
			r.TS = d.Varint("ts")
			if version >= 2 {
				r.TSSource = d.tsSource()
			}
			r.Text = d.str("text")
			r.Attrs = d.attrs()
		}
	}
	if err := d.End("frame"); err != nil {
		return nil, err
	}
	if f.NextOffset < f.FirstOffset {
		return nil, fmt.Errorf("%w: next offset %d before first offset %d", ErrMalformed, f.NextOffset, f.FirstOffset)
	}
	if err := CheckToken(f.Tenant); err != nil {
		return nil, fmt.Errorf("%w: tenant: %v", ErrMalformed, err)
	}
	return f, nil
}
