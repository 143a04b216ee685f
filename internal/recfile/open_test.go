package recfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/pqtest"
)

func openTestFile(t *testing.T) []byte {
	t.Helper()
	tpl := Templates{{1, 1}: "<*> took <*> ms"}
	f, err := Encode([]Row{{WALSeq: 1, TS: ns("2026-11-29T00:00:00Z"), TemplateID: 1, TemplateVersion: 1, Source: "s", Params: []string{"a", "42"}}}, tpl)
	if err != nil {
		t.Fatal(err)
	}
	return f.Data
}

// TestOpenParquetDamagedTrailer: a footer length past the file's size is
// refused before anything is allocated for it (parquet-go alone allocates
// the length, up to 4 GiB, and then fails).
func TestOpenParquetDamagedTrailer(t *testing.T) {
	good := openTestFile(t)
	tpl := Templates{{1, 1}: "<*> took <*> ms"}
	for _, tt := range []struct {
		name string
		mod  func([]byte) []byte
	}{
		{"length past the file", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[len(b)-8:], 0xfffffff0)
			return b
		}},
		{"length one past", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[len(b)-8:], uint32(len(b)-11))
			return b
		}},
		{"no magic", func(b []byte) []byte { b[len(b)-1] = 'X'; return b }},
		{"too short", func(b []byte) []byte { return b[len(b)-11:] }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.mod(bytes.Clone(good))
			var errs []error
			n := pqtest.Allocated(func() {
				_, err := Decode(data, tpl)
				errs = append(errs, err)
				_, err = DecodeProjected(data, tpl, Projection{Lines: true})
				errs = append(errs, err)
				_, err = OpenAt(bytes.NewReader(data), int64(len(data)))
				errs = append(errs, err)
				_, err = DecodeRows(data, tpl)
				errs = append(errs, err)
			})
			for i, err := range errs {
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("decoder %d: %v, want ErrCorrupt", i, err)
				}
			}
			if n > 16<<20 {
				t.Errorf("refusing the file allocated %d MB", n>>20)
			}
		})
	}
	if _, err := OpenParquet(bytes.NewReader(good), int64(len(good))); err != nil {
		t.Fatalf("the undamaged file: %v", err)
	}
}

// TestOpenParquetForeignCodec: quarry writes zstd or nothing; a file that
// says another codec (a flipped codec byte, most likely) is refused, since
// parquet-go's other codecs allocate the page header's size before they
// decode (an lz4 page of a damaged file asked for 8 GiB).
func TestOpenParquetForeignCodec(t *testing.T) {
	type row struct {
		A string `parquet:"a"`
	}
	for _, c := range []struct {
		name  string
		codec parquet.WriterOption
	}{{"lz4", parquet.Compression(&parquet.Lz4Raw)}, {"gzip", parquet.Compression(&parquet.Gzip)}, {"snappy", parquet.Compression(&parquet.Snappy)}} {
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[row](&buf, c.codec)
		if _, err := w.Write([]row{{"x"}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenParquet(bytes.NewReader(buf.Bytes()), int64(buf.Len())); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
}
