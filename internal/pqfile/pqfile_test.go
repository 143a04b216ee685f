package pqfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

type row struct {
	Name string `parquet:"name"`
	N    int64  `parquet:"n"`
}

func sample(t testing.TB, codec parquet.WriterOption) []byte {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf, codec)
	rows := make([]row, 1000)
	for i := range rows {
		rows[i] = row{Name: strings.Repeat("x", i%50), N: int64(i)}
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var zstdOnly = []format.CompressionCodec{format.Zstd}

func TestOpen(t *testing.T) {
	good := sample(t, parquet.Compression(&parquet.Zstd))
	footerLen := int(binary.LittleEndian.Uint32(good[len(good)-8:]))
	footerAt := len(good) - 8 - footerLen
	withByte := func(at int, b byte) []byte {
		d := bytes.Clone(good)
		d[at] = b
		return d
	}
	tests := []struct {
		name   string
		data   []byte
		codecs []format.CompressionCodec
		want   string // substring of the error; "" for none
	}{
		{"whole", good, zstdOnly, ""},
		{"too short", good[:11], zstdOnly, "too short"},
		{"no magic", withByte(len(good)-1, 'X'), zstdOnly, "no magic"},
		{"footer longer than the file", withByte(len(good)-5, 0x7f), zstdOnly, "footer of"},
		{"codec not accepted", good, []format.CompressionCodec{format.Snappy}, "compressed with"},
		// The footer starts with field 1 (version, i32) then field 2, the
		// schema list: its header states 15+ elements in a varint; 0x7f
		// after it claims more elements than the footer has bytes.
		{"list longer than the footer", func() []byte {
			d := bytes.Clone(good)
			i := bytes.IndexByte(d[footerAt:], 0x19) // field 2, type list
			d[footerAt+i+1] = 0xfc                   // 15 (varint follows) elements of structs
			d[footerAt+i+2] = 0xff
			d[footerAt+i+3] = 0xff
			d[footerAt+i+4] = 0x7f
			return d
		}(), zstdOnly, "elements stated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Open(bytes.NewReader(tt.data), int64(len(tt.data)), tt.codecs)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if err := CheckPages(tt.data, f, MaxPageSize); err != nil {
					t.Fatalf("pages of a whole file: %v", err)
				}
				if f.NumRows() != 1000 {
					t.Fatalf("%d rows", f.NumRows())
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrCorrupt with %q", err, tt.want)
			}
		})
	}
}

// TestCheckPages: page headers whose sizes run past their chunk, or state
// more than the limit uncompressed, are refused before a codec allocates.
func TestCheckPages(t *testing.T) {
	good := sample(t, parquet.Compression(&parquet.Zstd))
	f, err := Open(bytes.NewReader(good), int64(len(good)), zstdOnly)
	if err != nil {
		t.Fatal(err)
	}
	m := f.Metadata().RowGroups[0].Columns[0].MetaData
	at := m.DataPageOffset
	if d := m.DictionaryPageOffset; d > 0 && d < at {
		at = d
	}
	// A page header starts with field 1 (type, i32: 0x15 and a varint),
	// field 2 (uncompressed size) and field 3 (compressed size), each 0x15
	// and a zigzag varint.
	h := good[at:]
	if h[0] != 0x15 || h[2] != 0x15 {
		t.Fatalf("page header starts % x", h[:4])
	}
	varintLen := func(b []byte) int {
		n := 1
		for b[n-1]&0x80 != 0 {
			n++
		}
		return n
	}
	second := 3 + varintLen(h[3:])
	if h[second] != 0x15 {
		t.Fatalf("no compressed size after the uncompressed one: % x", h[:second+1])
	}
	// The compressed size restated as the largest number its varint's
	// length holds: far past the chunk.
	overrun := bytes.Clone(good)
	for k, n := 0, varintLen(h[second+1:]); k < n; k++ {
		b := byte(0xff)
		switch {
		case k == n-1:
			b = 0x7f
		case k == 0:
			b = 0xfe // an even zigzag: positive
		}
		overrun[at+int64(second)+1+int64(k)] = b
	}
	tests := []struct {
		name    string
		data    []byte
		maxPage int64
		want    string
	}{
		{"whole", good, MaxPageSize, ""},
		{"compressed size past the chunk", overrun, MaxPageSize, "states"},
		{"uncompressed size over the limit", good, 16, "states"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckPages(tt.data, f, tt.maxPage)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrCorrupt with %q", err, tt.want)
			}
		})
	}
}

func FuzzCheckFooter(f *testing.F) {
	good := sample(f, parquet.Compression(&parquet.Zstd))
	n := int(binary.LittleEndian.Uint32(good[len(good)-8:]))
	f.Add(good[len(good)-8-n : len(good)-8])
	f.Add([]byte{0x19, 0xfc, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		w := walker{b: b}
		err := w.value(typeStruct, 0)
		if err == nil && w.off > len(b) {
			t.Fatalf("walked %d bytes of %d", w.off, len(b))
		}
		_, _, _ = ReadPageHeader(b)
	})
}

// ReadPageHeader gives what parquet-go's Thrift encoding of a page header
// holds, statistics and checksum skipped, and its length; a header cut
// short, or whose sizes are missing, is an error.
func TestReadPageHeader(t *testing.T) {
	stats := format.Statistics{MinValue: []byte("a"), MaxValue: []byte("zz"), NullCount: 3}
	tests := []struct {
		name string
		h    format.PageHeader
		want PageHeader
	}{
		{"data v1", format.PageHeader{Type: format.DataPage, UncompressedPageSize: 100, CompressedPageSize: 40, CRC: 77,
			DataPageHeader: thrift.New(format.DataPageHeader{NumValues: 12, Encoding: format.DeltaBinaryPacked, DefinitionLevelEncoding: format.RLE, RepetitionLevelEncoding: format.BitPacked, Statistics: stats})},
			PageHeader{Type: PageData, Uncompressed: 100, Compressed: 40, NumValues: 12, Encoding: int32(format.DeltaBinaryPacked), DefEncoding: int32(format.RLE), RepEncoding: int32(format.BitPacked), Compressed2: true}},
		{"dictionary", format.PageHeader{Type: format.DictionaryPage, UncompressedPageSize: 8, CompressedPageSize: 8,
			DictionaryPageHeader: thrift.New(format.DictionaryPageHeader{NumValues: 2, Encoding: format.Plain, IsSorted: true})},
			PageHeader{Type: PageDictionary, Uncompressed: 8, Compressed: 8, NumValues: 2, Encoding: int32(format.Plain), Compressed2: true}},
		{"data v2, not compressed", format.PageHeader{Type: format.DataPageV2, UncompressedPageSize: 1 << 20, CompressedPageSize: 1<<20 - 1,
			DataPageHeaderV2: thrift.New(format.DataPageHeaderV2{NumValues: 1000, NumNulls: 10, NumRows: 990, Encoding: format.RLEDictionary,
				DefinitionLevelsByteLength: 30, RepetitionLevelsByteLength: 20, IsCompressed: thrift.New(false), Statistics: stats})},
			PageHeader{Type: PageDataV2, Uncompressed: 1 << 20, Compressed: 1<<20 - 1, NumValues: 1000, NumNulls: 10, NumRows: 990,
				Encoding: int32(format.RLEDictionary), DefBytes: 30, RepBytes: 20, Compressed2: false}},
		{"data v2, compressed by default", format.PageHeader{Type: format.DataPageV2, UncompressedPageSize: 5, CompressedPageSize: 4,
			DataPageHeaderV2: thrift.New(format.DataPageHeaderV2{NumValues: 1, NumRows: 1})},
			PageHeader{Type: PageDataV2, Uncompressed: 5, Compressed: 4, NumValues: 1, NumRows: 1, Compressed2: true}},
	}
	for _, tt := range tests {
		b, err := thrift.Marshal(new(thrift.CompactProtocol), &tt.h)
		if err != nil {
			t.Fatal(err)
		}
		got, n, err := ReadPageHeader(append(b, 0xde, 0xad))
		if err != nil || n != len(b) || got != tt.want {
			t.Errorf("%s: %+v, %d bytes, %v; want %+v, %d bytes", tt.name, got, n, err, tt.want, len(b))
		}
		for cut := range len(b) {
			if _, _, err := ReadPageHeader(b[:cut]); err == nil {
				t.Errorf("%s: no error for the header cut at %d of %d", tt.name, cut, len(b))
			}
		}
	}
	b, _ := thrift.Marshal(new(thrift.CompactProtocol), &format.DictionaryPageHeader{NumValues: 1})
	if _, _, err := ReadPageHeader(b); err == nil {
		t.Error("no error for a header without sizes")
	}
}
