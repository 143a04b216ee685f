package pqfile

import (
	"encoding/binary"
	"fmt"
)

// checkFooter walks a footer in Thrift's compact protocol without knowing
// its schema and refuses one whose lengths or counts run past its end.
// parquet-go's Thrift decoder allocates a string's or a list's stated
// length before it reads it, so a flipped byte in a footer asked for 3 GB
// (FuzzReadCheckpoint); every length a footer states that fits in it is
// at most the footer's size.
func checkFooter(b []byte) error {
	w := walker{b: b}
	if err := w.value(typeStruct, 0); err != nil {
		return fmt.Errorf("%w: footer: %v", ErrCorrupt, err)
	}
	return nil
}

// Compact protocol types.
const (
	typeTrue   = 1
	typeFalse  = 2
	typeByte   = 3
	typeI16    = 4
	typeI32    = 5
	typeI64    = 6
	typeDouble = 7
	typeBinary = 8
	typeList   = 9
	typeSet    = 10
	typeMap    = 11
	typeStruct = 12
)

// maxDepth bounds nesting: a Parquet footer nests a few levels deep.
const maxDepth = 64

type walker struct {
	b   []byte
	off int
}

func (w *walker) left() int { return len(w.b) - w.off }

func (w *walker) byte() (byte, error) {
	if w.off >= len(w.b) {
		return 0, fmt.Errorf("ends at byte %d", w.off)
	}
	c := w.b[w.off]
	w.off++
	return c, nil
}

func (w *walker) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.off:])
	if n <= 0 {
		return 0, fmt.Errorf("bad varint at byte %d", w.off)
	}
	w.off += n
	return v, nil
}

// skip advances n bytes that must be there.
func (w *walker) skip(n uint64) error {
	if n > uint64(w.left()) {
		return fmt.Errorf("%d bytes stated at byte %d, %d left", n, w.off, w.left())
	}
	w.off += int(n)
	return nil
}

// count reads a list's, set's or map's element count: every element takes
// at least a byte, so a count above the bytes left cannot be true.
func (w *walker) count(n uint64) (uint64, error) {
	if n > uint64(w.left()) {
		return 0, fmt.Errorf("%d elements stated at byte %d, %d bytes left", n, w.off, w.left())
	}
	return n, nil
}

// element walks one element of a list, set or map: a boolean there is a
// byte of its own, not part of a field header.
func (w *walker) element(t byte, depth int) error {
	if t == typeTrue || t == typeFalse {
		return w.skip(1)
	}
	return w.value(t, depth)
}

func (w *walker) value(t byte, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d at byte %d", maxDepth, w.off)
	}
	switch t {
	case typeTrue, typeFalse:
		return nil // a struct field's value is in its type; list elements are read as bytes below
	case typeByte:
		return w.skip(1)
	case typeI16, typeI32, typeI64:
		_, err := w.uvarint()
		return err
	case typeDouble:
		return w.skip(8)
	case typeBinary:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		return w.skip(n)
	case typeList, typeSet:
		h, err := w.byte()
		if err != nil {
			return err
		}
		n, et := uint64(h>>4), h&0x0f
		if n == 15 {
			if n, err = w.uvarint(); err != nil {
				return err
			}
		}
		if n, err = w.count(n); err != nil {
			return err
		}
		for range n {
			if err := w.element(et, depth+1); err != nil {
				return err
			}
		}
		return nil
	case typeMap:
		n, err := w.uvarint()
		if err != nil || n == 0 {
			return err
		}
		if n, err = w.count(n); err != nil {
			return err
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		for range n {
			if err := w.element(kv>>4, depth+1); err != nil {
				return err
			}
			if err := w.element(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case typeStruct:
		for {
			h, err := w.byte()
			if err != nil {
				return err
			}
			if h == 0 {
				return nil // stop
			}
			if h>>4 == 0 { // long form: the field id follows as a zigzag varint
				if _, err := w.uvarint(); err != nil {
					return err
				}
			}
			if err := w.value(h&0x0f, depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown type %d at byte %d", t, w.off-1)
	}
}

// Page types (PageHeader field 1).
const (
	PageData       = 0
	PageIndex      = 1
	PageDictionary = 2
	PageDataV2     = 3
)

// PageHeader is what a reader that decodes a page itself needs of its
// header (Parquet's PageHeader and the header of its kind): the sizes, and
// for a data or dictionary page its value count and encodings. The
// statistics and checksum are skipped.
type PageHeader struct {
	Type         int32
	Uncompressed int64 // uncompressed_page_size
	Compressed   int64 // compressed_page_size: the bytes after the header
	// NumValues counts a data page's levels (values and nulls), a
	// dictionary page's entries.
	NumValues int32
	Encoding  int32 // of the values (format.Encoding)
	// DefEncoding and RepEncoding: a v1 data page's level encodings.
	DefEncoding, RepEncoding int32
	// A v2 data page's nulls, rows, level byte lengths (the levels
	// precede the values, never compressed) and whether its values are
	// compressed.
	NumNulls, NumRows  int32
	DefBytes, RepBytes int32
	Compressed2        bool
}

// ReadPageHeader walks one page header at the start of b and returns it and
// its length. Any field it does not know is skipped as CheckFooter walks a
// footer: no length or count past b is believed.
func ReadPageHeader(b []byte) (h PageHeader, n int, err error) {
	w := walker{b: b}
	h.Type, h.Uncompressed, h.Compressed = -1, -1, -1
	h.Compressed2 = true // is_compressed defaults to true
	err = w.fields(func(id int16, t byte) error {
		switch {
		case id == 1 && t == typeI32:
			v, err := w.i32()
			h.Type = v
			return err
		case (id == 2 || id == 3) && t == typeI32:
			v, err := w.i32()
			if id == 2 {
				h.Uncompressed = int64(v)
			} else {
				h.Compressed = int64(v)
			}
			return err
		case id == 5 && t == typeStruct: // DataPageHeader
			return w.i32Fields([]*int32{&h.NumValues, &h.Encoding, &h.DefEncoding, &h.RepEncoding}, 0, nil, 1)
		case id == 7 && t == typeStruct: // DictionaryPageHeader
			return w.i32Fields([]*int32{&h.NumValues, &h.Encoding}, 0, nil, 1)
		case id == 8 && t == typeStruct: // DataPageHeaderV2
			return w.i32Fields([]*int32{&h.NumValues, &h.NumNulls, &h.NumRows, &h.Encoding, &h.DefBytes, &h.RepBytes}, 7, &h.Compressed2, 1)
		}
		return w.value(t, 1)
	}, 0)
	if err != nil {
		return PageHeader{}, 0, err
	}
	if h.Uncompressed < 0 || h.Compressed < 0 {
		return PageHeader{}, 0, fmt.Errorf("page sizes %d and %d", h.Uncompressed, h.Compressed)
	}
	return h, w.off, nil
}

// fields walks a struct's fields to its stop, calling f with each field's
// id and type with the walker at its value; f reads or skips the value.
func (w *walker) fields(f func(id int16, t byte) error, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d at byte %d", maxDepth, w.off)
	}
	var id int64
	for {
		h, err := w.byte()
		if err != nil {
			return err
		}
		if h == 0 {
			return nil
		}
		if d := int64(h >> 4); d != 0 {
			id += d
		} else {
			v, err := w.uvarint()
			if err != nil {
				return err
			}
			id = int64(v>>1) ^ -int64(v&1)
		}
		if id < -1<<15 || id >= 1<<15 {
			return fmt.Errorf("field id %d at byte %d", id, w.off)
		}
		if err := f(int16(id), h&0x0f); err != nil {
			return err
		}
	}
}

// i32Fields walks a struct at depth, reading its i32 field of id k into
// *dst[k-1] (nil: skipped) and its boolean field boolID (when b is not
// nil) into *b; any other field is skipped.
func (w *walker) i32Fields(dst []*int32, boolID int16, b *bool, depth int) error {
	return w.fields(func(id int16, t byte) (err error) {
		switch {
		case t == typeI32 && id >= 1 && int(id) <= len(dst) && dst[id-1] != nil:
			*dst[id-1], err = w.i32()
		case b != nil && id == boolID && (t == typeTrue || t == typeFalse):
			*b = t == typeTrue
		default:
			err = w.value(t, depth+1)
		}
		return err
	}, depth)
}

// i32 reads a zigzag varint that must fit in 32 bits.
func (w *walker) i32() (int32, error) {
	v, err := w.uvarint()
	if err != nil {
		return 0, err
	}
	x := int64(v>>1) ^ -int64(v&1)
	if x != int64(int32(x)) {
		return 0, fmt.Errorf("i32 out of range at byte %d", w.off)
	}
	return int32(x), nil
}
