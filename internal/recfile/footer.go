package recfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"

	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/pqfile"
)

// trimFooter rewrites a Parquet file's footer without what this format does
// not use: the page index (column and offset indexes), chunk statistics of
// all but the columns in keepStats, page encoding stats and size
// statistics. The data pages are kept as they are; readers that find no
// page index read the pages in order, as they do for files written before
// page indexes existed.
func trimFooter(data []byte, keepStats map[string]bool) ([]byte, error) {
	n := len(data)
	if n < 12 || string(data[n-4:]) != "PAR1" {
		return nil, fmt.Errorf("trim footer: not a parquet file")
	}
	size := int(binary.LittleEndian.Uint32(data[n-8:]))
	if size > n-12 {
		return nil, fmt.Errorf("trim footer: footer of %d bytes in a file of %d", size, n)
	}
	start := n - 8 - size
	var md format.FileMetaData
	proto := &thrift.CompactProtocol{}
	if err := thrift.Unmarshal(proto, data[start:n-8], &md); err != nil {
		return nil, fmt.Errorf("trim footer: %w", err)
	}
	cut := int64(start)
	for i := range md.RowGroups {
		for j := range md.RowGroups[i].Columns {
			c := &md.RowGroups[i].Columns[j]
			for _, off := range [2]int64{c.ColumnIndexOffset, c.OffsetIndexOffset} {
				if off > 0 && off < cut {
					cut = off
				}
			}
			c.ColumnIndexOffset, c.ColumnIndexLength = 0, 0
			c.OffsetIndexOffset, c.OffsetIndexLength = 0, 0
			m := &c.MetaData
			if len(m.PathInSchema) != 1 || !keepStats[m.PathInSchema[0]] {
				m.Statistics = format.Statistics{}
			}
			m.EncodingStats = nil
			m.SizeStatistics = format.SizeStatistics{}
		}
	}
	if len(keepStats) == 0 {
		// column_orders define how min_value and max_value sort; with no
		// chunk statistics left they define nothing (3 bytes a column).
		md.ColumnOrders = nil
	}
	plainSchema(&md)
	meta, err := marshalFooter(proto, &md)
	if err != nil {
		return nil, fmt.Errorf("trim footer: %w", err)
	}
	out := append(data[:cut:cut], meta...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
	return append(out, "PAR1"...), nil
}

// plainSchema drops what parquet-go writes in a schema that says nothing
// to a reader: a type_length on integer columns (it is for
// FIXED_LEN_BYTE_ARRAY only), and the INT(32|64, signed) annotation of
// INT32 and INT64 columns, which is what an unannotated one means. And
// created_by is "quarry" (parquet-go appends " version (build )"). A
// small file's footer is most of it: 7 bytes less per integer column.
//
// And an annotation parquet-go writes twice, as a logical type and as the
// converted type that means the same, is written once, as the converted
// type (2 bytes against 4 to 7; every Parquet reader reads converted types,
// which is how files were annotated before logical types): UTF8 for
// STRING, DATE, LIST, MAP; INT_32 and INT_64 with INT(32|64, signed) are
// both left out, as above. Timestamps keep both (the converted type cannot
// say whether the time is adjusted to UTC and readers differ in what they
// assume).
func plainSchema(md *format.FileMetaData) {
	md.CreatedBy = "quarry"
	for i := range md.Schema {
		e := &md.Schema[i]
		if dupConverted(e) {
			e.LogicalType = format.LogicalType{}
		}
		if !e.Type.Valid || (e.Type.V != format.Int32 && e.Type.V != format.Int64) {
			continue
		}
		e.TypeLength.Reset()
		it, ok := e.LogicalType.Value.(*format.IntType)
		width, conv := int8(32), deprecated.Int32
		if e.Type.V == format.Int64 {
			width, conv = 64, deprecated.Int64
		}
		if ok && it.IsSigned && it.BitWidth == width && (!e.ConvertedType.Valid || e.ConvertedType.V == conv) {
			e.LogicalType = format.LogicalType{}
			e.ConvertedType.Reset()
		}
	}
}

// dupConverted reports whether e's logical type says no more than its
// converted type.
func dupConverted(e *format.SchemaElement) bool {
	if !e.ConvertedType.Valid {
		return false
	}
	switch e.LogicalType.Value.(type) {
	case *format.StringType:
		return e.ConvertedType.V == deprecated.UTF8
	case *format.DateType:
		return e.ConvertedType.V == deprecated.Date
	case *format.ListType:
		return e.ConvertedType.V == deprecated.List
	case *format.MapType:
		return e.ConvertedType.V == deprecated.Map
	}
	return false
}

// TrimFooter rewrites the footer of a Parquet file (one written by
// parquet-go, as the lake's other tables are) the way Encode trims its
// own: no page index, no page encoding or size statistics, chunk
// statistics only for the top-level columns named in keepStats (none, and
// no column_orders, when keepStats is empty), and page
// headers without their CRC or empty statistics (dropChecksums). The rows are unchanged and
// readers read the file as before; on a small file it saves a few
// kilobytes (the templates file of a Loghub dataset: 4,553 to 3,745 bytes
// on average; the CRCs then 536 bytes over the 11 datasets' templates
// files).
func TrimFooter(data []byte, keepStats ...string) ([]byte, error) {
	keep := make(map[string]bool, len(keepStats))
	for _, c := range keepStats {
		keep[c] = true
	}
	out, err := trimFooter(data, keep)
	if err != nil {
		return nil, err
	}
	return dropChecksums(out)
}

// dropChecksums rewrites a Parquet file (one trimFooter made: no page
// index, no bloom filters) without the CRC of its page headers (and
// without a data page's statistics when they hold nothing:
// marshalPageHeader), moving the
// pages and fixing the footer's offsets and sizes. A CRC is optional in
// Parquet, and 6 of the 25 or so bytes of a small page's header; readers
// check it only when it is there. The page data is copied unchanged,
// except in a zstd column whose pages zstd did not make smaller (their
// compressed sizes sum to at least their uncompressed ones, in every row
// group): its pages are written decompressed and its chunks' codec is
// UNCOMPRESSED, as Parquet allows per column chunk (parquet-go reads all
// chunks of a column with the codec of its first, hence every row group). Such chunks are a few bytes of a
// dictionary or a constant (a zstd frame's header is more than it saves):
// over the Loghub datasets 444 bytes of records files (source, ts_source)
// and 364 of templates files (TestChunksNotLargerThanUncompressed).
func dropChecksums(data []byte) ([]byte, error) {
	n := len(data)
	size := int(binary.LittleEndian.Uint32(data[n-8:]))
	var md format.FileMetaData
	proto := &thrift.CompactProtocol{}
	if err := thrift.Unmarshal(proto, data[n-8-size:n-8], &md); err != nil {
		return nil, fmt.Errorf("drop checksums: %w", err)
	}
	type page struct {
		h          format.PageHeader
		body, next int64
		first      bool // the page at the footer's data_page_offset
	}
	// The pages of every column chunk, and per column whether zstd left
	// it no smaller in every row group: parquet-go reads a column's
	// chunks with one codec, so a column is uncompressed in all of them
	// or in none.
	pages := make([][][]page, len(md.RowGroups))
	var raw []bool
	for i := range md.RowGroups {
		rg := &md.RowGroups[i]
		pages[i] = make([][]page, len(rg.Columns))
		if i == 0 {
			raw = make([]bool, len(rg.Columns))
			for j := range raw {
				raw[j] = true
			}
		}
		if len(rg.Columns) != len(raw) {
			return nil, fmt.Errorf("drop checksums: row group %d has %d columns, the first %d", i, len(rg.Columns), len(raw))
		}
		for j := range rg.Columns {
			m := &rg.Columns[j].MetaData
			pos, end, ok := pqfile.ChunkSpan(m, int64(n-8-size))
			if !ok || pos < 4 {
				return nil, fmt.Errorf("drop checksums: column chunk %v at %d..%d outside the file", m.PathInSchema, pos, end)
			}
			var zsum, rawSum int64
			for pos < end {
				r := bytes.NewReader(data[pos:end])
				var h format.PageHeader
				if err := thrift.NewDecoder(proto.NewReader(r)).Decode(&h); err != nil {
					return nil, fmt.Errorf("drop checksums: page header of %v at %d: %w", m.PathInSchema, pos, err)
				}
				body := pos + int64(end-pos) - int64(r.Len())
				next := body + int64(h.CompressedPageSize)
				if h.CompressedPageSize < 0 || next > end {
					return nil, fmt.Errorf("drop checksums: page of %v at %d overruns its chunk", m.PathInSchema, pos)
				}
				pages[i][j] = append(pages[i][j], page{h, body, next, pos == m.DataPageOffset})
				zsum += int64(h.CompressedPageSize)
				rawSum += int64(h.UncompressedPageSize)
				pos = next
			}
			raw[j] = raw[j] && m.Codec == format.Zstd && rawSum <= zsum
		}
	}
	out := make([]byte, 0, n)
	out = append(out, "PAR1"...)
	var hdr []byte
	for i := range md.RowGroups {
		rg := &md.RowGroups[i]
		var rgSize int64
		for j := range rg.Columns {
			c := &rg.Columns[j]
			m := &c.MetaData
			start := int64(len(out))
			var uncompressed int64
			for _, p := range pages[i][j] {
				h := p.h
				h.CRC = 0
				b := data[p.body:p.next]
				if raw[j] {
					var err error
					if b, err = Zstd.Decode(nil, b); err != nil || len(b) != int(h.UncompressedPageSize) {
						return nil, fmt.Errorf("drop checksums: page of %v does not decompress to its %d bytes: %w", m.PathInSchema, h.UncompressedPageSize, err)
					}
					h.CompressedPageSize = h.UncompressedPageSize
				}
				var err error
				if hdr, err = marshalPageHeader(proto, &h); err != nil {
					return nil, fmt.Errorf("drop checksums: %w", err)
				}
				switch {
				case h.Type == format.DictionaryPage:
					m.DictionaryPageOffset = int64(len(out))
				case p.first:
					m.DataPageOffset = int64(len(out))
				}
				out = append(out, hdr...)
				out = append(out, b...)
				uncompressed += int64(len(hdr)) + int64(h.UncompressedPageSize)
			}
			if raw[j] {
				m.Codec = format.Uncompressed
			}
			m.TotalCompressedSize = int64(len(out)) - start
			m.TotalUncompressedSize = uncompressed
			rgSize += m.TotalCompressedSize
			if j == 0 {
				rg.FileOffset = start
			}
		}
		rg.TotalCompressedSize = rgSize
	}
	meta, err := marshalFooter(proto, &md)
	if err != nil {
		return nil, fmt.Errorf("drop checksums: %w", err)
	}
	out = append(out, meta...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
	return append(out, "PAR1"...), nil
}

// bareDataPageHeader is a version 1 data page header without its
// statistics field, and barePageHeader a page header with only the fields
// a data or dictionary page without a CRC has. parquet-go writes a data
// page's statistics even when it computed none (an empty struct with a
// null count of 0, 4 bytes a page: the Parquet spec asks for the null count
// whenever statistics are written); page statistics are optional and no
// reader needs this one (227 pages in the records and 99 in the templates
// files of the 11 Loghub datasets).
type bareDataPageHeader struct {
	NumValues               int32           `thrift:"1,required"`
	Encoding                format.Encoding `thrift:"2,required"`
	DefinitionLevelEncoding format.Encoding `thrift:"3,required"`
	RepetitionLevelEncoding format.Encoding `thrift:"4,required"`
}

type barePageHeader struct {
	Type                 format.PageType                          `thrift:"1,required"`
	UncompressedPageSize int32                                    `thrift:"2,required"`
	CompressedPageSize   int32                                    `thrift:"3,required"`
	DataPageHeader       thrift.Null[bareDataPageHeader]          `thrift:"5,optional"`
	DictionaryPageHeader thrift.Null[format.DictionaryPageHeader] `thrift:"7,optional"`
}

// marshalPageHeader encodes h, leaving out a version 1 data page's
// statistics when they hold nothing but a null count of 0.
func marshalPageHeader(proto thrift.Protocol, h *format.PageHeader) ([]byte, error) {
	if h.CRC != 0 || h.IndexPageHeader.Valid || h.DataPageHeaderV2.Valid ||
		(h.DataPageHeader.Valid && !isZero(h.DataPageHeader.V.Statistics)) {
		return thrift.Marshal(proto, h)
	}
	b := barePageHeader{Type: h.Type, UncompressedPageSize: h.UncompressedPageSize,
		CompressedPageSize: h.CompressedPageSize, DictionaryPageHeader: h.DictionaryPageHeader}
	if d, ok := h.DataPageHeader.Get(); ok {
		b.DataPageHeader = thrift.New(bareDataPageHeader{d.NumValues, d.Encoding, d.DefinitionLevelEncoding, d.RepetitionLevelEncoding})
	}
	return thrift.Marshal(proto, &b)
}

// isZero reports whether s holds no statistic (a null count of 0 counts
// as none).
func isZero(s format.Statistics) bool {
	return s.Max == nil && s.Min == nil && s.NullCount == 0 && s.DistinctCount == 0 && s.MaxValue == nil && s.MinValue == nil
}

// footerMetaData, footerRowGroup, footerChunk and footerColumnMeta are
// format.FileMetaData down to a column chunk's metadata, with the same
// field ids, for marshalFooter: where the format types write a field
// whatever its value (writezero), these leave out an optional one that
// holds nothing.
type footerMetaData struct {
	Version          int32                              `thrift:"1,required"`
	Schema           thrift.Slice[format.SchemaElement] `thrift:"2,required"`
	NumRows          int64                              `thrift:"3,required"`
	RowGroups        thrift.Slice[footerRowGroup]       `thrift:"4,required"`
	KeyValueMetadata thrift.Slice[format.KeyValue]      `thrift:"5,optional"`
	CreatedBy        string                             `thrift:"6,optional"`
	ColumnOrders     thrift.Slice[format.ColumnOrder]   `thrift:"7,optional"`
}

type footerRowGroup struct {
	Columns             thrift.Slice[footerChunk]          `thrift:"1,required"`
	TotalByteSize       int64                              `thrift:"2,required"`
	NumRows             int64                              `thrift:"3,required"`
	SortingColumns      thrift.Slice[format.SortingColumn] `thrift:"4,optional"`
	FileOffset          int64                              `thrift:"5,optional"`
	TotalCompressedSize int64                              `thrift:"6,optional"`
	Ordinal             int16                              `thrift:"7,optional"`
}

type footerChunk struct {
	FilePath          string           `thrift:"1,optional"`
	FileOffset        int64            `thrift:"2,required"`
	MetaData          footerColumnMeta `thrift:"3,optional"`
	OffsetIndexOffset int64            `thrift:"4,optional"`
	OffsetIndexLength int32            `thrift:"5,optional"`
	ColumnIndexOffset int64            `thrift:"6,optional"`
	ColumnIndexLength int32            `thrift:"7,optional"`
}

type footerColumnMeta struct {
	Type                  format.Type                            `thrift:"1,required"`
	Encoding              thrift.Slice[format.Encoding]          `thrift:"2,required"`
	PathInSchema          thrift.Slice[string]                   `thrift:"3,required"`
	Codec                 format.CompressionCodec                `thrift:"4,required"`
	NumValues             int64                                  `thrift:"5,required"`
	TotalUncompressedSize int64                                  `thrift:"6,required"`
	TotalCompressedSize   int64                                  `thrift:"7,required"`
	KeyValueMetadata      thrift.Slice[format.KeyValue]          `thrift:"8,optional"`
	DataPageOffset        int64                                  `thrift:"9,required"`
	IndexPageOffset       int64                                  `thrift:"10,optional"`
	DictionaryPageOffset  int64                                  `thrift:"11,optional"`
	Statistics            format.Statistics                      `thrift:"12,optional"`
	EncodingStats         thrift.Slice[format.PageEncodingStats] `thrift:"13,optional"`
	BloomFilterOffset     int64                                  `thrift:"14,optional"`
	BloomFilterLength     int32                                  `thrift:"15,optional"`
	SizeStatistics        format.SizeStatistics                  `thrift:"16,optional"`
}

// marshalFooter encodes md as a format.FileMetaData, less what says
// nothing or says wrong: a column chunk's statistics when they hold
// nothing (parquet-go writes an empty struct with a null count of 0 in
// every chunk, 4 bytes a chunk, which tells a reader that an optional
// column with nulls has none: one that prunes by null count would skip
// its row groups for "IS NULL"), the first row group's ordinal (0, which
// is what a reader takes a missing ordinal for; it matters to encrypted
// files only), and a column chunk's deprecated file_offset, written as
// 0 as the Parquet spec asks when no column metadata is written outside
// the footer (parquet-go wrote the chunk's start; readers find a chunk by
// its page offsets). An encrypted file, or one with geospatial statistics,
// is an error: quarry writes neither.
func marshalFooter(proto thrift.Protocol, md *format.FileMetaData) ([]byte, error) {
	if !reflect.ValueOf(md.EncryptionAlgorithm).IsZero() || md.FooterSigningKeyMetadata != nil {
		return nil, fmt.Errorf("marshal footer: encrypted file")
	}
	f := footerMetaData{Version: md.Version, Schema: md.Schema, NumRows: md.NumRows,
		RowGroups:        make(thrift.Slice[footerRowGroup], len(md.RowGroups)),
		KeyValueMetadata: md.KeyValueMetadata, CreatedBy: md.CreatedBy, ColumnOrders: md.ColumnOrders}
	for i := range md.RowGroups {
		rg := &md.RowGroups[i]
		g := &f.RowGroups[i]
		*g = footerRowGroup{Columns: make(thrift.Slice[footerChunk], len(rg.Columns)), TotalByteSize: rg.TotalByteSize,
			NumRows: rg.NumRows, SortingColumns: rg.SortingColumns, FileOffset: rg.FileOffset,
			TotalCompressedSize: rg.TotalCompressedSize, Ordinal: rg.Ordinal}
		for j := range rg.Columns {
			c := &rg.Columns[j]
			m := &c.MetaData
			if !reflect.ValueOf(c.CryptoMetadata).IsZero() || c.EncryptedColumnMetadata != nil || !reflect.ValueOf(m.GeospatialStatistics).IsZero() {
				return nil, fmt.Errorf("marshal footer: column chunk %v encrypted or with geospatial statistics", m.PathInSchema)
			}
			g.Columns[j] = footerChunk{FilePath: c.FilePath,
				OffsetIndexOffset: c.OffsetIndexOffset, OffsetIndexLength: c.OffsetIndexLength,
				ColumnIndexOffset: c.ColumnIndexOffset, ColumnIndexLength: c.ColumnIndexLength,
				MetaData: footerColumnMeta{Type: m.Type, Encoding: m.Encoding, PathInSchema: m.PathInSchema, Codec: m.Codec,
					NumValues: m.NumValues, TotalUncompressedSize: m.TotalUncompressedSize, TotalCompressedSize: m.TotalCompressedSize,
					KeyValueMetadata: m.KeyValueMetadata, DataPageOffset: m.DataPageOffset, IndexPageOffset: m.IndexPageOffset,
					DictionaryPageOffset: m.DictionaryPageOffset, Statistics: m.Statistics, EncodingStats: m.EncodingStats,
					BloomFilterOffset: m.BloomFilterOffset, BloomFilterLength: m.BloomFilterLength, SizeStatistics: m.SizeStatistics}}
		}
	}
	b, err := thrift.Marshal(proto, &f)
	if err != nil {
		return nil, fmt.Errorf("marshal footer: %w", err)
	}
	return b, nil
}
