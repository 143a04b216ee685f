package pqfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/pqtest"
)

// pages calls fn with each page body of data's column chunks and the size
// its header states.
func pages(t *testing.T, data []byte, f *parquet.File, fn func(body []byte, size int64)) {
	t.Helper()
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			at, end, ok := ChunkSpan(&c.MetaData, int64(len(data)))
			if !ok {
				t.Fatal("a chunk outside the file")
			}
			chunk := data[at:end]
			for pos := 0; pos < len(chunk); {
				h, n, err := ReadPageHeader(chunk[pos:])
				if err != nil {
					t.Fatal(err)
				}
				fn(chunk[pos+n:pos+n+int(h.Compressed)], h.Uncompressed)
				pos += n + int(h.Compressed)
			}
		}
	}
}

// TestCheckBodies: a file parquet-go wrote passes without a page decoded
// (each body one frame stating its page's size); a page whose body is a
// zstd bomb of the same length (no content size, or a wrong one) is
// refused within a few MB; a bomb stating its page's true size passes
// (parquet-go's decoder stops a frame at the size it states:
// lake's TestTemplatesFileBomb reads one).
func TestCheckBodies(t *testing.T) {
	good := sample(t, parquet.Compression(&parquet.Zstd))
	f, err := Open(bytes.NewReader(good), int64(len(good)), zstdOnly)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckBodies(good, f); err != nil {
		t.Fatalf("a good file: %v", err)
	}
	n := 0
	pages(t, good, f, func(body []byte, size int64) {
		if !oneFrameOf(body, size) {
			t.Errorf("a page of %d bytes is not one frame stating its size", size)
		}
		if oneFrameOf(append(bytes.Clone(body), 0, 0, 0, 0), size) {
			t.Error("a frame with bytes after it taken for one frame")
		}
		n++
	})
	if n == 0 {
		t.Fatal("no pages")
	}
	// The largest page's body, replaced in place.
	var body []byte
	var size int64
	pages(t, good, f, func(b []byte, s int64) {
		if len(b) > len(body) {
			body, size = b, s
		}
	})
	at := bytes.Index(good, body)
	bombed := func(bomb []byte) ([]byte, *parquet.File) {
		if len(bomb) != len(body) {
			t.Fatalf("bomb of %d bytes for a body of %d", len(bomb), len(body))
		}
		data := bytes.Clone(good)
		copy(data[at:], bomb)
		bf, err := Open(bytes.NewReader(data), int64(len(data)), zstdOnly)
		if err != nil {
			t.Fatal(err)
		}
		return data, bf
	}
	expands := uint64(len(body)-9) / 4 << 17
	for _, states := range []uint64{0, uint64(size) * 2} {
		data, bf := bombed(pqtest.ZstdBomb(len(body), states))
		var err error
		if got := pqtest.Allocated(func() { err = CheckBodies(data, bf) }); !errors.Is(err, ErrCorrupt) || got > 4<<20 {
			t.Errorf("bomb stating %d of a page of %d, expanding to %d: err %v, %d KB allocated", states, size, expands, err, got>>10)
		}
	}
	data, bf := bombed(pqtest.ZstdBomb(len(body), uint64(size)))
	if err := CheckBodies(data, bf); err != nil {
		t.Fatalf("a bomb stating its page's size: %v", err)
	}
}

// TestCheckBodiesSnappy: a snappy body states its length first, and
// snappy's decoder allocates that length: a file parquet-go wrote passes,
// and a page whose body states 4 GB, not its page's size, is refused.
func TestCheckBodiesSnappy(t *testing.T) {
	good := sample(t, parquet.Compression(&parquet.Snappy))
	codecs := []format.CompressionCodec{format.Snappy}
	f, err := Open(bytes.NewReader(good), int64(len(good)), codecs)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckBodies(good, f); err != nil {
		t.Fatalf("a good file: %v", err)
	}
	var body []byte
	pages(t, good, f, func(b []byte, _ int64) {
		if len(b) > len(body) {
			body = b
		}
	})
	data := bytes.Clone(good)
	copy(data[bytes.Index(good, body):], binary.AppendUvarint(nil, 0xfffffff0))
	bf, err := Open(bytes.NewReader(data), int64(len(data)), codecs)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckBodies(data, bf); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a body stating 4 GB: err %v, want ErrCorrupt", err)
	}
}
