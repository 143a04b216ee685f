package streams

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed reports a payload that does not decode. Decoders wrap it with
// the position and cause; callers dead-letter the message and go on.
var ErrMalformed = errors.New("malformed payload")

// MaxStringBytes bounds any single string inside a binary payload.
const MaxStringBytes = 64 << 20

// enc appends the primitive encodings used by the binary formats.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)       { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) str(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}
func (e *enc) attrs(a []Attr) {
	e.uvarint(uint64(len(a)))
	for _, kv := range a {
		e.str(kv.Key)
		e.str(kv.Value)
	}
}

// dec reads the primitive encodings; the first error sticks.
type dec struct {
	b   []byte
	off int
	err error
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", ErrMalformed, what, d.off)
	}
}

func (d *dec) u8(what string) uint8 {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail("truncated " + what)
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *dec) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint " + what)
		return 0
	}
	d.off += n
	return v
}

func (d *dec) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint " + what)
		return 0
	}
	d.off += n
	return v
}

// count reads a length that announces n items of at least minSize bytes each
// and refuses counts the remaining payload cannot hold, so a hostile length
// cannot make the decoder allocate.
func (d *dec) count(what string, minSize int) int {
	n := d.uvarint(what)
	if d.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(len(d.b)-d.off)/uint64(minSize) || n > math.MaxInt32 {
		d.fail(fmt.Sprintf("%s count %d exceeds payload", what, n))
		return 0
	}
	return int(n)
}

func (d *dec) str(what string) string {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return ""
	}
	if n > MaxStringBytes || n > uint64(len(d.b)-d.off) {
		d.fail(fmt.Sprintf("%s length %d exceeds payload", what, n))
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

func (d *dec) attrs(what string) []Attr {
	n := d.count(what, 2)
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

func (d *dec) header(magic0, magic1 byte, version uint8, what string) {
	m0, m1 := d.u8(what+" magic"), d.u8(what+" magic")
	if d.err != nil {
		return
	}
	if m0 != magic0 || m1 != magic1 {
		d.fail(fmt.Sprintf("%s magic %q", what, []byte{m0, m1}))
		return
	}
	if v := d.u8(what + " version"); d.err == nil && v != version {
		d.fail(fmt.Sprintf("unsupported %s version %d", what, v))
	}
}

// versionedHeader reads the magic and a version in [lo, hi] and returns it.
func (d *dec) versionedHeader(magic0, magic1 byte, lo, hi uint8, what string) uint8 {
	m0, m1 := d.u8(what+" magic"), d.u8(what+" magic")
	if d.err != nil {
		return 0
	}
	if m0 != magic0 || m1 != magic1 {
		d.fail(fmt.Sprintf("%s magic %q", what, []byte{m0, m1}))
		return 0
	}
	v := d.u8(what + " version")
	if d.err == nil && (v < lo || v > hi) {
		d.fail(fmt.Sprintf("unsupported %s version %d", what, v))
	}
	return v
}

func (d *dec) end(what string) error {
	if d.err == nil && d.off != len(d.b) {
		d.fail(fmt.Sprintf("%d trailing bytes after %s", len(d.b)-d.off, what))
	}
	return d.err
}
