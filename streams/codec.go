package streams

import (
	"errors"
	"fmt"

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
// its errors wrap ErrMalformed and the first one sticks.
type dec struct{ wire.Decoder }

func newDec(b []byte) dec { return dec{wire.NewDecoder(b, ErrMalformed)} }

func (d *dec) str(what string) string { return d.Str(what, MaxStringBytes) }

func (d *dec) attrs(what string) []Attr {
	n := d.Count(what, 2)
	if n == 0 {
		return nil
	}
	a := make([]Attr, n)
	for i := range a {
		a[i].Key = d.str(what + " key")
		a[i].Value = d.str(what + " value")
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
