package pqfile

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/snappy"
	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// ErrTooLarge is wrapped by DecodeZstd's error for a body that decodes to
// more than its bound.
var ErrTooLarge = errors.New("compressed data decodes past its bound")

// A zstd block expands up to 32,768-fold (an RLE block: 4 bytes, 128 KB of
// one byte) and a frame need not state its size, so a few KB of a damaged
// page could make a decoder that checks the size only afterwards allocate
// gigabytes first. capDecoders decode into at most dst's capacity.
var capDecoders = sync.Pool{New: func() any {
	d, err := kzstd.NewReader(nil, kzstd.WithDecoderConcurrency(1), kzstd.WithDecodeAllCapLimit(true))
	if err != nil {
		panic(err) // constant options
	}
	return d
}}

// overAlloc is the room past a block the decoder's fast copies may write
// into (klauspost's compressedBlockOverAlloc): without it, a destination
// of exactly the page's size takes the slower safe copies for its last
// block, which is most pages' only one.
const overAlloc = 32

// DecodeZstd appends src decoded to dst, n bytes at most: a frame that
// states more, or whose blocks decode to more, is an ErrTooLarge by the
// time n is passed, not an allocation of what it states. The decoder
// checks after each block, and the block that crosses n may grow its
// buffer first: at most about 2n+128 KB are allocated. dst's capacity is
// grown to len(dst)+n+overAlloc first, where it is less; the result keeps
// dst's whole capacity (a caller reusing the array keeps it for the next,
// larger page).
func DecodeZstd(dst, src []byte, n int) ([]byte, error) {
	dst = slices.Grow(dst, n+overAlloc)
	d := capDecoders.Get().(*kzstd.Decoder)
	out, err := d.DecodeAll(src, dst[:len(dst):len(dst)+n+overAlloc])
	capDecoders.Put(d)
	if err == nil && len(out)-len(dst) > n {
		err = kzstd.ErrDecoderSizeExceeded
	}
	if errors.Is(err, kzstd.ErrDecoderSizeExceeded) || errors.Is(err, kzstd.ErrFrameSizeExceeded) {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, n)
	}
	if err == nil && len(out) > 0 && &out[0] == &dst[:1][0] {
		out = dst[:len(out)] // in dst's array, as the cap limit keeps it
	}
	return out, err
}

// CheckBodies checks, for every page of f's column chunks (f is data, a
// file in memory whose page headers CheckPages has checked), that a zstd or
// snappy body decodes to no more than its header states, before
// parquet-go decodes it whole into a buffer it grows as it goes. A zstd
// body that is one frame stating exactly that size needs no decoding here:
// the decoder stops a frame at the size it states. Any other zstd body is
// decoded to at most the page's size, into scratch; a snappy body states
// its length first, which must be the page's.
func CheckBodies(data []byte, f *parquet.File) error {
	var scratch []byte
	for i, rg := range f.Metadata().RowGroups {
		for j, c := range rg.Columns {
			m := c.MetaData
			if m.Codec != format.Zstd && m.Codec != format.Snappy {
				continue
			}
			start, end, ok := ChunkSpan(&m, int64(len(data)))
			if !ok {
				return fmt.Errorf("%w: row group %d column %d: chunk outside the file", ErrCorrupt, i, j)
			}
			chunk := data[start:end]
			for pos := 0; pos < len(chunk); {
				h, n, err := ReadPageHeader(chunk[pos:])
				if err != nil || h.Compressed > int64(len(chunk)-pos-n) || h.Uncompressed > MaxPageSize {
					return fmt.Errorf("%w: row group %d column %d: page header at %d", ErrCorrupt, i, j, start+int64(pos))
				}
				body, size := chunk[pos+n:pos+n+int(h.Compressed)], h.Uncompressed
				pos += n + int(h.Compressed)
				if h.Type == PageDataV2 {
					if !h.Compressed2 {
						continue
					}
					lv := int64(h.DefBytes) + int64(h.RepBytes)
					if h.DefBytes < 0 || h.RepBytes < 0 || lv > int64(len(body)) || lv > size {
						return fmt.Errorf("%w: row group %d column %d: page at %d: levels of %d bytes", ErrCorrupt, i, j, start+int64(pos), lv)
					}
					body, size = body[lv:], size-lv
				}
				if m.Codec == format.Snappy {
					if l, err := snappy.DecodedLen(body); err != nil || int64(l) != size {
						return fmt.Errorf("%w: row group %d column %d: snappy page states %d bytes, its header %d", ErrCorrupt, i, j, l, size)
					}
					continue
				}
				if oneFrameOf(body, size) {
					continue
				}
				out, err := DecodeZstd(scratch[:0], body, int(size))
				if err != nil || int64(len(out)) != size {
					return fmt.Errorf("%w: row group %d column %d: zstd page of %d bytes (its header states %d): %v", ErrCorrupt, i, j, len(out), size, err)
				}
				scratch = out[:0]
			}
		}
	}
	return nil
}

// oneFrameOf reports whether body is one zstd frame that states its
// content size as size, walking its block headers without decoding them.
func oneFrameOf(body []byte, size int64) bool {
	var h kzstd.Header
	if err := h.Decode(body); err != nil || h.Skippable || !h.HasFCS || h.FrameContentSize != uint64(size) || len(body) < 5 {
		return false
	}
	pos := h.HeaderSize
	for {
		if pos+3 > len(body) {
			return false
		}
		bh := uint32(body[pos]) | uint32(body[pos+1])<<8 | uint32(body[pos+2])<<16
		pos += 3
		switch bh >> 1 & 3 {
		case 0, 2: // raw, compressed: that many bytes follow
			pos += int(bh >> 3)
		case 1: // RLE: one byte
			pos++
		default:
			return false
		}
		if bh&1 != 0 {
			break
		}
	}
	if body[4]&4 != 0 { // content checksum
		pos += 4
	}
	return pos == len(body)
}
