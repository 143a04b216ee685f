package recfile

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/parquet-go/parquet-go/format"
)

// zstdBomb is a zstd frame of blocks RLE blocks of 128 KB each (4 bytes a
// block), stating its content size (fcs) or not.
func zstdBomb(blocks int, fcs bool) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	if fcs {
		// Frame header: 8-byte content size, no single segment: a window
		// descriptor of 128 KB follows.
		b = append(b, 3<<6, 7<<3)
		b = binary.LittleEndian.AppendUint64(b, uint64(blocks)<<17)
	} else {
		b = append(b, 0, 7<<3)
	}
	for i := range blocks {
		h := uint32(1<<17)<<3 | 1<<1 // RLE, 128 KB
		if i == blocks-1 {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 'x')
	}
	return b
}

// TestZstdBombBounded: a page body or a footer value that decodes to far
// more than it may (a few KB of RLE blocks stating a GB, with or without
// the frame's content size) is an error once its bound is passed, not an
// allocation of what it states. Decoded whole first, they took 1-2 GB.
func TestZstdBombBounded(t *testing.T) {
	for _, fcs := range []bool{false, true} {
		bomb := zstdBomb(8192, fcs) // 1 GB from 32 KB
		var err error
		n := allocated(func() { _, err = decompressInto(nil, format.Zstd, bomb, 4096) })
		if !errors.Is(err, errTooLarge) {
			t.Errorf("page (content size %v): err %v, want errTooLarge", fcs, err)
		}
		if n > 4<<20 {
			t.Errorf("page (content size %v): %d MB allocated for a page of 4 KB", fcs, n>>20)
		}
		sc := new(pageScratch)
		if _, err := sc.decompress(format.Zstd, bomb, 4096); !errors.Is(err, errTooLarge) {
			t.Errorf("scratch page (content size %v): err %v, want errTooLarge", fcs, err)
		}
		v := pack7(append([]byte{summaryVersion}, zstdBomb(16384, fcs)...)) // 2 GB
		n = allocated(func() { _, err = ParseSummary(v) })
		if !errors.Is(err, errSummary) || !errors.Is(err, errTooLarge) {
			t.Errorf("summary (content size %v): err %v, want errSummary and errTooLarge", fcs, err)
		}
		// The decoder stops a block after its bound, and the block that
		// crosses it may double the buffer first: with the smaller tries
		// before it, 3.5 times the bound at most.
		if n > 4*maxSummary {
			t.Errorf("summary (content size %v): %d MB allocated, at most %d MB decode", fcs, n>>20, maxSummary>>20)
		}
		if _, err := ParsePairs(pack7(append([]byte{pairsVersion}, zstdBomb(16384, fcs)...))); !errors.Is(err, errTooLarge) {
			t.Errorf("pairs (content size %v): err %v, want errTooLarge", fcs, err)
		}
	}
	// At the bound: exactly n decodes, one byte more does not.
	frame := zstdBomb(2, true) // 256 KB of 'x'
	out, err := decompressInto([]byte("ab"), format.Zstd, frame, 2<<17)
	if err != nil || len(out) != 2+2<<17 || string(out[:3]) != "abx" || out[len(out)-1] != 'x' {
		t.Fatalf("a page of exactly its size: %d bytes, err %v", len(out), err)
	}
	if _, err := decompressInto(nil, format.Zstd, frame, 2<<17-1); !errors.Is(err, errTooLarge) {
		t.Fatalf("a page one byte past its size: err %v, want errTooLarge", err)
	}
}
