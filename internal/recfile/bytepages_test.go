package recfile

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/format"
)

func plainBytes(v ...string) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		b = append(b, x...)
	}
	return b
}

// lengthBytes is v as DELTA_LENGTH_BYTE_ARRAY: by parquet-go's encoder
// (bit widths as the lengths need) or by quarry's (whole bytes).
func lengthBytes(t *testing.T, quarrys bool, v ...string) []byte {
	t.Helper()
	var src []byte
	offs := []uint32{0}
	for _, x := range v {
		src = append(src, x...)
		offs = append(offs, uint32(len(src)))
	}
	var b []byte
	var err error
	if quarrys {
		b, err = deltaLength{}.EncodeByteArray(nil, src, offs)
	} else {
		b, err = (&delta.LengthByteArrayEncoding{}).EncodeByteArray(nil, src, offs)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cat joins byte strings.
func cat(b ...[]byte) []byte {
	var out []byte
	for _, x := range b {
		out = append(out, x...)
	}
	return out
}

// manyValues is n values of lengths 0 to a few hundred bytes, some not
// UTF-8, so that the lengths' miniblocks take several bit widths.
func manyValues(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	v := make([]string, n)
	for i := range v {
		b := make([]byte, r.IntN([]int{1, 4, 40, 400}[i/37%4]))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		v[i] = string(b)
	}
	return v
}

// readBytes decodes a byte array column chunk's pages itself, PLAIN,
// DELTA_LENGTH_BYTE_ARRAY (by parquet-go's encoder and by quarry's) and
// dictionary indexes, v1 and v2 pages, required and optional, and holds
// each page to the count its header and levels state: a page that decodes
// to fewer or more values, lengths that do not add up to its bytes, a run
// of levels or indexes that states more than the page holds, are
// ErrCorrupt, and a run of 2^40 levels costs the levels asked for.
func TestReadBytes(t *testing.T) {
	many := manyValues(1000)
	huge := binary.AppendUvarint(nil, 1<<41) // a run of 2^40 ones
	huge = append(huge, 1)
	tests := []struct {
		name    string
		codec   format.CompressionCodec
		maxDef  int
		nrows   int
		pages   []page
		want    []string
		present []bool // optional: which rows hold one (nil: every row)
		err     string // a part of the ErrCorrupt expected
	}{
		{name: "plain", nrows: 3, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.Plain, data: plainBytes("a", "", "\xff\xfeb")},
		}, want: []string{"a", "", "\xff\xfeb"}},
		{name: "plain, zstd, two pages", codec: format.Zstd, nrows: 4, pages: []page{
			{typ: format.DataPage, n: 2, enc: format.Plain, data: plainBytes("one", "two")},
			{typ: format.DataPage, n: 2, enc: format.Plain, data: plainBytes("three", "")},
		}, want: []string{"one", "two", "three", ""}},
		{name: "delta lengths, parquet-go's", codec: format.Zstd, nrows: len(many), pages: []page{
			{typ: format.DataPage, n: int32(len(many)), enc: format.DeltaLengthByteArray, data: lengthBytes(t, false, many...)},
		}, want: many},
		{name: "delta lengths, quarry's, two pages", nrows: len(many), pages: []page{
			{typ: format.DataPage, n: 300, enc: format.DeltaLengthByteArray, data: lengthBytes(t, true, many[:300]...)},
			{typ: format.DataPage, n: int32(len(many) - 300), enc: format.DeltaLengthByteArray, data: lengthBytes(t, true, many[300:]...)},
		}, want: many},
		{name: "optional, v1 levels", maxDef: 1, nrows: 4, pages: []page{
			{typ: format.DataPage, n: 4, enc: format.DeltaLengthByteArray, data: cat(levelsV1(t, 0, 1, 1, 0), lengthBytes(t, true, "x", "yz"))},
		}, want: []string{"x", "yz"}, present: []bool{false, true, true, false}},
		{name: "optional, v2 page, zstd", codec: format.Zstd, maxDef: 1, nrows: 3, pages: []page{
			{typ: format.DataPageV2, n: 3, nulls: 1, enc: format.Plain, defs: levelsV2(t, 1, 1, 0), data: plainBytes("p", "q")},
		}, want: []string{"p", "q"}, present: []bool{true, true, false}},
		{name: "dictionary, optional", codec: format.Zstd, maxDef: 1, nrows: 5, pages: []page{
			{typ: format.DictionaryPage, n: 2, enc: format.Plain, data: plainBytes("INFO", "WARN")},
			{typ: format.DataPage, n: 5, enc: format.RLEDictionary, data: cat(levelsV1(t, 1, 1, 0, 1, 1), indexes(t, 1, 0, 0, 1))},
		}, want: []string{"WARN", "INFO", "INFO", "WARN"}, present: []bool{true, true, false, true, true}},
		// Levels: a run stating 2^40 is cut at the page's count.
		{name: "a run of 2^40 levels", maxDef: 1, nrows: 3, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.Plain, data: cat(binary.LittleEndian.AppendUint32(nil, uint32(len(huge))), huge, plainBytes("a", "b", "c"))},
		}, want: []string{"a", "b", "c"}},
		{name: "plain short of its count", nrows: 3, pages: []page{
			{typ: format.DataPage, n: 3, enc: format.Plain, data: plainBytes("a", "b")},
		}, err: "holds 2 values, its header and levels 3"},
		{name: "plain past its count", nrows: 2, pages: []page{
			{typ: format.DataPage, n: 2, enc: format.Plain, data: plainBytes("a", "b", "c", "d")},
		}, err: "holds 3 values, its header and levels 2"},
		{name: "plain value past the page", nrows: 2, pages: []page{
			{typ: format.DataPage, n: 2, enc: format.Plain, data: plainBytes("a", "b")[:7]},
		}, err: "value 1 past the page"},
		{name: "delta lengths past the count", nrows: 2, pages: []page{
			{typ: format.DataPage, n: 2, enc: format.DeltaLengthByteArray, data: lengthBytes(t, true, "a", "b", "c")},
		}, err: "holds 3 values, its header and levels 2"},
		{name: "delta lengths stating 2^40", nrows: 2, pages: []page{
			{typ: format.DataPage, n: 2, enc: format.DeltaLengthByteArray, data: append(binary.AppendUvarint([]byte{128, 1, 4}, 1<<40), 0)},
		}, err: "1099511627776 values, the page holds 3"},
		{name: "delta lengths longer than the bytes", nrows: 2, pages: []page{
			{typ: format.DataPage, n: 2, enc: format.DeltaLengthByteArray, data: lengthBytes(t, true, "a", "bc")[:len(lengthBytes(t, true, "a", "bc"))-1]},
		}, err: "a value of 2 bytes, 1 left"},
		{name: "bytes after the values", nrows: 1, pages: []page{
			{typ: format.DataPage, n: 1, enc: format.DeltaLengthByteArray, data: append(lengthBytes(t, true, "a"), 'z')},
		}, err: "1 bytes after the values"},
		{name: "dictionary index out of range", nrows: 2, pages: []page{
			{typ: format.DictionaryPage, n: 1, enc: format.Plain, data: plainBytes("x")},
			{typ: format.DataPage, n: 2, enc: format.RLEDictionary, data: indexes(t, 0, 3)},
		}, err: "dictionary index 3 of 1"},
		{name: "indexes without a dictionary", nrows: 1, pages: []page{
			{typ: format.DataPage, n: 1, enc: format.RLEDictionary, data: indexes(t, 0)},
		}, err: "without a dictionary page"},
		{name: "indexes stating 2^40", nrows: 2, pages: []page{
			{typ: format.DictionaryPage, n: 2, enc: format.Plain, data: plainBytes("x", "y")},
			{typ: format.DataPage, n: 2, enc: format.RLEDictionary, data: append([]byte{1}, huge...)},
		}, err: "runs of"},
		{name: "two dictionary pages", nrows: 1, pages: []page{
			{typ: format.DictionaryPage, n: 1, enc: format.Plain, data: plainBytes("x")},
			{typ: format.DictionaryPage, n: 1, enc: format.Plain, data: plainBytes("y")},
			{typ: format.DataPage, n: 1, enc: format.RLEDictionary, data: indexes(t, 0)},
		}, err: "a second dictionary page"},
		{name: "dictionary entries past the page", nrows: 1, pages: []page{
			{typ: format.DictionaryPage, n: 2, enc: format.Plain, data: plainBytes("x", "yy")[:8]},
			{typ: format.DataPage, n: 1, enc: format.RLEDictionary, data: indexes(t, 0)},
		}, err: "entry 1 of 2 past the page"},
		{name: "fewer rows than the row group", nrows: 3, pages: []page{
			{typ: format.DataPage, n: 2, enc: format.Plain, data: plainBytes("a", "b")},
		}, err: "2 of 3 rows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := rawChunk{data: chunkOf(t, tt.codec, tt.pages...), at: 4, typ: format.ByteArray, codec: tt.codec}
			if !bytesDecodable(ch) {
				t.Fatal("not decodable")
			}
			var cv colVals
			err := readBytes(ch, column{maxDef: tt.maxDef}, &cv, tt.nrows)
			defer cv.free()
			if tt.err != "" {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want ErrCorrupt with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, cv.count())
			for j := range got {
				got[j] = string(cv.str(j))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("values %q, want %q", got, tt.want)
			}
			for r := range tt.nrows {
				want := tt.present == nil || tt.present[r]
				if got := cv.valueAt(r) >= 0; got != want {
					t.Fatalf("row %d has a value: %v, want %v", r, got, want)
				}
			}
		})
	}
}

// readLists decodes a repeated column chunk's pages (v1 and v2) into each
// row's items: a row starts at each repetition level 0, an item is a
// level at the column's maximum definition level; the rows skip marks are
// left out; levels that start mid-row, more rows than the row group, and
// a page stating more levels than its rows can hold are ErrCorrupt.
func TestReadLists(t *testing.T) {
	// Rows: [a b], [] (an empty list), null, [c], [d e f].
	reps := []byte{0, 1, 0, 0, 0, 0, 1, 1}
	defs := []byte{2, 2, 1, 0, 2, 2, 2, 2}
	vals := []string{"a", "b", "c", "d", "e", "f"}
	want := map[int][]string{0: {"a", "b"}, 3: {"c"}, 4: {"d", "e", "f"}}
	v1 := cat(levelsV1(t, reps...), levelsV1w(t, 2, defs...), lengthBytes(t, true, vals...))
	tests := []struct {
		name  string
		codec format.CompressionCodec
		nrows int
		pages []page
		skip  []bool
		want  map[int][]string
		err   string
	}{
		{name: "v1", nrows: 5, pages: []page{{typ: format.DataPage, n: 8, enc: format.DeltaLengthByteArray, data: v1}}, want: want},
		{name: "v2, zstd, two pages", codec: format.Zstd, nrows: 5, pages: []page{
			{typ: format.DataPageV2, n: 4, enc: format.Plain, reps: levelsW(t, 1, reps[:4]...), defs: levelsW(t, 2, defs[:4]...), data: plainBytes("a", "b")},
			{typ: format.DataPageV2, n: 4, enc: format.Plain, reps: levelsW(t, 1, reps[4:]...), defs: levelsW(t, 2, defs[4:]...), data: plainBytes("c", "d", "e", "f")},
		}, want: want},
		{name: "dictionary", nrows: 5, pages: []page{
			{typ: format.DictionaryPage, n: 6, enc: format.Plain, data: plainBytes(vals...)},
			{typ: format.DataPage, n: 8, enc: format.RLEDictionary, data: cat(levelsV1(t, reps...), levelsV1w(t, 2, defs...), indexes(t, 0, 1, 2, 3, 4, 5))},
		}, want: want},
		{name: "skipped rows", nrows: 5, skip: []bool{true, false, false, false, true},
			pages: []page{{typ: format.DataPage, n: 8, enc: format.DeltaLengthByteArray, data: v1}}, want: map[int][]string{3: {"c"}}},
		{name: "first level continues a row", nrows: 5, pages: []page{
			{typ: format.DataPage, n: 2, enc: format.Plain, data: cat(levelsV1(t, 1, 0), levelsV1w(t, 2, 2, 2), plainBytes("a", "b"))},
		}, err: "first level continues a row"},
		{name: "more rows than the row group", nrows: 4, pages: []page{{typ: format.DataPage, n: 8, enc: format.DeltaLengthByteArray, data: v1}},
			err: "more rows than the row group"},
		{name: "fewer rows than the row group", nrows: 6, pages: []page{{typ: format.DataPage, n: 8, enc: format.DeltaLengthByteArray, data: v1}},
			err: "5 of 6 rows"},
		{name: "values short of the levels", nrows: 5, pages: []page{
			{typ: format.DataPage, n: 8, enc: format.Plain, data: cat(levelsV1(t, reps...), levelsV1w(t, 2, defs...), plainBytes(vals[:5]...))},
		}, err: "holds 5 values, its header and levels 6"},
		{name: "levels past what the rows hold", nrows: 1, pages: []page{
			{typ: format.DataPage, n: 1 << 30, enc: format.Plain, data: v1},
		}, err: "states 1073741824 levels, at most 131072"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := rawChunk{data: chunkOf(t, tt.codec, tt.pages...), typ: format.ByteArray, codec: tt.codec}
			if !bytesDecodable(ch) {
				t.Fatal("not decodable")
			}
			var cv colVals
			err := readLists(ch, column{kind: cMore, maxDef: 2, maxRep: 1}, &cv, tt.nrows, tt.skip)
			defer cv.free()
			if tt.err != "" {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want ErrCorrupt with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cv.rankPresent()
			got := map[int][]string{}
			for r := range tt.nrows {
				for _, item := range cv.listAt(r) {
					got[r] = append(got[r], string(item))
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("lists %v, want %v", got, tt.want)
			}
		})
	}
}

// levelsV1w is a v1 page's levels of w bits: length, then RLE.
func levelsV1w(t *testing.T, w int, lv ...byte) []byte {
	b := levelsW(t, w, lv...)
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// Chunks readBytes does not know are left to parquet-go: another type or
// codec, an encoding quarry never wrote, BIT_PACKED levels, a chunk whose
// dictionary pages and plain pages mix.
func TestBytesDecodable(t *testing.T) {
	plain := page{typ: format.DataPage, n: 1, enc: format.Plain, data: plainBytes("a")}
	dict := page{typ: format.DictionaryPage, n: 1, enc: format.Plain, data: plainBytes("a")}
	idx := page{typ: format.DataPage, n: 1, enc: format.RLEDictionary, data: indexes(t, 0)}
	for _, tt := range []struct {
		name  string
		typ   format.Type
		codec format.CompressionCodec
		pages []page
		want  bool
	}{
		{"plain", format.ByteArray, format.Zstd, []page{plain}, true},
		{"dictionary", format.ByteArray, format.Uncompressed, []page{dict, idx, idx}, true},
		{"int64", format.Int64, format.Zstd, []page{plain}, false},
		{"snappy", format.ByteArray, format.Snappy, []page{plain}, false},
		{"delta byte array", format.ByteArray, format.Zstd, []page{{typ: format.DataPage, n: 1, enc: format.DeltaByteArray}}, false},
		{"bit-packed levels", format.ByteArray, format.Zstd, []page{{typ: format.DataPage, n: 1, enc: format.Plain, levelEnc: format.BitPacked}}, false},
		{"dictionary then plain", format.ByteArray, format.Zstd, []page{dict, idx, plain}, false},
	} {
		codec := tt.codec
		if codec != format.Zstd {
			codec = format.Uncompressed
		}
		ch := rawChunk{data: chunkOf(t, codec, tt.pages...), typ: tt.typ, codec: tt.codec}
		if got := bytesDecodable(ch); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// deltaValues decodes what parquet-go's DELTA_BINARY_PACKED encoder
// writes for int32 and int64 values of every magnitude and count, returns
// the bytes after them, and refuses a header stating more than it is
// asked for or a run cut short (where parquet-go's decoder returns the
// header's count, the missing values from its buffer's past).
func TestDeltaValues(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 2, 31, 32, 33, 127, 128, 129, 1000, 4099} {
		for _, bound := range []int32{1, 255, 1 << 16, 1 << 30} {
			v := make([]int32, n)
			for i := range v {
				v[i] = r.Int32N(bound)
				if bound == 1<<30 && i%3 == 0 {
					v[i] = -v[i]
				}
			}
			b, err := (&delta.BinaryPackedEncoding{}).EncodeInt32(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			got, rest, err := deltaValues[int32](nil, append(b, "tail"...), n)
			if err != nil || string(rest) != "tail" || len(got) != n || n > 0 && !reflect.DeepEqual(got, v) {
				t.Fatalf("%d values below %d: %v (%d of them), rest %q", n, bound, err, len(got), rest)
			}
			if n > 0 {
				if _, _, err := deltaValues[int32](nil, b, n-1); err == nil {
					t.Fatalf("%d values below %d: no error asked for %d", n, bound, n-1)
				}
				if _, _, err := deltaValues[int32](nil, b[:len(b)-1], n); err == nil && n > 1 && bound > 1 {
					t.Fatalf("%d values below %d: no error cut short", n, bound)
				}
			}
		}
	}
}

func TestDeltaValues64(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 33, 129, 1000} {
		for _, shift := range []uint{0, 8, 40, 62} {
			v := make([]int64, n)
			for i := range v {
				v[i] = r.Int64() >> shift
				if i%4 == 0 {
					v[i] = -v[i]
				}
			}
			b, err := (&delta.BinaryPackedEncoding{}).EncodeInt64(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			got, rest, err := deltaValues[int64](nil, b, n)
			if err != nil || len(rest) != 0 || !reflect.DeepEqual(got, v) {
				t.Fatalf("%d values >> %d: %v, %d left", n, shift, err, len(rest))
			}
			if _, _, err := deltaValues[int64](nil, b[:len(b)-1], n); err == nil && n > 1 {
				t.Fatalf("%d values >> %d: no error cut short", n, shift)
			}
		}
	}
}

// FuzzDeltaValues: any bytes decode to an error or to at most the
// values asked for, without a panic; values parquet-go encoded decode to
// themselves.
func FuzzDeltaValues(f *testing.F) {
	enc := func(v ...int32) []byte {
		b, _ := (&delta.BinaryPackedEncoding{}).EncodeInt32(nil, v)
		return b
	}
	f.Add(enc(1, 2, 3, 400, -7), 5)
	f.Add(enc(), 0)
	f.Add(binary.AppendUvarint([]byte{128, 1, 4}, 1<<40), 3)
	f.Fuzz(func(t *testing.T, b []byte, most int) {
		most = min(max(most, 0), 1<<16)
		got, rest, err := deltaValues[int32](nil, b, most)
		if err != nil {
			return
		}
		if len(got) > most || len(rest) > len(b) {
			t.Fatalf("%d values of %d asked, %d bytes left of %d", len(got), most, len(rest), len(b))
		}
		again, _, err := deltaValues[int32](nil, enc(got...), len(got))
		if err != nil || len(again) != len(got) || len(got) > 0 && !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoded: %v, %v; want %v", again, err, got)
		}
	})
}

// A damaged file whose level runs state billions (FuzzDecode's
// rle-expand: 8 KB that took 9-11 GB and 7-30 s through parquet-go's
// decoding of the more column) decodes with a bounded allocation.
func TestDamagedLevelsBounded(t *testing.T) {
	raw, err := os.ReadFile("testdata/fuzz/FuzzDecode/rle-expand")
	if err != nil {
		t.Fatal(err)
	}
	_, quoted, _ := strings.Cut(string(raw), "[]byte(")
	s, err := strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(quoted), ")")))
	if err != nil {
		t.Fatal(err)
	}
	tpl := Templates{{1, 1}: "<*> took <*> ms for <*>", {2, 1}: "<*> x <*>"}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// The projections FuzzDecode reads it with.
	var errs []error
	for m := range 8 {
		p := Projection{Keep: func(k Key) bool { return k.ID == 1 }, Lines: m&1 != 0, Source: m&2 != 0, Attrs: m&4 != 0}
		if m&1 == 0 {
			p.Keep = nil
		}
		_, err := DecodeProjected([]byte(s), tpl, p)
		errs = append(errs, err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Fatalf("decoding %d bytes 8 times allocated %d MB (%v)", len(s), n>>20, errs)
	}
	for m, err := range errs {
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("projection %d: %v, want nil or ErrCorrupt", m, err)
		}
	}
}
