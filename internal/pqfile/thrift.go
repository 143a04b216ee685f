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

// pageHeader walks one page header at the start of b and returns its length
// and the page sizes it states (PageHeader fields 2 and 3).
func pageHeader(b []byte) (n int, uncompressed, compressed int64, err error) {
	w := walker{b: b}
	var id int64
	uncompressed, compressed = -1, -1
	for {
		h, err := w.byte()
		if err != nil {
			return 0, 0, 0, err
		}
		if h == 0 {
			break
		}
		if d := int64(h >> 4); d != 0 {
			id += d
		} else {
			v, err := w.uvarint()
			if err != nil {
				return 0, 0, 0, err
			}
			id = int64(v>>1) ^ -int64(v&1)
		}
		if t := h & 0x0f; (id == 2 || id == 3) && t == typeI32 {
			v, err := w.uvarint()
			if err != nil {
				return 0, 0, 0, err
			}
			if size := int64(v>>1) ^ -int64(v&1); id == 2 {
				uncompressed = size
			} else {
				compressed = size
			}
		} else if err := w.value(t, 1); err != nil {
			return 0, 0, 0, err
		}
	}
	if uncompressed < 0 || compressed < 0 {
		return 0, 0, 0, fmt.Errorf("page sizes %d and %d", uncompressed, compressed)
	}
	return w.off, uncompressed, compressed, nil
}
