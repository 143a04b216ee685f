package recfile

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/pqfile"
)

// Integer column chunks are decoded here, from the chunk's bytes, and not
// by parquet-go: parquet-go v0.32 trusts a page header's value count over
// what its data decodes to. A DELTA_BINARY_PACKED page whose data holds
// fewer values than its header states (or a PLAIN page shorter than its
// count) decodes into a pooled buffer that parquet-go then slices to the
// header's count: the values past what was decoded are whatever that
// buffer held before, from another page or another file (FuzzDecode found
// it: two decodes of one file disagreed). Here every page's decoded count
// must be the count its header and levels give, or the file is corrupt.
// Decoding into the column's own values (one array a row group, no page
// kept) also spares the page buffers parquet-go allocates and pools.

// intChunk is what readInts needs of an integer column chunk.
type intChunk struct {
	data  []byte // the chunk's bytes: pages, each after its header
	at    int64  // data's offset in the file (for errors)
	typ   format.Type
	codec format.CompressionCodec
}

// intDecodable reports whether readInts decodes every page of ch: page
// kinds, codec and encodings it knows. Anything else (a writer other than
// quarry's, an encoding quarry never wrote) is left to parquet-go.
func intDecodable(ch intChunk) bool {
	if ch.typ != format.Int32 && ch.typ != format.Int64 {
		return false
	}
	if ch.codec != format.Uncompressed && ch.codec != format.Zstd {
		return false
	}
	for pos := 0; pos < len(ch.data); {
		h, n, err := pqfile.ReadPageHeader(ch.data[pos:])
		if err != nil {
			return true // readInts reports it
		}
		switch h.Type {
		case pqfile.PageDictionary:
			if h.Encoding != int32(format.Plain) && h.Encoding != int32(format.PlainDictionary) {
				return false
			}
		case pqfile.PageData, pqfile.PageDataV2:
			switch format.Encoding(h.Encoding) {
			case format.Plain, format.DeltaBinaryPacked, format.RLEDictionary, format.PlainDictionary:
			default:
				return false
			}
			if h.Type == pqfile.PageData && h.DefEncoding != int32(format.RLE) {
				return false // BIT_PACKED levels (deprecated), or none Parquet defines
			}
		}
		pos += n + int(h.Compressed)
	}
	return true
}

// readInts reads an integer column chunk (required or optional, not
// repeated) into cv as readTyped does, decoding its pages itself: each
// page's values are decoded into cv's array, and a page that decodes to
// more or fewer values than its header and levels state is an ErrCorrupt.
// intDecodable(ch) must hold. nrows is the row group's row count.
func readInts(ch intChunk, c column, cv *colVals, nrows int) error {
	cv.read = true
	optional := c.maxDef > 0
	wide := ch.typ == format.Int64
	sc := pagePool.Get().(*pageScratch)
	defer pagePool.Put(sc)
	var dict []int64 // a dictionary page's entries
	var dictPage bool
	rows := 0
	for pos := 0; pos < len(ch.data); {
		at := ch.at + int64(pos)
		h, n, err := pqfile.ReadPageHeader(ch.data[pos:])
		if err != nil {
			return fmt.Errorf("%w: page header at %d: %v", ErrCorrupt, at, err)
		}
		if h.Compressed > int64(len(ch.data)-pos-n) {
			return fmt.Errorf("%w: page at %d states %d bytes past its chunk", ErrCorrupt, at, h.Compressed)
		}
		body := ch.data[pos+n : pos+n+int(h.Compressed)]
		pos += n + int(h.Compressed)
		switch h.Type {
		case pqfile.PageDictionary:
			data, err := sc.decompress(ch.codec, body, h.Uncompressed)
			if err != nil {
				return fmt.Errorf("%w: dictionary page at %d: %v", ErrCorrupt, at, err)
			}
			width := 4
			if wide {
				width = 8
			}
			if h.NumValues < 0 || len(data) != width*int(h.NumValues) {
				return fmt.Errorf("%w: dictionary page at %d: %d bytes for %d values", ErrCorrupt, at, len(data), h.NumValues)
			}
			dict = make([]int64, h.NumValues)
			for j := range dict {
				if wide {
					dict[j] = int64(binary.LittleEndian.Uint64(data[8*j:]))
				} else {
					dict[j] = int64(int32(binary.LittleEndian.Uint32(data[4*j:])))
				}
			}
			dictPage = true
			continue
		case pqfile.PageData, pqfile.PageDataV2:
		default:
			continue // an index page: nothing of the rows
		}
		levels := int(h.NumValues)
		if levels < 0 || levels > nrows-rows {
			return fmt.Errorf("%w: page at %d states %d values, %d rows left", ErrCorrupt, at, h.NumValues, nrows-rows)
		}
		var data []byte
		var defs []byte
		if h.Type == pqfile.PageData {
			if data, err = sc.decompress(ch.codec, body, h.Uncompressed); err != nil {
				return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
			}
			if optional {
				if len(data) < 4 {
					return fmt.Errorf("%w: page at %d: no definition levels", ErrCorrupt, at)
				}
				m := int(binary.LittleEndian.Uint32(data))
				if m < 0 || m > len(data)-4 {
					return fmt.Errorf("%w: page at %d: definition levels of %d bytes in %d", ErrCorrupt, at, m, len(data)-4)
				}
				if defs, err = sc.levels(data[4:4+m], c.maxDef, levels); err != nil {
					return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
				}
				data = data[4+m:]
			}
		} else {
			if h.RepBytes < 0 || h.DefBytes < 0 || int64(h.RepBytes)+int64(h.DefBytes) > int64(len(body)) {
				return fmt.Errorf("%w: page at %d: levels of %d and %d bytes in %d", ErrCorrupt, at, h.RepBytes, h.DefBytes, len(body))
			}
			lv := body[h.RepBytes : h.RepBytes+h.DefBytes]
			body = body[h.RepBytes+h.DefBytes:]
			if optional {
				if defs, err = sc.levels(lv, c.maxDef, levels); err != nil {
					return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
				}
			}
			data = body
			if h.Compressed2 {
				if data, err = sc.decompress(ch.codec, body, h.Uncompressed-int64(h.RepBytes)-int64(h.DefBytes)); err != nil {
					return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
				}
			}
		}
		want := levels // values the page holds
		if optional {
			want = cv.setPresent(defs, rows, c.maxDef)
			if h.Type == pqfile.PageDataV2 && int(h.NumNulls) != levels-want {
				return fmt.Errorf("%w: page at %d states %d nulls, its levels %d", ErrCorrupt, at, h.NumNulls, levels-want)
			}
		}
		got, err := cv.appendInts(format.Encoding(h.Encoding), data, want, wide, dict, dictPage, nrows)
		if err != nil {
			return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
		}
		if got != want {
			return fmt.Errorf("%w: page at %d holds %d values, its header and levels %d", ErrCorrupt, at, got, want)
		}
		rows += levels
	}
	if rows != nrows {
		return fmt.Errorf("%w: %d of %d rows", ErrCorrupt, rows, nrows)
	}
	if optional && cv.rankPresent() == nrows {
		cv.present, cv.rank = nil, nil // dense: value j is row j's
	}
	return nil
}

// appendInts decodes a data page's values (data, after its levels) in
// encoding enc and appends them to cv: an int32 column's to i32 (unless
// ints holds values already), an int64 column's and dictionary values to
// ints. It returns how many the page held; want is how many it should
// (the caller compares), nrows the row group's rows (the arrays' size).
func (cv *colVals) appendInts(enc format.Encoding, data []byte, want int, wide bool, dict []int64, dictPage bool, nrows int) (int, error) {
	switch enc {
	case format.RLEDictionary, format.PlainDictionary:
		if !dictPage {
			return 0, fmt.Errorf("dictionary indexes without a dictionary page")
		}
		if len(data) == 0 {
			return 0, nil
		}
		if data[0] > 32 {
			return 0, fmt.Errorf("dictionary index width %d", data[0])
		}
		// Runs state their lengths: a few bytes may state billions of
		// indexes, which the decoder would expand whole. At most want
		// (and a bit-packed group's padding) are taken.
		if c, err := hybridCount(data[1:], int(data[0])); err != nil || c > uint64(want)+7 {
			return 0, fmt.Errorf("dictionary indexes: runs of %d for %d values (%v)", c, want, err)
		}
		sc := pagePool.Get().(*pageScratch)
		defer pagePool.Put(sc)
		enc := rle.Encoding{BitWidth: int(data[0])}
		idx, err := enc.DecodeInt32(sc.idx[:0], data[1:])
		sc.idx = idx[:0]
		if err != nil {
			return 0, err
		}
		switch {
		case len(idx) > want && len(idx)-want < 8:
			idx = idx[:want] // bit-packed runs end in whole groups of eight
		case len(idx) < want && data[0] == 0:
			// Indexes of no bits (a dictionary of one entry) are all 0;
			// a writer may leave their runs out.
			for len(idx) < want {
				idx = append(idx, 0)
			}
			sc.idx = idx[:0]
		}
		cv.widen()
		cv.ints, cv.owned = cv.grow64(cv.ints, len(idx), nrows), true
		for _, x := range idx {
			if x < 0 || int(x) >= len(dict) {
				return 0, fmt.Errorf("dictionary index %d of %d", x, len(dict))
			}
			cv.ints = append(cv.ints, dict[x])
		}
		return len(idx), nil
	case format.Plain:
		if len(data) == 0 {
			return 0, nil // (a pointer to no bytes may be past its array)
		}
		if wide {
			if len(data)%8 != 0 {
				return 0, fmt.Errorf("%d bytes of 8-byte values", len(data))
			}
			cv.widen()
			cv.ints, cv.owned = cv.grow64(cv.ints, len(data)/8, nrows), true
			cv.ints = append(cv.ints, unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(data))), len(data)/8)...)
			return len(data) / 8, nil
		}
		if len(data)%4 != 0 {
			return 0, fmt.Errorf("%d bytes of 4-byte values", len(data))
		}
		v := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(data))), len(data)/4)
		cv.append32(v, nrows)
		return len(v), nil
	case format.DeltaBinaryPacked:
		if wide {
			cv.widen()
			cv.ints, cv.owned = cv.grow64(cv.ints, want, nrows), true
			tail := cv.ints[len(cv.ints):cap(cv.ints)]
			got, err := (&delta.BinaryPackedEncoding{}).DecodeInt64(tail, data)
			if err != nil {
				return 0, err
			}
			if len(got) > 0 && unsafe.SliceData(got) != unsafe.SliceData(tail) {
				cv.ints = append(cv.ints, got...) // more than want: grown elsewhere
			} else {
				cv.ints = cv.ints[:len(cv.ints)+len(got)]
			}
			return len(got), nil
		}
		sc := pagePool.Get().(*pageScratch)
		defer pagePool.Put(sc)
		got, err := (&delta.BinaryPackedEncoding{}).DecodeInt32(sc.idx[:0], data)
		sc.idx = got[:0]
		if err != nil {
			return 0, err
		}
		cv.append32(got, nrows)
		return len(got), nil
	}
	return 0, fmt.Errorf("encoding %v", enc)
}

// append32 appends int32 values to cv: to i32, or widened to ints when
// ints holds values (a dictionary page came first).
func (cv *colVals) append32(v []int32, nrows int) {
	if cv.ints != nil {
		cv.ints, cv.owned = cv.grow64(cv.ints, len(v), nrows), true
		for _, x := range v {
			cv.ints = append(cv.ints, int64(x))
		}
		return
	}
	if cv.i32 == nil {
		cv.i32, cv.pooled = getInts[int32](max(nrows, len(v))), true
	}
	cv.i32, cv.owned = append(cv.i32, v...), true
}

// grow64 is s with room for n more, sized for the row group's nrows
// values at first (one array a column, not one a page).
func (cv *colVals) grow64(s []int64, n, nrows int) []int64 {
	if s == nil {
		cv.pooled = true
		return getInts[int64](max(nrows, n))
	}
	return slices.Grow(s, n)
}

// free gives cv's pooled integer arrays back (readInts'), as release gives
// parquet-go's pages back, and clears cv but for its column.
func (cv *colVals) free() {
	if cv.pooled {
		putInts(cv.ints)
		putInts(cv.i32)
	}
	*cv = colVals{c: cv.c}
}

// intPools hold integer arrays by capacity class: class k holds arrays of
// capacity 1<<k (from 1,024 values). A row group's integer columns are
// decoded into them and given back when the rows are rendered, so the next
// row group (or the next search) decodes into memory already in use, as
// parquet-go's page pools did for these columns.
var intPools [2][32]sync.Pool

const minIntClass = 10

func intClass(n int) int { return max(bits.Len(uint(max(n, 1)-1)), minIntClass) }

func poolOf[T int32 | int64]() *[32]sync.Pool {
	var z T
	if unsafe.Sizeof(z) == 4 {
		return &intPools[0]
	}
	return &intPools[1]
}

// getInts returns an empty array of capacity at least n.
func getInts[T int32 | int64](n int) []T {
	k := intClass(n)
	if k >= 32 {
		return make([]T, 0, n)
	}
	if p, ok := poolOf[T]()[k].Get().(*[]T); ok {
		return (*p)[:0]
	}
	return make([]T, 0, 1<<k)
}

// putInts keeps s for a later getInts when its capacity is a class's.
func putInts[T int32 | int64](s []T) {
	c := cap(s)
	if c < 1<<minIntClass || c&(c-1) != 0 {
		return
	}
	k := bits.Len(uint(c - 1))
	if k >= 32 {
		return
	}
	s = s[:0]
	poolOf[T]()[k].Put(&s)
}

// setPresent sets the present bits of the rows from row on whose
// definition level (defs) is maxDef, and returns how many are.
func (cv *colVals) setPresent(defs []byte, row, maxDef int) (vals int) {
	if words := (row + len(defs) + 63) >> 6; words > len(cv.present) {
		cv.present = append(cv.present, make([]uint64, words-len(cv.present))...)
	}
	k := 0
	if maxDef == 1 {
		// Eight levels a step while they are 0 or 1 (a top-level
		// optional column's): the low bit of each byte gathered into one
		// by a multiplication, written at row (and into the next word
		// when it crosses one).
		for ; k+8 <= len(defs); k += 8 {
			x := binary.LittleEndian.Uint64(defs[k:])
			if x&^0x0101010101010101 != 0 {
				break // another level: byte by byte
			}
			b, w, sh := (x*0x0102040810204080)>>56, row>>6, uint(row)&63
			cv.present[w] |= b << sh
			if sh > 56 {
				cv.present[w+1] |= b >> (64 - sh)
			}
			vals += bits.OnesCount64(x)
			row += 8
		}
	}
	for _, d := range defs[k:] {
		if int(d) == maxDef {
			cv.present[row>>6] |= 1 << (uint(row) & 63)
			vals++
		}
		row++
	}
	return vals
}

// pageScratch is the memory a page is decompressed and its levels decoded
// into, reused page after page: what readInts keeps of a page is the
// values it appends.
type pageScratch struct {
	data []byte
	defs []byte
	idx  []int32
}

var pagePool = sync.Pool{New: func() any { return new(pageScratch) }}

// decompress returns body uncompressed (by codec), which must come to
// exactly size bytes. The bytes are sc's until its next decompress.
func (sc *pageScratch) decompress(codec format.CompressionCodec, body []byte, size int64) ([]byte, error) {
	if size < 0 || size > pqfile.MaxPageSize {
		return nil, fmt.Errorf("page of %d bytes", size)
	}
	switch codec {
	case format.Uncompressed:
		if int64(len(body)) != size {
			return nil, fmt.Errorf("%d bytes, its header states %d", len(body), size)
		}
		return body, nil
	case format.Zstd:
		if int64(cap(sc.data)) < size {
			sc.data = make([]byte, 0, size)
		}
		// parquet-go's codec: its decoders, which the other columns'
		// pages use too.
		out, err := parquet.Zstd.Decode(sc.data[:0], body)
		if err != nil {
			return nil, err
		}
		if int64(len(out)) != size {
			return nil, fmt.Errorf("%d bytes uncompressed, its header states %d", len(out), size)
		}
		sc.data = out[:0]
		return out, nil
	}
	return nil, fmt.Errorf("codec %v", codec)
}

// levels decodes n definition levels (RLE/bit-packed hybrid, as wide as
// maxDef needs) from b, each at most maxDef. They are sc's until its next
// levels.
func (sc *pageScratch) levels(b []byte, maxDef, n int) ([]byte, error) {
	defs, err := hybridLevels(sc.defs[:0], b, bits.Len(uint(maxDef)), n)
	sc.defs = defs[:0]
	if err != nil {
		return nil, err
	}
	for _, d := range defs {
		if int(d) > maxDef {
			return nil, fmt.Errorf("definition level %d above %d", d, maxDef)
		}
	}
	return defs, nil
}

// hybridLevels decodes n levels of w bits (at most 8) from b, Parquet's
// RLE/bit-packed hybrid, appending them to dst[:0]. It stops at n: a run
// stating more levels is cut there, so a few bytes that state billions
// (parquet-go's decoder expands every run whole: 8 KB of a damaged file
// took 9 GB, FuzzDecode) cost only the levels the page holds. Fewer than n
// is an error.
func hybridLevels(dst, b []byte, w, n int) ([]byte, error) {
	dst = slices.Grow(dst[:0], n)
	for len(dst) < n {
		h, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%d definition levels for %d values", len(dst), n)
		}
		b = b[k:]
		left := uint64(n - len(dst))
		if h&1 == 0 { // a run of one value, in (w+7)/8 bytes
			var v byte
			if w > 0 {
				if len(b) == 0 {
					return nil, fmt.Errorf("a run's value past the levels")
				}
				v, b = b[0], b[1:]
			}
			for range min(h>>1, left) {
				dst = append(dst, v)
			}
			continue
		}
		// Groups of eight levels bit-packed, w bytes a group, the low bits
		// first.
		groups := h >> 1
		if w == 0 || groups > uint64(len(b)/w) {
			return nil, fmt.Errorf("bit-packed levels past the page")
		}
		m := min(groups*8, left)
		mask := uint64(1)<<w - 1
		for i := range m {
			bit := i * uint64(w)
			x := uint64(b[bit/8])
			if bit%8+uint64(w) > 8 {
				x |= uint64(b[bit/8+1]) << 8
			}
			dst = append(dst, byte(x>>(bit%8)&mask))
		}
		b = b[groups*uint64(w):]
	}
	return dst, nil
}

// hybridCount is how many values the runs of b (RLE/bit-packed hybrid, w
// bits a value) state, without decoding them; it stops counting past
// 1<<40.
func hybridCount(b []byte, w int) (uint64, error) {
	var c uint64
	for len(b) > 0 && c < 1<<40 {
		h, k := binary.Uvarint(b)
		if k <= 0 {
			return c, fmt.Errorf("bad run header")
		}
		b = b[k:]
		if h&1 == 0 {
			c += min(h>>1, 1<<40)
			if vb := (w + 7) / 8; vb <= len(b) {
				b = b[vb:]
			} else {
				return c, fmt.Errorf("a run's value past the data")
			}
			continue
		}
		groups := h >> 1
		if w > 0 && groups > uint64(len(b)/w) {
			groups = uint64(len(b) / w) // the last group may be cut short
		}
		c += groups * 8
		b = b[groups*uint64(w):]
		if w == 0 {
			break
		}
	}
	return c, nil
}
