package streams

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/quarrylake/quarry/internal/wire"
)

// ErrMalformed reports a payload that does not decode. Decoders wrap it with
// the position and cause; callers dead-letter the message and go on.
var ErrMalformed = errors.New("malformed payload")

// MaxStringBytes bounds any single string inside a binary payload.
const MaxStringBytes = 64 << 20

// enc appends the binary formats' primitives (internal/wire) and attributes.
type enc struct{ wire.Encoder }

func newEnc(b []byte) enc { return enc{wire.Encoder{B: b}} }

func (e *enc) attrs(a []Attr) {
	e.Uvarint(uint64(len(a)))
	for _, kv := range a {
		e.Str(kv.Key)
		e.Str(kv.Value)
	}
}

// dec reads the binary formats' primitives (internal/wire) and attributes;
// its errors wrap ErrMalformed and the first one sticks. A shared dec
// returns strings that alias the payload (see DecodeFrameShared) and cuts
// string slices from shared arrays.
type dec struct {
	wire.Decoder
	shared bool
	slab   []string // shared: the free part of the current array of strings
}

func newDec(b []byte) dec { return dec{Decoder: wire.NewDecoder(b, ErrMalformed)} }

func newSharedDec(b []byte) dec {
	return dec{Decoder: wire.NewDecoder(b, ErrMalformed), shared: true}
}

func (d *dec) str(what string) string {
	if !d.shared {
		return d.Str(what, MaxStringBytes)
	}
	b := d.Bytes(what, MaxStringBytes)
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// own reads a string into its own memory, also when d is shared: for what
// consumers keep long after the message (template texts).
func (d *dec) own(what string) string { return d.Str(what, MaxStringBytes) }

// strings returns n empty strings for a record's parameters: its own slice,
// or, shared, one cut from an array for many records (capped, so an append
// to it reallocates).
func (d *dec) strings(n int) []string {
	const slabSize = 4096
	if !d.shared || n > slabSize/8 {
		return make([]string, n)
	}
	if len(d.slab) < n {
		d.slab = make([]string, slabSize)
	}
	s := d.slab[:n:n]
	d.slab = d.slab[n:]
	return s
}

// attrs reads a record's attributes. Its labels are constants: building
// one per attribute (what + " key") was 6% of a syslog run's CPU.
func (d *dec) attrs() []Attr {
	n := d.Count("attrs", 2)
	if n == 0 {
		return nil
	}
	a := make([]Attr, n)
	for i := range a {
		a[i].Key = d.str("attrs key")
		a[i].Value = d.str("attrs value")
	}
	return a
}

// tsSource reads a TSSource byte, failing on a value this build does not
// know.
func (d *dec) tsSource() TSSource {
	v := d.U8("ts source")
	if d.Err() == nil && v >= numTSSources {
		d.Fail(fmt.Sprintf("ts source %d", v))
	}
	return TSSource(v)
}
