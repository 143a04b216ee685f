package recfile

import (
	"bytes"
	"fmt"
	"maps"
	"runtime"
	"strings"
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

// TestSmallerCodec: WithHighCompression's codec writes a zstd frame that
// decodes to its input and is no larger than either level's: zstd best
// is not always smaller than zstd default on a few KB.
func TestSmallerCodec(t *testing.T) {
	rnd := make([]byte, 3000)
	for i := range rnd {
		rnd[i] = byte(i*7919 + i*i*31)
	}
	inputs := [][]byte{
		nil,
		[]byte("x"),
		rnd,
		bytes.Repeat([]byte("081109 203615 148 INFO dfs.DataNode$PacketResponder: block blk_38865049064139660 terminating\n"), 400),
		[]byte(strings.Repeat("R02-M1-N0-C:J12-U11 ", 50) + string(rnd[:500])),
		logLines(0, 150),     // best 98 bytes, default 94
		logLines(48, 550),    // best 224, default 215
		logLines(199, 50000), // best smaller
	}
	dec := &zstd.Codec{}
	for i, src := range inputs {
		got, err := highCodec.Encode(nil, src)
		if err != nil {
			t.Fatal(err)
		}
		back, err := dec.Decode(nil, got)
		if err != nil {
			t.Fatalf("input %d: decode: %v", i, err)
		}
		if !bytes.Equal(back, src) {
			t.Fatalf("input %d: decoded %d bytes, not the input's %d", i, len(back), len(src))
		}
		for _, l := range []zstd.Level{zstd.SpeedDefault, zstd.SpeedBestCompression} {
			alone, err := codec(l).Encode(nil, src)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) > len(alone) {
				t.Errorf("input %d: %d bytes, level %d alone %d", i, len(got), l, len(alone))
			}
		}
	}
}

// logLines are made-up log lines of at least n bytes, varied by seed.
func logLines(seed, n int) []byte {
	var b []byte
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, "2026-11-29 10:%02d:%02d,%03d INFO node-%d block blk_%d served to /10.0.%d.%d\n",
			(i*seed)%60, (i*7+seed)%60, (i*131+seed*17)%1000, (i*seed*13)%97, int64(i*seed+1)*982451653%1000000007, (i*seed)%256, (i*31+seed)%256)
	}
	return b
}

// TestHighCompressionRoundTrip: a file written WithHighCompression has
// the same schema (but more_text for more, records v7), rows and lines as
// the default's and is not larger.
func TestHighCompressionRoundTrip(t *testing.T) {
	for _, n := range []int{3, 500, 5000} {
		rows, tpl := smallRows(n)
		def, err := Encode(rows, tpl, WithDate(true))
		if err != nil {
			t.Fatal(err)
		}
		high, err := Encode(rows, tpl, WithDate(true), WithHighCompression(true))
		if err != nil {
			t.Fatal(err)
		}
		if len(high.Data) > len(def.Data) {
			t.Errorf("%d rows: high compression %d bytes, default %d", n, len(high.Data), len(def.Data))
		}
		if n >= 500 && len(high.Data) == len(def.Data) {
			t.Errorf("%d rows: high compression wrote the default's %d bytes", n, len(def.Data))
		}
		if high.Stats != def.Stats || high.Rows != def.Rows {
			t.Errorf("%d rows: stats %s rows %d, default %s %d", n, high.Stats, high.Rows, def.Stats, def.Rows)
		}
		a, b := fileColumns(t, high.Data), fileColumns(t, def.Data)
		if a[colMoreText] {
			delete(a, colMoreText)
			a[colMore] = true
		}
		if !maps.Equal(a, b) {
			t.Errorf("%d rows: columns %v, default %v", n, a, b)
		}
		recs, err := Decode(high.Data, tpl)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != n {
			t.Fatalf("%d rows: decoded %d", n, len(recs))
		}
		for i, r := range recs {
			if want := renderRow(t, tpl, rows[i]); string(r.Line) != want {
				t.Fatalf("%d rows: line %d %q, want %q", n, i, r.Line, want)
			}
		}
	}
}
