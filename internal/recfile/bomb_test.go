package recfile

import (
	"errors"
	"testing"

	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/pqfile"
	"github.com/quarrylake/quarry/internal/pqtest"
)

// zstdBomb is a zstd frame of blocks RLE blocks of 128 KB each (4 bytes a
// block), stating its content size (fcs) or not (pqtest.ZstdBomb).
func zstdBomb(blocks int, fcs bool) []byte {
	if fcs {
		return pqtest.ZstdBomb(9+8+4*blocks, uint64(blocks)<<17)
	}
	return pqtest.ZstdBomb(9+4*blocks, 0)
}

// TestZstdBombBounded: a page body or a footer value that decodes to far
// more than it may (a few KB of RLE blocks stating a GB, with or without
// the frame's content size) is an error once its bound is passed, not an
// allocation of what it states. Decoded whole first, they took 1-2 GB.
func TestZstdBombBounded(t *testing.T) {
	for _, fcs := range []bool{false, true} {
		bomb := zstdBomb(8192, fcs) // 1 GB from 32 KB
		var err error
		n := pqtest.Allocated(func() { _, err = decompressInto(nil, format.Zstd, bomb, 4096) })
		if !errors.Is(err, pqfile.ErrTooLarge) {
			t.Errorf("page (content size %v): err %v, want pqfile.ErrTooLarge", fcs, err)
		}
		if n > 4<<20 {
			t.Errorf("page (content size %v): %d MB allocated for a page of 4 KB", fcs, n>>20)
		}
		sc := new(pageScratch)
		if _, err := sc.decompress(format.Zstd, bomb, 4096); !errors.Is(err, pqfile.ErrTooLarge) {
			t.Errorf("scratch page (content size %v): err %v, want pqfile.ErrTooLarge", fcs, err)
		}
	}
	// Footer values: a frame that does not state its size stops at 64 KB
	// (quarry's encoder leaves the size out of frames under 256 bytes only);
	// one that states more than maxSummary is refused undecoded; one that
	// states less than it expands to stops at what it states.
	for _, c := range []struct {
		name   string
		frame  []byte
		tooBig bool
	}{
		{"no content size", zstdBomb(16384, false), true}, // 2 GB
		{"a content size past maxSummary", zstdBomb(16384, true), true},
		{"1 MB stated", pqtest.ZstdBomb(9+8+4*16384, 1<<20), true},
	} {
		var err error
		v := pack7(append([]byte{summaryVersion}, c.frame...))
		n := pqtest.Allocated(func() { _, err = ParseSummary(v) })
		if !errors.Is(err, errSummary) || c.tooBig != errors.Is(err, pqfile.ErrTooLarge) {
			t.Errorf("summary, %s: err %v, want errSummary (and pqfile.ErrTooLarge: %v)", c.name, err, c.tooBig)
		}
		if n > 8<<20 {
			t.Errorf("summary, %s: %d MB allocated", c.name, n>>20)
		}
		if _, err := ParsePairs(pack7(append([]byte{pairsVersion}, c.frame...))); !errors.Is(err, errPairs) {
			t.Errorf("pairs, %s: err %v, want errPairs", c.name, err)
		}
	}
	// At the bound: exactly n decodes, one byte more does not.
	frame := zstdBomb(2, true) // 256 KB of 'x'
	out, err := decompressInto([]byte("ab"), format.Zstd, frame, 2<<17)
	if err != nil || len(out) != 2+2<<17 || string(out[:3]) != "abx" || out[len(out)-1] != 'x' {
		t.Fatalf("a page of exactly its size: %d bytes, err %v", len(out), err)
	}
	if _, err := decompressInto(nil, format.Zstd, frame, 2<<17-1); !errors.Is(err, pqfile.ErrTooLarge) {
		t.Fatalf("a page one byte past its size: err %v, want pqfile.ErrTooLarge", err)
	}
}
