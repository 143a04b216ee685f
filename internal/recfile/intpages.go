package recfile

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"

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

// intDecodable reports whether readInts decodes every page of ch: page
// kinds, codec and encodings it knows. Anything else (a writer other than
// quarry's, an encoding quarry never wrote) is left to parquet-go.
func intDecodable(ch rawChunk) bool {
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
// repeated) into cv as readTyped does, decoding its pages itself
// (chunkPages): each page's values are decoded into cv's array, and a page
// that decodes to more or fewer values than its header and levels state
// is an ErrCorrupt. intDecodable(ch) must hold. nrows is the row group's
// row count.
func readInts(ch rawChunk, c column, cv *colVals, nrows int) error {
	wide := ch.typ == format.Int64
	var dict []int64 // a dictionary page's entries
	var dictPage bool
	return chunkPages(ch, c, cv, nrows, nil, func(data []byte, n int) error {
		width := 4
		if wide {
			width = 8
		}
		if len(data) != width*n {
			return fmt.Errorf("%d bytes for %d values", len(data), n)
		}
		dict = make([]int64, n)
		for j := range dict {
			if wide {
				dict[j] = int64(binary.LittleEndian.Uint64(data[8*j:]))
			} else {
				dict[j] = int64(int32(binary.LittleEndian.Uint32(data[4*j:])))
			}
		}
		dictPage = true
		return nil
	}, func(enc format.Encoding, data []byte, want int, _, _ []byte) (int, error) {
		return cv.appendInts(enc, data, want, wide, dict, dictPage, nrows)
	})
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
		sc := pagePool.Get().(*pageScratch)
		defer pagePool.Put(sc)
		idx, err := sc.indexes(data, want)
		if err != nil || len(idx) == 0 {
			return 0, err
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
			got, _, err := deltaValues(tail, data, want+1)
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
		got, _, err := deltaValues(sc.idx[:0], data, want+1)
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
		cv.i32, cv.pooled = getSlice[int32](max(nrows, len(v))), true
	}
	cv.i32, cv.owned = append(cv.i32, v...), true
}

// grow64 is s with room for n more, sized for the row group's nrows
// values at first (one array a column, not one a page).
func (cv *colVals) grow64(s []int64, n, nrows int) []int64 {
	if s == nil {
		cv.pooled = true
		return getSlice[int64](max(nrows, n))
	}
	return slices.Grow(s, n)
}

// free gives cv's pooled arrays back (readInts' and readBytes'), as
// release gives parquet-go's pages back, and clears cv but for its column.
func (cv *colVals) free() {
	if cv.pooled {
		putSlice(cv.ints)
		putSlice(cv.i32)
		putSlice(cv.offs)
		putSlice(cv.idx)
		for _, b := range cv.bufs {
			putSlice(b)
		}
	}
	*cv = colVals{c: cv.c}
}
