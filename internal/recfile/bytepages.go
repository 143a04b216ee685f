package recfile

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/pqfile"
)

// Byte array column chunks that are not repeated (the p, b, source, kinds,
// ts_residue and more_text columns) are decoded here too, as integer ones
// are (intpages.go), and for the same reasons: every page is held to the
// count its header and levels state, its definition levels are decoded
// only as far as that count (parquet-go's RLE decoder expands a run
// whole: a few bytes of a damaged file that stated 2^40 levels cost
// gigabytes), and the values are the page's own bytes, decompressed once
// into a pooled buffer that the column keeps until its row group is
// released, not decompressed and then copied as parquet-go's
// DELTA_LENGTH_BYTE_ARRAY decoder does.

// bytesDecodable reports whether readBytes decodes every page of ch: a
// BYTE_ARRAY chunk, uncompressed or zstd, whose data pages are all PLAIN
// or DELTA_LENGTH_BYTE_ARRAY, or all dictionary indexes after a PLAIN
// dictionary page, with RLE levels. A chunk that mixes the two (a writer
// that fell back from its dictionary), or anything else quarry never
// wrote, is left to parquet-go.
func bytesDecodable(ch rawChunk) bool {
	if ch.typ != format.ByteArray {
		return false
	}
	if ch.codec != format.Uncompressed && ch.codec != format.Zstd {
		return false
	}
	var dict, plain bool
	for pos := 0; pos < len(ch.data); {
		h, n, err := pqfile.ReadPageHeader(ch.data[pos:])
		if err != nil {
			return true // readBytes reports it
		}
		switch h.Type {
		case pqfile.PageDictionary:
			if h.Encoding != int32(format.Plain) && h.Encoding != int32(format.PlainDictionary) {
				return false
			}
			dict = true
		case pqfile.PageData, pqfile.PageDataV2:
			switch format.Encoding(h.Encoding) {
			case format.Plain, format.DeltaLengthByteArray:
				plain = true
			case format.RLEDictionary, format.PlainDictionary:
				dict = true
			default:
				return false
			}
			if h.Type == pqfile.PageData && h.DefEncoding != int32(format.RLE) {
				return false // BIT_PACKED levels (deprecated), or none Parquet defines
			}
		}
		pos += n + int(h.Compressed)
	}
	return !(dict && plain)
}

// readBytes reads a byte array column chunk (required or optional, not
// repeated) into cv as readTyped does: value j is data[offs[j]:offs[j+1]],
// or dict[idx[j]] for a dictionary-encoded chunk. Each page is
// decompressed into an array of cv's own (bufs, from the pools, given back
// by free), which the values point into. bytesDecodable(ch) must hold.
func readBytes(ch rawChunk, c column, cv *colVals, nrows int) error {
	cv.pooled = true
	keep := func(n int) []byte {
		b := getSlice[byte](n)
		cv.bufs = append(cv.bufs, b)
		return b
	}
	return chunkPages(ch, c, cv, nrows, keep, cv.setDict, func(enc format.Encoding, data []byte, want int, _, _ []byte) (int, error) {
		return cv.appendBytes(enc, data, want, nrows)
	})
}

// setDict takes a PLAIN dictionary page's n entries (data, an array
// readBytes keeps) as cv's dictionary.
func (cv *colVals) setDict(data []byte, n int) error {
	if cv.dict != nil {
		return fmt.Errorf("a second dictionary page")
	}
	if n > len(data)/4 {
		return fmt.Errorf("%d entries in %d bytes", n, len(data))
	}
	dict := make([][]byte, n)
	for j := range dict {
		v, rest, ok := plainValue(data)
		if !ok {
			return fmt.Errorf("entry %d of %d past the page", j, n)
		}
		dict[j], data = v, rest
	}
	if len(data) != 0 {
		return fmt.Errorf("%d bytes after %d entries", len(data), n)
	}
	cv.dict = dict
	return nil
}

// plainValue cuts the first PLAIN byte array value (a 4-byte length, then
// the bytes) off b.
func plainValue(b []byte) (v, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, b, false
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, b, false
	}
	return b[4 : 4+n : 4+n], b[4+n:], true
}

// appendBytes decodes a data page's values (data, after its levels, an
// array readBytes keeps) in encoding enc and appends them to cv. It
// returns how many the page held, at most want+1: past want it stops
// (the caller reports the difference).
func (cv *colVals) appendBytes(enc format.Encoding, data []byte, want, nrows int) (int, error) {
	sc := pagePool.Get().(*pageScratch)
	defer pagePool.Put(sc)
	switch enc {
	case format.RLEDictionary, format.PlainDictionary:
		if cv.dict == nil {
			return 0, fmt.Errorf("dictionary indexes without a dictionary page")
		}
		idx, err := sc.indexes(data, want)
		if err != nil || len(idx) == 0 {
			return 0, err
		}
		for _, x := range idx {
			if x < 0 || int(x) >= len(cv.dict) {
				return 0, fmt.Errorf("dictionary index %d of %d", x, len(cv.dict))
			}
		}
		if cv.idx == nil {
			cv.idx = getSlice[int32](max(nrows, len(idx)))
		}
		cv.idx = append(cv.idx, idx...)
		return len(idx), nil
	case format.Plain, format.DeltaLengthByteArray:
	default:
		return 0, fmt.Errorf("encoding %v", enc)
	}
	if cv.offs == nil {
		cv.offs = append(getSlice[uint32](nrows+1), 0)
	}
	base := len(cv.data)
	if base+len(data) > math.MaxUint32 {
		return 0, fmt.Errorf("%d bytes of values in one row group", base+len(data))
	}
	var vals []byte // the page's values, one after another
	got := 0
	if enc == format.Plain {
		// Each value's length is cut out, in place: the values close up.
		w := 0
		for rest := data; len(rest) > 0 && got <= want; got++ {
			v, r, ok := plainValue(rest)
			if !ok {
				return 0, fmt.Errorf("value %d past the page", got)
			}
			w += copy(data[w:], v)
			cv.offs = append(cv.offs, uint32(base+w))
			rest = r
		}
		vals = data[:w]
	} else {
		lens, rest, err := deltaValues(sc.idx[:0], data, want+1)
		sc.idx = lens[:0]
		if err != nil {
			return 0, fmt.Errorf("lengths: %v", err)
		}
		at := 0
		for _, n := range lens {
			if n < 0 || int(n) > len(rest)-at {
				return 0, fmt.Errorf("a value of %d bytes, %d left", n, len(rest)-at)
			}
			at += int(n)
			cv.offs = append(cv.offs, uint32(base+at))
		}
		if at != len(rest) {
			return 0, fmt.Errorf("%d bytes after the values", len(rest)-at)
		}
		got, vals = len(lens), rest
	}
	if base == 0 && cv.data == nil {
		cv.data = vals
	} else {
		// A later page: behind the earlier ones (the first page's array
		// past its values is free, a later page's values are copied).
		cv.data = append(cv.data, vals...)
	}
	return got, nil
}

// deltaValues decodes a DELTA_BINARY_PACKED run of int32 or int64 values
// (a DELTA_LENGTH_BYTE_ARRAY page's lengths, an integer page's values)
// into dst[:0] and returns them and the bytes after the run. A run that
// states more than most values is an error before anything is decoded,
// and one whose miniblocks are cut short is an error: every value comes
// from the run (parquet-go's decoder returns the count the run's header
// states, the missing values whatever its buffer held before: FuzzDecode's
// a7d349699db18e72, whose record indexes differed between two decodes).
// Values wrap at T's width, as the encoder's deltas did.
func deltaValues[T int32 | int64](dst []T, b []byte, most int) ([]T, []byte, error) {
	var hdr [3]uint64
	for i := range hdr {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, nil, fmt.Errorf("header cut short")
		}
		hdr[i], b = v, b[k:]
	}
	block, minis, total := hdr[0], hdr[1], hdr[2]
	first, k := binary.Varint(b)
	if k <= 0 {
		return nil, nil, fmt.Errorf("header cut short")
	}
	b = b[k:]
	if block == 0 || block%128 != 0 || block > 1<<16 || minis == 0 || block%minis != 0 || (block/minis)%32 != 0 {
		return nil, nil, fmt.Errorf("blocks of %d values in %d miniblocks", block, minis)
	}
	if total > uint64(most) {
		return nil, nil, fmt.Errorf("%d values, the page holds %d", total, most)
	}
	// Each block of values after the first takes a minimum and minis
	// widths at least: a run that states more than its bytes can hold is
	// refused before its values are allocated.
	if total > 1 && (total-2)/block+1 > uint64(len(b))/(1+minis) {
		return nil, nil, fmt.Errorf("%d values in %d bytes", total, len(b))
	}
	dst = dst[:0]
	if total == 0 {
		return dst, b, nil
	}
	per := int(block / minis)
	last := uint64(first)
	dst = append(slices.Grow(dst, int(total)), T(last))
	for uint64(len(dst)) < total {
		mn, k := binary.Varint(b)
		if k <= 0 || uint64(len(b)-k) < minis {
			return nil, nil, fmt.Errorf("block header cut short")
		}
		widths := b[k : k+int(minis)]
		b = b[k+int(minis):]
		for _, w := range widths {
			if uint64(len(dst)) == total {
				break // the miniblocks no value needs hold no bytes
			}
			if w > 64 {
				return nil, nil, fmt.Errorf("a miniblock %d bits wide", w)
			}
			size := per * int(w) / 8
			if len(b) < size {
				return nil, nil, fmt.Errorf("a miniblock past the page")
			}
			n := min(per, int(total)-len(dst))
			at := len(dst)
			dst = dst[:at+n]
			out, d := dst[at:], uint64(mn)
			switch w {
			case 0:
				for i := range out {
					last += d
					out[i] = T(last)
				}
			case 8: // quarry's widths are whole bytes (bytedelta.go)
				for i, x := range b[:n] {
					last += d + uint64(x)
					out[i] = T(last)
				}
			case 16:
				for i := range out {
					last += d + uint64(binary.LittleEndian.Uint16(b[2*i:]))
					out[i] = T(last)
				}
			default:
				for i := range out {
					last += d + unpack(b[:size], uint(i)*uint(w), uint(w))
					out[i] = T(last)
				}
			}
			b = b[size:]
		}
	}
	return dst, b, nil
}

// unpack reads the w-bit value (w <= 64) at bit of b, low bits first.
func unpack(b []byte, bit, w uint) uint64 {
	if w == 0 {
		return 0
	}
	at, sh := bit/8, bit%8
	if w <= 56 && at+8 <= uint(len(b)) {
		return binary.LittleEndian.Uint64(b[at:]) >> sh & (1<<w - 1)
	}
	var v uint64
	for got := uint(0); got < w; {
		at, sh := bit/8, bit%8
		take := min(8-sh, w-got)
		v |= uint64(b[at]>>sh) & (1<<take - 1) << got
		got += take
		bit += take
	}
	return v
}

// readLists reads a repeated byte array column chunk (more, attrs) into
// cv's lists as readRepeated does, decoding its pages itself: a row starts
// at each repetition level 0, and an item is a level at the column's
// maximum definition level, the page's next value. The rows skip marks
// (nil: none) are left out. bytesDecodable(ch) must hold.
func readLists(ch rawChunk, c column, cv *colVals, nrows int, skip []bool) error {
	cv.pooled = true
	cv.present = make([]uint64, (nrows+63)>>6)
	keep := func(n int) []byte {
		b := getSlice[byte](n)
		cv.bufs = append(cv.bufs, b)
		return b
	}
	var vals colVals // the values, of every page so far
	defer func() {
		putSlice(vals.offs)
		putSlice(vals.idx)
	}()
	row, last := -1, -1 // last: the row of lists' last entry
	err := chunkPages(ch, c, cv, nrows, keep, vals.setDict, func(enc format.Encoding, data []byte, want int, reps, defs []byte) (int, error) {
		v := vals.count()
		got, err := vals.appendBytes(enc, data, want, 0)
		if err != nil || got != want {
			return got, err
		}
		for k, d := range defs {
			if reps[k] == 0 {
				row++
			}
			if row < 0 {
				return 0, fmt.Errorf("a repeated column's first level continues a row")
			}
			if row >= nrows {
				return 0, fmt.Errorf("more rows than the row group")
			}
			if int(d) != c.maxDef {
				continue
			}
			item := vals.str(v)
			v++
			if skip != nil && skip[row] {
				continue
			}
			cv.addItem(row, &last, item)
		}
		return got, nil
	})
	return err
}
