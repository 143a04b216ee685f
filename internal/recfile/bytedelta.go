package recfile

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/parquet-go/parquet-go/encoding/delta"
)

// Byte-wide DELTA_BINARY_PACKED.
//
// DELTA_BINARY_PACKED (Parquet's encodings spec) stores a block of 128
// deltas as their minimum and four miniblocks of 32 values, each packed at
// the bit width its largest value needs. Packed at 5 or 11 bits, the
// values straddle bytes, and zstd, which models bytes, finds little to
// take in them: a column of record indexes or string lengths packs to what
// zstd then barely shrinks. The spec lets a writer give a miniblock any
// width its values fit in, and every reader unpacks the width it is given,
// so deltaInts rounds each miniblock's width up to whole bytes (0 stays 0:
// a miniblock of equal deltas costs nothing): the packed bytes are then
// the values themselves, byte by byte, and zstd's entropy coding takes
// them to about their information. The records harness's 11 Loghub
// files, at zstd's best level, 241,417 to 232,808 bytes, every one smaller
// (Linux's record_index 995 to 812); docs/benchmarks.md, "Lake size:
// byte-wide delta miniblocks".
//
// deltaInts writes INT32 and INT64 columns; deltaLength writes BYTE_ARRAY
// columns as DELTA_LENGTH_BYTE_ARRAY, its lengths through deltaInts.
// Decoding is parquet-go's: the bytes are standard.
type deltaInts struct{ delta.BinaryPackedEncoding }

type deltaLength struct{ delta.LengthByteArrayEncoding }

// The encodings the writer uses (they hold no state).
var (
	deltaEnc = &deltaInts{}
	deltaLen = &deltaLength{}
)

// The block shape every parquet-go and parquet-java writer uses.
const (
	deltaBlock     = 128
	deltaMiniBlock = 32
	deltaMiniCount = deltaBlock / deltaMiniBlock
)

func (deltaInts) EncodeInt32(dst []byte, src []int32) ([]byte, error) {
	// INT32 deltas wrap at 32 bits, as the spec's readers compute them.
	return encodeDeltas(dst, src, 1<<32-1), nil
}

func (deltaInts) EncodeInt64(dst []byte, src []int64) ([]byte, error) {
	return encodeDeltas(dst, src, 1<<64-1), nil
}

// encodeDeltas writes src as a DELTA_BINARY_PACKED page, its deltas
// computed in T (so they wrap as T's) and each, less its block's minimum,
// kept to the bits of mask (T's width).
func encodeDeltas[T int32 | int64](dst []byte, src []T, mask uint64) []byte {
	var d [deltaBlock]uint64
	var first int64
	if len(src) > 0 {
		first = int64(src[0])
	}
	dst = deltaHeader(dst[:0], len(src), first)
	for s := 1; s < len(src); s += deltaBlock {
		blk := src[s-1 : min(s+deltaBlock, len(src))]
		mn := blk[1] - blk[0]
		for i := 1; i < len(blk); i++ {
			mn = min(mn, blk[i]-blk[i-1])
		}
		for i := 1; i < len(blk); i++ {
			d[i-1] = uint64(blk[i]-blk[i-1]-mn) & mask
		}
		dst = deltaBlockBytes(dst, int64(mn), d[:len(blk)-1])
	}
	return dst
}

// deltaHeader appends the page's header: block size, miniblocks a block,
// the number of values and the first value (zigzag).
func deltaHeader(dst []byte, n int, first int64) []byte {
	dst = binary.AppendUvarint(dst, deltaBlock)
	dst = binary.AppendUvarint(dst, deltaMiniCount)
	dst = binary.AppendUvarint(dst, uint64(n))
	return binary.AppendVarint(dst, first)
}

// deltaBlockBytes appends one block: its minimum delta (zigzag), the
// miniblocks' widths in bytes times 8, and the miniblocks in use, each of
// 32 values little-endian at its width (the last padded with zeros). d are
// the block's deltas less the minimum, at most deltaBlock of them.
func deltaBlockBytes(dst []byte, mn int64, d []uint64) []byte {
	dst = binary.AppendVarint(dst, mn)
	var widths [deltaMiniCount]int
	for m := range deltaMiniCount {
		var or uint64
		for _, v := range d[min(m*deltaMiniBlock, len(d)):min((m+1)*deltaMiniBlock, len(d))] {
			or |= v
		}
		widths[m] = (bits.Len64(or) + 7) / 8
		dst = append(dst, byte(8*widths[m]))
	}
	for m := range deltaMiniCount {
		lo := m * deltaMiniBlock
		if lo >= len(d) {
			break // unused miniblocks have no body
		}
		w := widths[m]
		if w == 0 {
			continue
		}
		// Each value's w low bytes, little-endian, then zeros for the
		// padding of a last miniblock.
		mini := d[lo:min(lo+deltaMiniBlock, len(d))]
		n := len(dst)
		dst = slices.Grow(dst, w*deltaMiniBlock)[:n+w*deltaMiniBlock]
		out := dst[n:]
		switch w {
		case 1:
			for i, v := range mini {
				out[i] = byte(v)
			}
		case 2:
			for i, v := range mini {
				binary.LittleEndian.PutUint16(out[2*i:], uint16(v))
			}
		case 4:
			for i, v := range mini {
				binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
			}
		case 8:
			for i, v := range mini {
				binary.LittleEndian.PutUint64(out[8*i:], v)
			}
		default:
			for i, v := range mini {
				for k := range w {
					out[w*i+k] = byte(v >> (8 * k))
				}
			}
		}
		clear(out[w*len(mini):])
	}
	return dst
}

func (deltaLength) EncodeByteArray(dst []byte, src []byte, offsets []uint32) ([]byte, error) {
	if len(offsets) == 0 {
		return deltaInts{}.EncodeInt32(dst, nil)
	}
	lengths := make([]int32, len(offsets)-1)
	for i := range lengths {
		n := offsets[i+1] - offsets[i]
		if n > 1<<31-1 {
			return dst, fmt.Errorf("delta length: a value of %d bytes", n)
		}
		lengths[i] = int32(n)
	}
	dst, err := deltaInts{}.EncodeInt32(dst, lengths)
	if err != nil {
		return dst, err
	}
	return append(dst, src[offsets[0]:offsets[len(offsets)-1]]...), nil
}
