package recfile

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/parquet-go/parquet-go/compress/zstd"
)

// TestZstdCodecKeepsEncoders: the codec's encoders outlive garbage
// collections, so a page compressed after one does not build a new encoder
// (match tables and history, megabytes); and it writes what parquet-go's
// codec writes.
func TestZstdCodecKeepsEncoders(t *testing.T) {
	src := bytes.Repeat([]byte("081109 203615 148 INFO dfs.DataNode$PacketResponder: block blk_38865049064139660 terminating\n"), 4000)
	c := codec(zstd.SpeedDefault)
	want, err := (&zstd.Codec{Level: zstd.SpeedDefault}).Encode(nil, src)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 0, 2*len(want))
	for i := range 3 {
		// Two collections empty a sync.Pool, victim cache included.
		runtime.GC()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := c.Encode(dst, src)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encode %d: %d bytes, parquet-go's codec %d, not the same", i, len(got), len(want))
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; i > 0 && alloc > 256<<10 {
			t.Errorf("encode %d after a collection allocated %d bytes: the encoder was not kept", i, alloc)
		}
	}
}
