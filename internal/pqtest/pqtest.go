// Package pqtest writes Parquet files for tests: rows of a Go struct as
// parquet-go's generic writer writes them, zstd-compressed, as a writer
// other than quarry's would; zstd bombs to damage them with; and measures
// what reading them allocates. Only tests import it.
package pqtest

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// Write returns rows as a Parquet file, failing t on an error.
func Write[T any](t testing.TB, rows []T, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, append([]parquet.WriterOption{parquet.Compression(&parquet.Zstd)}, opts...)...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ZstdBomb is a zstd frame of exactly size bytes (at least 9) that
// decodes to about 32,768 times that: RLE blocks of 128 KB (4 bytes each)
// and a raw block to fill, without a content size in its header unless
// states is not zero (then stating states bytes, 8 bytes more header).
func ZstdBomb(size int, states uint64) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	if states != 0 {
		b = append(b, 3<<6, 7<<3) // an 8-byte content size, a window of 128 KB
		b = binary.LittleEndian.AppendUint64(b, states)
	} else {
		b = append(b, 0, 7<<3)
	}
	rest := size - len(b) - 3 // the raw block's header
	raw := rest % 4
	for range rest / 4 {
		h := uint32(1<<17)<<3 | 1<<1 // RLE, 128 KB
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 'x')
	}
	h := uint32(raw)<<3 | 1 // raw, last
	b = append(b, byte(h), byte(h>>8), byte(h>>16))
	return append(b, make([]byte, raw)...)
}

// Allocated is the bytes fn allocates (every goroutine's, while it runs).
func Allocated(fn func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	fn()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}
