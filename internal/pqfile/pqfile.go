// Package pqfile opens Parquet files that may be damaged without letting
// parquet-go allocate what the damage claims.
//
// parquet-go allocates a footer's stated length before it reads it, and
// its codecs allocate a page header's stated uncompressed size before they
// decode, so a flipped byte can ask for gigabytes. Open checks the trailer
// (magic, and a footer length that fits in the file) and walks the footer
// (no string or list longer than the footer) before parquet-go sees the
// file, and refuses column chunks compressed with a codec the
// caller does not accept. A panic of parquet-go while it opens the file
// is an ErrCorrupt. Every reader of records, templates and Delta
// checkpoint files opens them here. For a file in memory, CheckPages
// walks every page header and CheckBodies every compressed body before
// parquet-go decodes them; DecodeZstd is the bounded zstd decoding that
// quarry's own page decoding uses.
package pqfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// ErrCorrupt is wrapped by every error for a file that is not a readable
// Parquet file: a bad trailer, a footer that does not parse, a refused codec.
var ErrCorrupt = errors.New("corrupt Parquet file")

// Open opens the Parquet file of size bytes at r. codecs lists the
// compression codecs its column chunks may use; any other is refused.
func Open(r io.ReaderAt, size int64, codecs []format.CompressionCodec, opts ...parquet.FileOption) (f *parquet.File, err error) {
	if size < 12 {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrCorrupt, size)
	}
	var trailer [8]byte
	if _, err := r.ReadAt(trailer[:], size-8); err != nil {
		return nil, fmt.Errorf("read Parquet trailer: %w", err)
	}
	if string(trailer[4:]) != "PAR1" {
		return nil, fmt.Errorf("%w: no magic at the end", ErrCorrupt)
	}
	n := int64(binary.LittleEndian.Uint32(trailer[:4]))
	if n > size-12 {
		return nil, fmt.Errorf("%w: footer of %d bytes in a file of %d", ErrCorrupt, n, size)
	}
	tail := make([]byte, n+8)
	if _, err := r.ReadAt(tail, size-8-n); err != nil {
		return nil, fmt.Errorf("read Parquet footer: %w", err)
	}
	if err := checkFooter(tail[:n]); err != nil {
		return nil, err
	}
	// parquet-go reads the trailer and footer again: from memory.
	r = &tailReader{ReaderAt: r, off: size - 8 - n, tail: tail}
	defer func() {
		// parquet-go panics on some damaged schemas (a group whose child
		// count runs past the schema, seen by FuzzReadCheckpoint).
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	f, err = parquet.OpenFile(r, size, opts...)
	if err != nil {
		return nil, err // a read error or a footer that does not parse: the caller knows which its reader makes
	}
	for i, rg := range f.Metadata().RowGroups {
		for j, c := range rg.Columns {
			if k := c.MetaData.Codec; !slices.Contains(codecs, k) {
				return nil, fmt.Errorf("%w: row group %d column %d compressed with %v", ErrCorrupt, i, j, k)
			}
		}
	}
	return f, nil
}

// tailReader serves reads within the file's last bytes (footer and
// trailer) from memory and the rest from the file.
type tailReader struct {
	io.ReaderAt
	off  int64
	tail []byte
}

func (t *tailReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= t.off && off+int64(len(p)) <= t.off+int64(len(t.tail)) {
		return copy(p, t.tail[off-t.off:]), nil
	}
	return t.ReaderAt.ReadAt(p, off)
}

// MaxPageSize is the most a page may state it holds uncompressed: quarry's
// pages hold at most a few megabytes, other writers' about one.
const MaxPageSize = 256 << 20

// CheckPages walks the page headers of every column chunk of f, whose
// bytes are data (a file already in memory), and refuses a header whose
// strings, lists or sizes run past its chunk, or which states more than
// maxPage bytes uncompressed (MaxPageSize for most callers): parquet-go
// allocates both before it decodes.
// Readers that fetch only some column chunks check those (CheckChunk).
func CheckPages(data []byte, f *parquet.File, maxPage int64) error {
	size := int64(len(data))
	for i, rg := range f.Metadata().RowGroups {
		for j, c := range rg.Columns {
			start, end, ok := ChunkSpan(&c.MetaData, size)
			if !ok {
				return fmt.Errorf("%w: row group %d column %d: chunk at %d of %d bytes in a file of %d", ErrCorrupt, i, j, start, c.MetaData.TotalCompressedSize, size)
			}
			if err := CheckChunk(data[start:end], start, maxPage); err != nil {
				return fmt.Errorf("row group %d column %d: %w", i, j, err)
			}
		}
	}
	return nil
}

// ChunkSpan is where a column chunk's bytes lie in its file: from its
// first page (its dictionary page, when that comes first) for
// TotalCompressedSize bytes. ok is false when that is not within a file of
// size bytes.
func ChunkSpan(m *format.ColumnMetaData, size int64) (start, end int64, ok bool) {
	start = m.DataPageOffset
	if d := m.DictionaryPageOffset; d > 0 && d < start {
		start = d
	}
	end = start + m.TotalCompressedSize
	return start, end, start >= 0 && m.TotalCompressedSize >= 0 && end <= size && end >= start
}

// CheckChunk walks the page headers of one column chunk's bytes, which
// start at offset at of the file, as CheckPages does: for readers that
// fetch some column chunks of a file and check those.
func CheckChunk(chunk []byte, at, maxPage int64) error {
	for pos := 0; pos < len(chunk); {
		h, n, err := ReadPageHeader(chunk[pos:])
		uncompressed, compressed := h.Uncompressed, h.Compressed
		if err != nil {
			return fmt.Errorf("%w: page header at %d: %v", ErrCorrupt, at+int64(pos), err)
		}
		if uncompressed > maxPage || compressed > int64(len(chunk)-pos-n) {
			return fmt.Errorf("%w: page at %d states %d bytes (%d compressed)", ErrCorrupt, at+int64(pos), uncompressed, compressed)
		}
		pos += n + int(compressed)
	}
	return nil
}
