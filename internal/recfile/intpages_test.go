package recfile

import (
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// page is a test page: its header fields and its bytes (uncompressed;
// chunkOf compresses them for a zstd chunk).
type page struct {
	typ       format.PageType
	n         int32 // NumValues
	enc       format.Encoding
	nulls     int32  // v2: NumNulls
	reps      []byte // v2: the repetition levels' bytes (before the definition levels)
	defs      []byte // v2: the definition levels' bytes (before the values)
	data      []byte
	sizeDelta int32           // added to the uncompressed size the header states
	levelEnc  format.Encoding // v1: the levels' encoding (0: RLE)
}

// chunkOf lays the pages out as a column chunk, each after its header.
func chunkOf(t *testing.T, codec format.CompressionCodec, pages ...page) []byte {
	t.Helper()
	var out []byte
	for _, p := range pages {
		body := p.data
		if codec == format.Zstd {
			var err error
			if body, err = parquet.Zstd.Encode(nil, p.data); err != nil {
				t.Fatal(err)
			}
		}
		lv := append(slices.Clone(p.reps), p.defs...)
		h := format.PageHeader{Type: p.typ, UncompressedPageSize: int32(len(lv)+len(p.data)) + p.sizeDelta, CompressedPageSize: int32(len(lv) + len(body))}
		switch p.typ {
		case format.DataPage:
			lv := format.RLE
			if p.levelEnc != 0 {
				lv = p.levelEnc
			}
			h.DataPageHeader = thrift.New(format.DataPageHeader{NumValues: p.n, Encoding: p.enc, DefinitionLevelEncoding: lv, RepetitionLevelEncoding: lv})
		case format.DataPageV2:
			h.DataPageHeaderV2 = thrift.New(format.DataPageHeaderV2{NumValues: p.n, NumNulls: p.nulls, NumRows: p.n, Encoding: p.enc,
				DefinitionLevelsByteLength: int32(len(p.defs)), RepetitionLevelsByteLength: int32(len(p.reps)), IsCompressed: thrift.New(codec != format.Uncompressed)})
		case format.DictionaryPage:
			h.DictionaryPageHeader = thrift.New(format.DictionaryPageHeader{NumValues: p.n, Encoding: p.enc})
		}
		b, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(append(out, b...), lv...), body...)
	}
	return out
}

func plain64(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func plain32(v ...int32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func delta32(t *testing.T, v ...int32) []byte {
	b, err := (&delta.BinaryPackedEncoding{}).EncodeInt32(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func delta64(t *testing.T, v ...int64) []byte {
	b, err := (&delta.BinaryPackedEncoding{}).EncodeInt64(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// levelsV1 is a v1 page's definition levels: length, then RLE.
func levelsV1(t *testing.T, defs ...byte) []byte {
	b := levelsV2(t, defs...)
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func levelsV2(t *testing.T, defs ...byte) []byte { return levelsW(t, 1, defs...) }

// levelsW is levels of w bits, RLE (a v2 page's).
func levelsW(t *testing.T, w int, defs ...byte) []byte {
	b, err := (&rle.Encoding{BitWidth: w}).EncodeLevels(nil, defs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func indexes(t *testing.T, v ...int32) []byte {
	b, err := (&rle.DictionaryEncoding{}).EncodeInt32(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readInts decodes a column chunk's pages itself and holds each page to
// the count its header and levels state: a page that decodes to fewer (or
// more) values is ErrCorrupt, never values from a buffer's past (what
// parquet-go v0.32 gives, FuzzDecode's stale-delta-count).
func TestReadInts(t *testing.T) {
	cat := func(b ...[]byte) []byte {
		return []byte(strings.Join(func() []string {
			var s []string
			for _, x := range b {
				s = append(s, string(x))
			}
			return s
		}(), ""))
	}
	tests := []struct {
		name    string
		typ     format.Type
		codec   format.CompressionCodec
		maxDef  int
		nrows   int
		pages   []page
		want    []int64 // the values, in order
		present []bool  // optional: which rows hold one (nil: every row)
		err     string  // a part of the ErrCorrupt expected
	}{
		{name: "plain int64", typ: format.Int64, nrows: 5, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.Plain, data: plain64(1, -2, 3)},
			{typ: format.DataPage, n: 2, enc: format.Plain, data: plain64(40, 50)},
		}, want: []int64{1, -2, 3, 40, 50}},
		{name: "plain int32, zstd", typ: format.Int32, codec: format.Zstd, nrows: 3, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.Plain, data: plain32(7, -8, 9)},
		}, want: []int64{7, -8, 9}},
		{name: "plain short of its count", typ: format.Int64, nrows: 3, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.Plain, data: plain64(1, 2)},
		}, err: "holds 2 values, its header and levels 3"},
		{name: "plain, a partial value", typ: format.Int32, nrows: 1, pages: []page{
			{typ: format.DataPage, n: 1, enc: format.Plain, data: []byte{1, 2, 3}},
		}, err: "3 bytes of 4-byte values"},
		{name: "delta int32", typ: format.Int32, nrows: 4, pages: []page{
			{typ: format.DataPage, n: 4, enc: format.DeltaBinaryPacked, data: delta32(t, 10, 12, 11, 400)},
		}, want: []int64{10, 12, 11, 400}},
		{name: "delta int64, zstd, two pages", typ: format.Int64, codec: format.Zstd, nrows: 5, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.DeltaBinaryPacked, data: delta64(t, 1<<40, 1<<40+5, -3)},
			{typ: format.DataPage, n: 2, enc: format.DeltaBinaryPacked, data: delta64(t, 8, 9)},
		}, want: []int64{1 << 40, 1<<40 + 5, -3, 8, 9}},
		// The fuzzer's file: a page header of 3 values over a delta
		// header of none.
		{name: "delta with fewer values than its header", typ: format.Int32, nrows: 3, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.DeltaBinaryPacked, data: delta32(t)},
		}, err: "holds 0 values, its header and levels 3"},
		{name: "delta with fewer values, zstd", typ: format.Int64, codec: format.Zstd, nrows: 3, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.DeltaBinaryPacked, data: delta64(t, 1, 2)},
		}, err: "holds 2 values, its header and levels 3"},
		{name: "delta with more values than its header", typ: format.Int64, nrows: 2, pages: []page{
			{typ: format.DataPage, n: 2, enc: format.DeltaBinaryPacked, data: delta64(t, 1, 2, 3)},
		}, err: "holds 3 values, its header and levels 2"},
		// A miniblock cut short: parquet-go's decoder returned the run
		// header's count, the values past the bytes from its buffer's
		// past (FuzzDecode's a7d349699db18e72).
		{name: "delta with a miniblock cut short", typ: format.Int32, nrows: 40, pages: []page{
			{typ: format.DataPage, n: 40, enc: format.DeltaBinaryPacked, data: cut(delta32(t, ramp32(40)...), 3)},
		}, err: "a miniblock past the page"},
		{name: "optional, v1 levels", typ: format.Int64, maxDef: 1, nrows: 4, pages: []page{
			{typ: format.DataPage, n: 4, enc: format.Plain, data: cat(levelsV1(t, 1, 0, 0, 1), plain64(5, 6))},
		}, want: []int64{5, 6}, present: []bool{true, false, false, true}},
		{name: "optional, a value short of the levels", typ: format.Int64, maxDef: 1, nrows: 3, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.DeltaBinaryPacked, data: cat(levelsV1(t, 1, 1, 1), delta64(t, 5, 6))},
		}, err: "holds 2 values, its header and levels 3"},
		{name: "optional, fewer levels than values", typ: format.Int64, maxDef: 1, nrows: 9, pages: []page{
			{typ: format.DataPage, n: 9, enc: format.Plain, data: cat(levelsV1(t, 1), plain64(5))},
		}, err: "definition levels for 9 values"},
		{name: "optional, levels past the page", typ: format.Int64, maxDef: 1, nrows: 1, pages: []page{
			{typ: format.DataPage, n: 1, enc: format.Plain, data: []byte{200, 0, 0, 0, 1}},
		}, err: "definition levels of 200 bytes"},
		{name: "v2 page, zstd", typ: format.Int64, codec: format.Zstd, maxDef: 1, nrows: 3, pages: []page{
			{typ: format.DataPageV2, n: 3, nulls: 1, enc: format.Plain, defs: levelsV2(t, 0, 1, 1), data: plain64(7, 8)},
		}, want: []int64{7, 8}, present: []bool{false, true, true}},
		{name: "v2 page, nulls not its levels'", typ: format.Int64, maxDef: 1, nrows: 3, pages: []page{
			{typ: format.DataPageV2, n: 3, nulls: 2, enc: format.Plain, defs: levelsV2(t, 0, 1, 1), data: plain64(7, 8)},
		}, err: "states 2 nulls, its levels 1"},
		{name: "dictionary", typ: format.Int32, codec: format.Zstd, nrows: 4, pages: []page{
			{typ: format.DictionaryPage, n: 2, enc: format.Plain, data: plain32(70, 90)},
			{typ: format.DataPage, n: 4, enc: format.RLEDictionary, data: indexes(t, 1, 0, 1, 1)},
		}, want: []int64{90, 70, 90, 90}},
		{name: "dictionary of one entry", typ: format.Int32, nrows: 3, pages: []page{
			{typ: format.DictionaryPage, n: 1, enc: format.Plain, data: plain32(3)},
			{typ: format.DataPage, n: 3, enc: format.RLEDictionary, data: []byte{0}},
		}, want: []int64{3, 3, 3}},
		{name: "dictionary index out of range", typ: format.Int32, nrows: 2, pages: []page{
			{typ: format.DictionaryPage, n: 2, enc: format.Plain, data: plain32(70, 90)},
			{typ: format.DataPage, n: 2, enc: format.RLEDictionary, data: indexes(t, 1, 2)},
		}, err: "dictionary index 2 of 2"},
		{name: "dictionary indexes short of the count", typ: format.Int32, nrows: 20, pages: []page{
			{typ: format.DictionaryPage, n: 2, enc: format.Plain, data: plain32(70, 90)},
			{typ: format.DataPage, n: 20, enc: format.RLEDictionary, data: indexes(t, 1, 0, 1)},
		}, err: "its header and levels 20"},
		{name: "indexes without a dictionary", typ: format.Int32, nrows: 2, pages: []page{
			{typ: format.DataPage, n: 2, enc: format.RLEDictionary, data: indexes(t, 0, 0)},
		}, err: "without a dictionary page"},
		{name: "fewer rows than the row group", typ: format.Int64, nrows: 4, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.Plain, data: plain64(1, 2, 3)},
		}, err: "3 of 4 rows"},
		{name: "more values than rows left", typ: format.Int64, nrows: 2, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.Plain, data: plain64(1, 2, 3)},
		}, err: "states 3 values, 2 rows left"},
		{name: "uncompressed size not the page's", typ: format.Int64, nrows: 1, pages: []page{
			{typ: format.DataPage, n: 1, enc: format.Plain, data: plain64(1), sizeDelta: 1},
		}, err: "8 bytes, its header states 9"},
		{name: "zstd size not the page's", typ: format.Int64, codec: format.Zstd, nrows: 1, pages: []page{
			{typ: format.DataPage, n: 1, enc: format.Plain, data: plain64(1), sizeDelta: -1},
		}, err: "more bytes uncompressed than its header states, 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := rawChunk{data: chunkOf(t, tt.codec, tt.pages...), at: 4, typ: tt.typ, codec: tt.codec}
			if !intDecodable(ch) {
				t.Fatal("not decodable")
			}
			var cv colVals
			err := readInts(ch, column{maxDef: tt.maxDef}, &cv, tt.nrows)
			if tt.err != "" {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want ErrCorrupt with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]int64, cv.nints())
			for j := range got {
				got[j] = cv.int(j)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("values %v, want %v", got, tt.want)
			}
			if tt.typ == format.Int32 && tt.pages[0].typ != format.DictionaryPage && cv.i32 == nil {
				t.Fatal("an int32 column's values not kept as int32")
			}
			for r := range tt.nrows {
				want := tt.present == nil || tt.present[r]
				if got := cv.valueAt(r) >= 0; got != want {
					t.Fatalf("row %d has a value: %v, want %v", r, got, want)
				}
			}
			cv.free()
			if cv.ints != nil || cv.i32 != nil {
				t.Fatal("free kept the values")
			}
		})
	}
}

// Pages readInts does not know are left to parquet-go: another codec, an
// encoding quarry never wrote, BIT_PACKED levels.
func TestIntDecodable(t *testing.T) {
	ok := chunkOf(t, format.Uncompressed, page{typ: format.DataPage, n: 1, enc: format.Plain, data: plain64(1)})
	split := chunkOf(t, format.Uncompressed, page{typ: format.DataPage, n: 1, enc: format.ByteStreamSplit, data: plain64(1)})
	bitPacked := chunkOf(t, format.Uncompressed, page{typ: format.DataPage, n: 1, enc: format.Plain, data: plain64(1), levelEnc: format.BitPacked})
	for _, tt := range []struct {
		name string
		ch   rawChunk
		want bool
	}{
		{"plain int64", rawChunk{data: ok, typ: format.Int64}, true},
		{"snappy", rawChunk{data: ok, typ: format.Int64, codec: format.Snappy}, false},
		{"byte array", rawChunk{data: ok, typ: format.ByteArray}, false},
		{"byte stream split", rawChunk{data: split, typ: format.Int64}, false},
		{"bit-packed levels", rawChunk{data: bitPacked, typ: format.Int64}, false},
	} {
		if got := intDecodable(tt.ch); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// hybridLevels decodes what parquet-go's RLE encoding wrote, levels of
// every width, and stops at the count asked: a run that states 2^40 levels
// in six bytes costs the levels asked for, not 2^40 bytes.
func TestHybridLevels(t *testing.T) {
	for w := 1; w <= 8; w++ {
		for _, n := range []int{1, 7, 8, 9, 100, 1000} {
			levels := make([]byte, n)
			for i := range levels {
				switch {
				case i%97 < 40: // a run
					levels[i] = byte(1 % (int(1) << w))
				default:
					levels[i] = byte((i * 7919) % (int(1) << w))
				}
			}
			b, err := (&rle.Encoding{BitWidth: w}).EncodeLevels(nil, levels)
			if err != nil {
				t.Fatal(err)
			}
			got, err := hybridLevels(nil, b, w, n)
			if err != nil || string(got) != string(levels) {
				t.Fatalf("width %d, %d levels: %v, %v; want %v", w, n, got, err, levels)
			}
			if _, err := hybridLevels(nil, b, w, n+9); err == nil {
				t.Fatalf("width %d, %d levels: no error asking for %d", w, n, n+9)
			}
		}
	}
	huge := binary.AppendUvarint(nil, 1<<41) // a run of 2^40 ones
	huge = append(huge, 1)
	got, err := hybridLevels(nil, huge, 1, 5)
	if err != nil || string(got) != "\x01\x01\x01\x01\x01" {
		t.Fatalf("a run of 2^40 cut at 5: %v, %v", got, err)
	}
	if c, err := hybridCount(huge, 1); err != nil || c != 1<<40 {
		t.Fatalf("hybridCount %d, %v", c, err)
	}
	// Dictionary indexes whose runs state more than the page's values.
	var cv colVals
	idx := append([]byte{1}, huge...)
	if _, err := cv.appendInts(format.RLEDictionary, idx, 5, false, []int64{7, 9}, true, 5); err == nil || !strings.Contains(err.Error(), "runs of") {
		t.Fatalf("indexes stating 2^40: %v", err)
	}
}

// ramp32 is 0, 7, 14, ... (n values): deltas that need a few bits.
func ramp32(n int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(i * 7 * (i % 3))
	}
	return v
}

// cut is b without its last k bytes.
func cut(b []byte, k int) []byte { return b[:len(b)-k] }
