package recfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/pqfile"
)

// Column chunks quarry decodes itself (readInts, readBytes, readLists) are
// walked here, page by page, from the chunk's bytes: each page's header,
// its decompression, its repetition and definition levels, and its count
// held to what its header and levels state.

// rawChunk is a column chunk's bytes as the file holds them.
type rawChunk struct {
	data  []byte // the chunk's bytes: pages, each after its header
	at    int64  // data's offset in the file (for errors)
	typ   format.Type
	codec format.CompressionCodec
}

// chunkPages walks the pages of ch, a column chunk of a row group of
// nrows rows: it reads each page's header, decompresses its bytes, decodes
// its levels and hands the values' bytes to dict (a dictionary page: its
// bytes and entry count) or to data (a data page: its encoding, its bytes
// after the levels, how many values its header and levels state, and its
// levels; data returns how many values it decoded). Of a required or
// optional column it sets cv's present bits, and defs are the page's
// definition levels (nil for a required one); of a repeated one (maxRep >
// 0) reps and defs are the page's levels, one per item or empty row, and
// data sets what it keeps. A page whose count is not what its header and
// levels state, a page past its chunk, rows other than nrows: each is an
// ErrCorrupt. keep, when set, returns an array of capacity at least n that
// a page's uncompressed bytes are written to and that the values may point
// into (readBytes); nil, they are scratch reused page after page.
func chunkPages(ch rawChunk, c column, cv *colVals, nrows int, keep func(n int) []byte,
	dict func(data []byte, n int) error, data func(enc format.Encoding, data []byte, want int, reps, defs []byte) (int, error)) error {
	cv.read = true
	optional := c.maxDef > 0
	repeated := c.maxRep > 0
	sc := pagePool.Get().(*pageScratch)
	defer pagePool.Put(sc)
	uncompress := func(body []byte, size int64) ([]byte, error) {
		if keep == nil {
			return sc.decompress(ch.codec, body, size)
		}
		if size < 0 || size > pqfile.MaxPageSize {
			return nil, fmt.Errorf("page of %d bytes", size)
		}
		return decompressInto(keep(int(size))[:0], ch.codec, body, size)
	}
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
			b, err := uncompress(body, h.Uncompressed)
			if err == nil && h.NumValues < 0 {
				err = fmt.Errorf("%d values", h.NumValues)
			}
			if err == nil {
				err = dict(b, int(h.NumValues))
			}
			if err != nil {
				return fmt.Errorf("%w: dictionary page at %d: %v", ErrCorrupt, at, err)
			}
			continue
		case pqfile.PageData, pqfile.PageDataV2:
		default:
			continue // an index page: nothing of the rows
		}
		levels := int(h.NumValues)
		if most := nrows - rows; repeated {
			// A row of a repeated column is a level for each of its
			// items (one for a row of none): as many as a line has
			// parameters at most.
			most = min((most+1)*maxListItems, maxRepeatedLevels)
			if levels < 0 || levels > most {
				return fmt.Errorf("%w: page at %d states %d levels, at most %d", ErrCorrupt, at, h.NumValues, most)
			}
		} else if levels < 0 || levels > most {
			return fmt.Errorf("%w: page at %d states %d values, %d rows left", ErrCorrupt, at, h.NumValues, nrows-rows)
		}
		var b []byte
		var reps, defs []byte
		if h.Type == pqfile.PageData {
			if b, err = uncompress(body, h.Uncompressed); err != nil {
				return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
			}
			// v1: each level kind, when the column has it, as its length
			// (4 bytes) and its RLE/bit-packed hybrid.
			for _, lv := range []struct {
				max  int
				dst  *[]byte
				into *[]byte
				name string
			}{{c.maxRep, &reps, &sc.reps, "repetition"}, {c.maxDef, &defs, &sc.defs, "definition"}} {
				if lv.max == 0 {
					continue
				}
				if len(b) < 4 {
					return fmt.Errorf("%w: page at %d: no %s levels", ErrCorrupt, at, lv.name)
				}
				m := int(binary.LittleEndian.Uint32(b))
				if m < 0 || m > len(b)-4 {
					return fmt.Errorf("%w: page at %d: %s levels of %d bytes in %d", ErrCorrupt, at, lv.name, m, len(b)-4)
				}
				if *lv.dst, err = levelsInto(lv.into, b[4:4+m], lv.max, levels, lv.name); err != nil {
					return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
				}
				b = b[4+m:]
			}
		} else {
			if h.RepBytes < 0 || h.DefBytes < 0 || int64(h.RepBytes)+int64(h.DefBytes) > int64(len(body)) {
				return fmt.Errorf("%w: page at %d: levels of %d and %d bytes in %d", ErrCorrupt, at, h.RepBytes, h.DefBytes, len(body))
			}
			rv, lv := body[:h.RepBytes], body[h.RepBytes:h.RepBytes+h.DefBytes]
			body = body[h.RepBytes+h.DefBytes:]
			if repeated {
				if reps, err = levelsInto(&sc.reps, rv, c.maxRep, levels, "repetition"); err != nil {
					return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
				}
			}
			if optional {
				if defs, err = levelsInto(&sc.defs, lv, c.maxDef, levels, "definition"); err != nil {
					return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
				}
			}
			switch {
			case h.Compressed2:
				if b, err = uncompress(body, h.Uncompressed-int64(h.RepBytes)-int64(h.DefBytes)); err != nil {
					return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
				}
			case keep != nil:
				b = append(keep(len(body))[:0], body...) // ch.data is not the values' to keep
			default:
				b = body
			}
		}
		want := levels // values the page holds
		switch {
		case repeated:
			want = 0
			for _, d := range defs {
				if int(d) == c.maxDef {
					want++
				}
			}
		case optional:
			want = cv.setPresent(defs, rows, c.maxDef)
		}
		if h.Type == pqfile.PageDataV2 && !repeated && int(h.NumNulls) != levels-want {
			return fmt.Errorf("%w: page at %d states %d nulls, its levels %d", ErrCorrupt, at, h.NumNulls, levels-want)
		}
		got, err := data(format.Encoding(h.Encoding), b, want, reps, defs)
		if err != nil {
			return fmt.Errorf("%w: page at %d: %v", ErrCorrupt, at, err)
		}
		if got != want {
			return fmt.Errorf("%w: page at %d holds %d values, its header and levels %d", ErrCorrupt, at, got, want)
		}
		if !repeated {
			rows += levels
			continue
		}
		for _, r := range reps {
			if r == 0 {
				rows++
			}
		}
		if rows > nrows {
			return fmt.Errorf("%w: page at %d: %d rows, the row group %d", ErrCorrupt, at, rows, nrows)
		}
	}
	if rows != nrows {
		return fmt.Errorf("%w: %d of %d rows", ErrCorrupt, rows, nrows)
	}
	if optional && !repeated && cv.rankPresent() == nrows {
		cv.present, cv.rank = nil, nil // dense: value j is row j's
	}
	return nil
}

// maxListItems is the most items a row of a repeated column may average
// in a page (mining.HardMaxTokens: a line has no more parameters), and
// maxRepeatedLevels the most levels a page of one may state: a page's
// level runs are decoded only as far as its count, and its count is held
// to these, so a damaged header or run costs at most that.
const (
	maxListItems      = 1 << 16
	maxRepeatedLevels = 1 << 28
)

// slicePools hold arrays by element type and capacity class: class k
// holds arrays of capacity 1<<k (from 1,024 elements). A row group's
// integer columns, byte array offsets and indexes, and the page buffers
// byte array values point into are decoded into them and given back when
// the rows are rendered, so the next row group (or the next search)
// decodes into memory already in use, as parquet-go's page pools did.
var slicePools [4][32]sync.Pool

const minSliceClass = 10

func sliceClass(n int) int { return max(bits.Len(uint(max(n, 1)-1)), minSliceClass) }

func poolOf[T int32 | int64 | uint32 | byte]() *[32]sync.Pool {
	var z T
	switch any(z).(type) {
	case int32:
		return &slicePools[0]
	case int64:
		return &slicePools[1]
	case uint32:
		return &slicePools[2]
	}
	return &slicePools[3]
}

// getSlice returns an empty array of capacity at least n.
func getSlice[T int32 | int64 | uint32 | byte](n int) []T {
	k := sliceClass(n)
	if k >= 32 {
		return make([]T, 0, n)
	}
	if p, ok := poolOf[T]()[k].Get().(*[]T); ok {
		return (*p)[:0]
	}
	return make([]T, 0, 1<<k)
}

// putSlice keeps s for a later getSlice when its capacity is a class's.
func putSlice[T int32 | int64 | uint32 | byte](s []T) {
	c := cap(s)
	if c < 1<<minSliceClass || c&(c-1) != 0 {
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
	reps []byte
	idx  []int32
}

var pagePool = sync.Pool{New: func() any { return new(pageScratch) }}

// decompress returns body uncompressed (by codec), which must come to
// exactly size bytes. The bytes are sc's until its next decompress.
func (sc *pageScratch) decompress(codec format.CompressionCodec, body []byte, size int64) ([]byte, error) {
	if size < 0 || size > pqfile.MaxPageSize {
		return nil, fmt.Errorf("page of %d bytes", size)
	}
	if codec == format.Uncompressed {
		if int64(len(body)) != size {
			return nil, fmt.Errorf("%d bytes, its header states %d", len(body), size)
		}
		return body, nil
	}
	if int64(cap(sc.data)) < size {
		sc.data = make([]byte, 0, size)
	}
	out, err := decompressInto(sc.data[:0], codec, body, size)
	if err == nil {
		sc.data = out[:0]
	}
	return out, err
}

// decompressInto appends body uncompressed (by codec) to dst, which must
// come to exactly size bytes; an uncompressed body is copied.
func decompressInto(dst []byte, codec format.CompressionCodec, body []byte, size int64) ([]byte, error) {
	switch codec {
	case format.Uncompressed:
		if int64(len(body)) != size {
			return nil, fmt.Errorf("%d bytes, its header states %d", len(body), size)
		}
		return append(dst, body...), nil
	case format.Zstd:
		// At most size bytes: a damaged body that states or expands to
		// more stops there (pqfile.DecodeZstd).
		out, err := pqfile.DecodeZstd(dst, body, int(size))
		if errors.Is(err, pqfile.ErrTooLarge) {
			return nil, fmt.Errorf("more bytes uncompressed than its header states, %d: %w", size, err)
		}
		if err != nil {
			return nil, err
		}
		if int64(len(out)-len(dst)) != size {
			return nil, fmt.Errorf("%d bytes uncompressed, its header states %d", len(out)-len(dst), size)
		}
		return out, nil
	}
	return nil, fmt.Errorf("codec %v", codec)
}

// indexes decodes a dictionary-encoded page's indexes (a bit width, then
// the RLE/bit-packed hybrid), want of them: their runs may state no more
// than want (and a bit-packed group's padding), so a few bytes stating
// billions are refused before they are expanded. They are sc's until its
// next indexes.
func (sc *pageScratch) indexes(data []byte, want int) ([]int32, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if data[0] > 32 {
		return nil, fmt.Errorf("dictionary index width %d", data[0])
	}
	if c, err := hybridCount(data[1:], int(data[0])); err != nil || c > uint64(want)+7 {
		return nil, fmt.Errorf("dictionary indexes: runs of %d for %d values (%v)", c, want, err)
	}
	enc := rle.Encoding{BitWidth: int(data[0])}
	idx, err := enc.DecodeInt32(sc.idx[:0], data[1:])
	sc.idx = idx[:0]
	if err != nil {
		return nil, err
	}
	switch {
	case len(idx) > want && len(idx)-want < 8:
		idx = idx[:want] // bit-packed runs end in whole groups of eight
	case len(idx) < want && data[0] == 0:
		// Indexes of no bits (a dictionary of one entry) are all 0; a
		// writer may leave their runs out.
		for len(idx) < want {
			idx = append(idx, 0)
		}
		sc.idx = idx[:0]
	}
	return idx, nil
}

// levelsInto decodes n levels of the named kind (RLE/bit-packed hybrid, as
// wide as max needs) from b into *into, each at most max.
func levelsInto(into *[]byte, b []byte, max, n int, name string) ([]byte, error) {
	lv, err := hybridLevels((*into)[:0], b, bits.Len(uint(max)), n)
	if err != nil {
		return nil, err
	}
	*into = lv[:0]
	for _, d := range lv {
		if int(d) > max {
			return nil, fmt.Errorf("%s level %d above %d", name, d, max)
		}
	}
	return lv, nil
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
