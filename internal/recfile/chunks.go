package recfile

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/pqfile"
)

// source is where a row group's column chunks are read from when the file
// was opened at a ReaderAt (OpenAt): the chunks a read needs are fetched
// first, each run of adjacent ones with one ReadAt, and their pages are read
// from memory. The zero source reads through the file's own reader.
type source struct {
	r    io.ReaderAt
	size int64
	meta *format.RowGroup // the row group's metadata (offsets and sizes)
	// arena, when not nil, is the memory the chunks are fetched into,
	// reused by the next pagesOf: parquet-go copies what it reads from a
	// chunk into pages of its own, so the fetched bytes are dead once the
	// chunks' pages are read.
	arena *[]byte
}

// arenas keeps the chunk memory of finished decodes (source.arena).
var arenas = sync.Pool{New: func() any { return new([]byte) }}

// chunkGap is the most bytes between two needed column chunks that are
// still fetched with one read (reading a gap costs less than a request).
const chunkGap = 16 << 10

// memAt serves ReadAt of absolute file offsets from bytes read at off.
type memAt struct {
	off  int64
	data []byte
}

func (m *memAt) ReadAt(p []byte, off int64) (int, error) {
	if off < m.off || off > m.off+int64(len(m.data)) {
		return 0, fmt.Errorf("%w: read at %d outside the fetched %d..%d", ErrCorrupt, off, m.off, m.off+int64(len(m.data)))
	}
	n := copy(p, m.data[off-m.off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// chunkRange is a column chunk's bytes (dictionary page first) in the file
// (pqfile.ChunkSpan; its callers check the range against the file).
func chunkRange(c *format.ColumnChunk) (int64, int64) {
	start, end, _ := pqfile.ChunkSpan(&c.MetaData, math.MaxInt64)
	return start, end
}

// pagesOf returns a function that opens the pages of column chunk ci of
// rg. With a source it first fetches the chunks need selects (every one
// when need is nil), merged into runs; without one it opens them through
// the file's reader.
//
// With a source, raw returns an integer column chunk's bytes for readInts
// (false for another column, or without a source).
func (s source) pagesOf(rg parquet.RowGroup, need []bool) (pages func(ci int) parquet.Pages, raw func(ci int) (rawChunk, bool), err error) {
	chunks := rg.ColumnChunks()
	if s.r == nil || s.meta == nil || len(s.meta.Columns) != len(chunks) {
		return func(ci int) parquet.Pages { return chunks[ci].Pages() }, func(int) (rawChunk, bool) { return rawChunk{}, false }, nil
	}
	type want struct {
		ci         int
		start, end int64
	}
	var ws []want
	for ci := range chunks {
		if need != nil && !need[ci] {
			continue
		}
		start, end := chunkRange(&s.meta.Columns[ci])
		if start < 0 || end < start || end > s.size {
			return nil, nil, fmt.Errorf("%w: column chunk %d at %d..%d of a file of %d bytes", ErrCorrupt, ci, start, end, s.size)
		}
		ws = append(ws, want{ci, start, end})
	}
	slices.SortFunc(ws, func(a, b want) int { return int(a.start - b.start) })
	// The runs of adjacent chunks, each fetched with one read.
	type run struct{ i, j int }
	var runs []run
	var total int64
	for i := 0; i < len(ws); {
		j, end := i+1, ws[i].end
		for j < len(ws) && ws[j].start <= end+chunkGap {
			end = max(end, ws[j].end)
			j++
		}
		runs = append(runs, run{i, j})
		total += end - ws[i].start
		i = j
	}
	var mem []byte
	if s.arena != nil {
		if int64(cap(*s.arena)) < total {
			*s.arena = make([]byte, total)
		}
		mem = (*s.arena)[:total]
	} else {
		mem = make([]byte, total)
	}
	readers := make([]io.ReaderAt, len(chunks))
	raws := make([][]byte, len(chunks))
	for _, ru := range runs {
		i, j, end := ru.i, ru.j, ws[ru.i].end
		for _, w := range ws[i:j] {
			end = max(end, w.end)
		}
		m := &memAt{off: ws[i].start, data: mem[: end-ws[i].start : end-ws[i].start]}
		mem = mem[end-ws[i].start:]
		if n, err := s.r.ReadAt(m.data, m.off); n < len(m.data) && !(err == nil || errors.Is(err, io.EOF)) {
			return nil, nil, fmt.Errorf("read column chunks at %d..%d: %w", m.off, end, err)
		} else if n < len(m.data) {
			return nil, nil, fmt.Errorf("%w: column chunks at %d..%d past the end", ErrCorrupt, m.off, end)
		}
		for _, w := range ws[i:j] {
			// parquet-go allocates what a page header states: check the
			// headers of the chunks read before it sees them.
			if err := pqfile.CheckChunk(m.data[w.start-m.off:w.end-m.off], w.start, pqfile.MaxPageSize); err != nil {
				return nil, nil, fmt.Errorf("%w: column chunk %d: %w", ErrCorrupt, w.ci, err)
			}
			readers[w.ci] = m
			raws[w.ci] = m.data[w.start-m.off : w.end-m.off]
		}
	}
	return func(ci int) parquet.Pages {
			fc, ok := chunks[ci].(*parquet.FileColumnChunk)
			if !ok || readers[ci] == nil {
				return chunks[ci].Pages()
			}
			return fc.PagesFrom(readers[ci])
		}, func(ci int) (rawChunk, bool) {
			if raws[ci] == nil {
				return rawChunk{}, false
			}
			m := &s.meta.Columns[ci].MetaData
			start, _ := chunkRange(&s.meta.Columns[ci])
			return rawChunk{data: raws[ci], at: start, typ: m.Type, codec: m.Codec}, true
		}, nil
}
