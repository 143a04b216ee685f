// Package wire holds the byte-level primitives of quarry's binary formats:
// uvarints, zigzag varints and length-prefixed strings, written by an
// Encoder and read back by a Decoder that bounds every length by the
// payload. The message formats (streams: frame/1, mined/2) and the miner's
// snapshot blob are built from these; the layouts live with their formats.
package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Encoder appends primitives to B.
type Encoder struct{ B []byte }

// U8 appends one byte.
func (e *Encoder) U8(v uint8) { e.B = append(e.B, v) }

// Uvarint appends v as an unsigned varint.
func (e *Encoder) Uvarint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// Varint appends v as a zigzag varint.
func (e *Encoder) Varint(v int64) { e.B = binary.AppendVarint(e.B, v) }

// Str appends s as a uvarint length and its bytes.
func (e *Encoder) Str(s string) {
	e.Uvarint(uint64(len(s)))
	e.B = append(e.B, s...)
}

// Bytes appends p as a uvarint length and its bytes.
func (e *Encoder) Bytes(p []byte) {
	e.Uvarint(uint64(len(p)))
	e.B = append(e.B, p...)
}

// Decoder reads primitives from a payload; the first error sticks and every
// later read returns a zero value, so a format reads all its fields and
// checks Err once. Errors wrap the sentinel given to NewDecoder and name the
// field and the byte offset.
type Decoder struct {
	b   []byte
	off int
	err error
	bad error
}

// NewDecoder reads b; its errors wrap bad.
func NewDecoder(b []byte, bad error) Decoder { return Decoder{b: b, bad: bad} }

// Err is the first error, or nil.
func (d *Decoder) Err() error { return d.err }

// Offset is the number of bytes read so far.
func (d *Decoder) Offset() int { return d.off }

// Remaining is the number of bytes not read yet.
func (d *Decoder) Remaining() int { return len(d.b) - d.off }

// Fail records what went wrong at the current offset, unless an error is
// already recorded.
func (d *Decoder) Fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", d.bad, what, d.off)
	}
}

// U8 reads one byte.
func (d *Decoder) U8(what string) uint8 {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.Fail("truncated " + what)
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.Fail("bad varint " + what)
		return 0
	}
	d.off += n
	return v
}

// Varint reads a zigzag varint.
func (d *Decoder) Varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.Fail("bad varint " + what)
		return 0
	}
	d.off += n
	return v
}

// Count reads a length that announces items of at least minSize bytes each
// and refuses counts the rest of the payload cannot hold, so a hostile
// length cannot make the decoder allocate.
func (d *Decoder) Count(what string, minSize int) int {
	n := d.Uvarint(what)
	if d.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(d.Remaining())/uint64(minSize) || n > math.MaxInt32 {
		d.Fail(fmt.Sprintf("%s count %d exceeds payload", what, n))
		return 0
	}
	return int(n)
}

// Bytes reads a uvarint length and that many bytes, which alias the payload.
// A length beyond maxLen (when positive) or the payload is an error.
func (d *Decoder) Bytes(what string, maxLen int) []byte {
	if d.err != nil {
		return nil
	}
	// Not d.Uvarint(what + " length"): that would build the name on
	// every read, one allocation per field of every record.
	n, k := binary.Uvarint(d.b[d.off:])
	if k <= 0 {
		d.Fail("bad varint " + what + " length")
		return nil
	}
	d.off += k
	if maxLen > 0 && n > uint64(maxLen) || n > uint64(d.Remaining()) {
		d.Fail(fmt.Sprintf("%s length %d exceeds payload", what, n))
		return nil
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

// Str reads a string written by Encoder.Str, at most maxLen bytes (when
// positive).
func (d *Decoder) Str(what string, maxLen int) string {
	return string(d.Bytes(what, maxLen))
}

// Header reads the two magic bytes and a version byte that must equal
// version.
func (d *Decoder) Header(magic0, magic1 byte, version uint8, what string) {
	d.VersionedHeader(magic0, magic1, version, version, what)
}

// VersionedHeader reads the two magic bytes and a version in [lo, hi], and
// returns the version.
func (d *Decoder) VersionedHeader(magic0, magic1 byte, lo, hi uint8, what string) uint8 {
	m0, m1 := d.U8(what+" magic"), d.U8(what+" magic")
	if d.err != nil {
		return 0
	}
	if m0 != magic0 || m1 != magic1 {
		d.Fail(fmt.Sprintf("%s magic %q", what, []byte{m0, m1}))
		return 0
	}
	v := d.U8(what + " version")
	if d.err == nil && (v < lo || v > hi) {
		d.Fail(fmt.Sprintf("unsupported %s version %d", what, v))
	}
	return v
}

// End fails when bytes are left after what, and returns Err.
func (d *Decoder) End(what string) error {
	if d.err == nil && d.off != len(d.b) {
		d.Fail(fmt.Sprintf("%d trailing bytes after %s", len(d.b)-d.off, what))
	}
	return d.err
}
