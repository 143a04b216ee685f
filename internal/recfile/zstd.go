package recfile

import (
	"fmt"
	"runtime"
	"sync"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/quarrylake/quarry/internal/pqfile"
)

// zstdCodec is parquet-go's zstd codec (same encoder options, so the same
// bytes) with its encoders kept in a free list instead of a sync.Pool. The
// pool is emptied by every garbage collection, and an encode of a few MB
// of garbage runs one or more: each file then built a new encoder, its
// match tables and its history buffer (about 4 MB allocated and cleared
// per file at level default, 20% of the bytes BenchmarkEncodeV3
// allocated). Up to GOMAXPROCS idle encoders are kept. Decoding is
// parquet-go's.
type zstdCodec struct {
	zstd.Codec
	free chan *kzstd.Encoder
}

func newZstdCodec(l zstd.Level) *zstdCodec {
	return &zstdCodec{Codec: zstd.Codec{Level: l}, free: make(chan *kzstd.Encoder, runtime.GOMAXPROCS(0))}
}

// Encode compresses src into dst as one zstd frame, as zstd.Codec does.
func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	var e *kzstd.Encoder
	select {
	case e = <-c.free:
	default:
		var err error
		e, err = kzstd.NewWriter(nil,
			kzstd.WithEncoderConcurrency(zstd.DefaultConcurrency),
			kzstd.WithEncoderLevel(c.Level),
			kzstd.WithZeroFrames(true),
			kzstd.WithEncoderCRC(false),
		)
		if err != nil {
			return dst, err
		}
	}
	dst = e.EncodeAll(src, dst[:0])
	select {
	case c.free <- e:
	default:
	}
	return dst, nil
}

// Zstd is the zstd codec at the default level (parquet-go's parquet.Zstd
// writes the same bytes) whose encoders outlive garbage collections; for
// the other Parquet files the pipeline writes per flush.
var Zstd compress.Codec = codec(zstd.SpeedDefault)

// smallerCodec compresses with both its codecs and keeps the smaller
// frame: zstd's best level is not always smaller than its default (on a
// few KB it lost by up to 1% in TestSizeLoghub). Both write zstd frames,
// so any zstd decoder reads either. For WithHighCompression.
type smallerCodec struct {
	*zstdCodec
	other *zstdCodec
	mu    sync.Mutex
	buf   []byte
}

func (c *smallerCodec) Encode(dst, src []byte) ([]byte, error) {
	dst, err := c.zstdCodec.Encode(dst, src)
	if err != nil {
		return dst, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf, err = c.other.Encode(c.buf, src)
	if err != nil {
		return dst, err
	}
	if len(c.buf) < len(dst) {
		dst = append(dst[:0], c.buf...)
	}
	return dst, nil
}

// highCodec is WithHighCompression's codec: the smaller of zstd best and
// zstd default.
var highCodec = &smallerCodec{zstdCodec: codec(zstd.SpeedBestCompression), other: codec(zstd.SpeedDefault)}

// ZstdHigh is highCodec for the pipeline's other small Parquet files that
// are written once and kept: the templates files (a few KB, where best's
// CPU is a few hundred microseconds; 40,777 to 39,870 bytes over the
// Loghub datasets, TestSizeTemplates).
var ZstdHigh compress.Codec = highCodec

// ZstdBetter is zstd's better level, for the pipeline's templates files
// written by a busy encoder: best's match tables, cold between flushes,
// cost more than the bytes it saves there.
var ZstdBetter compress.Codec = codec(zstd.SpeedBetterCompression)

// decodeSummary decodes a footer value's frame (summaries, pairs): into
// the size its header states, at most maxSummary bytes; a frame that does
// not state it into at most smallFrame bytes. klauspost's encoder leaves
// the size out of a frame of under 256 bytes only.
func decodeSummary(src []byte) ([]byte, error) {
	var h kzstd.Header
	if err := h.Decode(src); err != nil || !h.HasFCS {
		return pqfile.DecodeZstd(nil, src, smallFrame)
	}
	if h.FrameContentSize > maxSummary {
		return nil, fmt.Errorf("%w: states %d bytes, more than %d", pqfile.ErrTooLarge, h.FrameContentSize, maxSummary)
	}
	return pqfile.DecodeZstd(nil, src, int(h.FrameContentSize))
}

// smallFrame bounds the decoding of a footer value's frame that does not
// state its size.
const smallFrame = 64 << 10
