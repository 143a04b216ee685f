package lake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/pqfile"
	"github.com/quarrylake/quarry/internal/pqtest"
	"github.com/quarrylake/quarry/internal/recfile"
)

func TestTruncatePrefix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{{"abc", 2, "ab"}, {"abc", 3, "abc"}, {"", 1, ""}, {"ééé", 2, "éé"}} {
		if got := truncatePrefix(tc.in, tc.n); got != tc.want {
			t.Errorf("truncatePrefix(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// flatRows are n template rows as the encoder writes them: versions,
// merges (when merged), non-UTF-8 bytes and empty texts among them.
func flatRows(n int, merged bool) []TemplateRow {
	rows := make([]TemplateRow, n)
	for i := range rows {
		r := TemplateRow{TemplateID: int64(1 + i/2), Tenant: []string{"acme", "globex"}[i%3/2], Version: int32(1 + i%2),
			Template: fmt.Sprintf("user <*> logged in from <*> after %d tries", i), Kind: []string{"created", "changed"}[i%2], WALSeq: int64(10 + i)}
		switch {
		case i%7 == 3:
			r.Template = "caf\xe9 <*> \xff"
		case i%11 == 5:
			r.Template = ""
		case merged && i%5 == 4:
			r.Kind, r.MergedInto = "merged", int64(1+i/4)
		}
		rows[i] = r
	}
	return rows
}

func sameRow(a, b TemplateRow) bool { return reflect.DeepEqual(a, b) }

func openTemplates(t testing.TB, data []byte) *parquet.File {
	t.Helper()
	f, err := recfile.OpenParquet(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestReadFlatTemplates: a templates file as EncodeTemplates writes it
// without kinds (merged_into or not, at either level, of one row or of
// more than a page of values) reads back column by column exactly as
// written and as parquet-go's generic reader reads it; a file with kinds
// is left to the generic reader (errNotFlat).
func TestReadFlatTemplates(t *testing.T) {
	ctx := context.Background()
	for _, merged := range []bool{false, true} {
		for _, high := range []bool{false, true} {
			for _, n := range []int{1, 3000} {
				t.Run(fmt.Sprintf("merged=%v/high=%v/rows=%d", merged, high, n), func(t *testing.T) {
					rows := flatRows(n, merged)
					data, err := EncodeTemplates(rows, high)
					if err != nil {
						t.Fatal(err)
					}
					f := openTemplates(t, data)
					got, err := readFlatTemplates(ctx, f, "t.parquet")
					if err != nil {
						t.Fatal(err)
					}
					if !slices.EqualFunc(got, rows, sameRow) {
						t.Fatalf("read %d rows, want %d: first %+v, want %+v", len(got), len(rows), got[0], rows[0])
					}
					generic, err := readRows[TemplateRow](ctx, f, "t.parquet")
					if err != nil {
						t.Fatal(err)
					}
					if !slices.EqualFunc(got, generic, sameRow) {
						t.Fatalf("column reader and generic reader disagree")
					}
				})
			}
		}
	}
	rows := flatRows(5, true)
	rows[2].Kinds = []string{"ipv4", ""}
	data, err := EncodeTemplates(rows, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readFlatTemplates(ctx, openTemplates(t, data), "k.parquet"); !errors.Is(err, errNotFlat) {
		t.Fatalf("a file with kinds: %v, want errNotFlat", err)
	}
}

// FuzzTemplateFile: readTemplateRows' column reader never panics on any
// bytes, and where it reads a file, parquet-go's generic reader reads the
// same rows from it.
func FuzzTemplateFile(f *testing.F) {
	for _, merged := range []bool{false, true} {
		for _, n := range []int{1, 40} {
			data, err := EncodeTemplates(flatRows(n, merged), true)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		pf, err := openChecked(data) // as readTemplateRows opens a templates file
		if err != nil {
			return
		}
		got, err := readFlatTemplates(ctx, pf, "f.parquet")
		if err != nil {
			return
		}
		generic, gerr := func() (rows []TemplateRow, err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("generic reader panicked: %v", p)
				}
			}()
			return readRows[TemplateRow](ctx, pf, "f.parquet")
		}()
		if gerr != nil {
			return // damage only the generic reader notices (it reads the pages again)
		}
		if !slices.EqualFunc(got, generic, sameRow) {
			t.Fatalf("column reader read %d rows, generic reader %d: %+v vs %+v", len(got), len(generic), got, generic)
		}
	})
}

// TestTemplateRowsOfLayouts: every templates layout reads back its rows
// through templateRowsOf, the flat ones column by column and the others
// through the generic reader, merged_into kept wherever a file has it
// (a file of flat columns plus one this reader does not know, as a later
// templates version may add, goes to the generic reader with its merges).
func TestTemplateRowsOfLayouts(t *testing.T) {
	ctx := context.Background()
	type mergedPlus struct {
		TemplateID int64  `parquet:"template_id"`
		Tenant     string `parquet:"tenant"`
		Version    int32  `parquet:"version"`
		Template   string `parquet:"template"`
		Kind       string `parquet:"kind"`
		MergedInto int64  `parquet:"merged_into"`
		WALSeq     int64  `parquet:"wal_seq"`
		Later      string `parquet:"later"`
	}
	rows := flatRows(30, true)
	plus := make([]mergedPlus, len(rows))
	for i, r := range rows {
		plus[i] = mergedPlus{r.TemplateID, r.Tenant, r.Version, r.Template, r.Kind, r.MergedInto, r.WALSeq, "x"}
	}
	withKinds := flatRows(30, true)
	withKinds[4].Kinds = []string{"ipv4", ""}
	flat, err := EncodeTemplates(rows, true)
	if err != nil {
		t.Fatal(err)
	}
	kinds, err := EncodeTemplates(withKinds, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want []TemplateRow
	}{
		{"flat", flat, rows},
		{"kinds", kinds, withKinds},
		{"a column of a later version", pqtest.Write(t, plus), rows},
		{"previous", pqtest.Write(t, rows), rows},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := templateRowsOf(ctx, openTemplates(t, tc.data), tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tc.want, sameRow) {
				t.Fatalf("read %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestTemplatesFileBomb: a templates file whose largest page body is
// replaced by a zstd bomb of the same length (EncodeTemplates writes no
// page CRC, so parquet-go has nothing to catch it by) is refused within a
// few MB, before parquet-go decodes it whole; so is one whose bomb states
// the page's true size (parquet-go's decoder stops a frame there).
func TestTemplatesFileBomb(t *testing.T) {
	rows := make([]TemplateRow, 4000)
	for i := range rows {
		rows[i] = TemplateRow{TemplateID: int64(i + 1), Tenant: "acme", Version: 1, Kind: "created", WALSeq: int64(i + 1),
			Template: fmt.Sprintf("service %x started <*> on %d with %q", i*7919, i*104729, strings.Repeat("ab", i%37))}
	}
	good, err := EncodeTemplates(rows, true)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := recfile.OpenParquet(bytes.NewReader(good), int64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	var size int64
	for _, rg := range pf.Metadata().RowGroups {
		for _, c := range rg.Columns {
			at, end, ok := pqfile.ChunkSpan(&c.MetaData, int64(len(good)))
			if !ok {
				t.Fatal("a chunk outside the file")
			}
			for pos := at; pos < end; {
				h, n, err := pqfile.ReadPageHeader(good[pos:])
				if err != nil {
					t.Fatal(err)
				}
				if b := good[pos+int64(n) : pos+int64(n)+h.Compressed]; len(b) > len(body) {
					body, size = b, h.Uncompressed
				}
				pos += int64(n) + h.Compressed
			}
		}
	}
	if len(body) < 8<<10 {
		t.Fatalf("the largest page body is %d bytes: too small a bomb", len(body))
	}
	// quarry's own frames state their size: checked without decoding.
	if n := pqtest.Allocated(func() { err = pqfile.CheckBodies(good, pf) }); err != nil || n > 64<<10 {
		t.Fatalf("the good file's bodies: err %v, %d KB allocated (decoded to check?)", err, n>>10)
	}
	at := bytes.Index(good, body)
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.OpenTable(s, TemplatesTable)
	ctx := t.Context()
	for _, states := range []uint64{0, uint64(size)} {
		data := bytes.Clone(good)
		copy(data[at:], pqtest.ZstdBomb(len(body), states))
		if err := s.Put(ctx, tbl.FileKey("bomb.parquet"), data); err != nil {
			t.Fatal(err)
		}
		var got []TemplateRow
		n := pqtest.Allocated(func() { got, err = readTemplateRows(ctx, tbl, "bomb.parquet") })
		if err == nil || n > 16<<20 {
			t.Errorf("bomb stating %d (page of %d, expanding to %d MB): %d rows, err %v, %d MB allocated",
				states, size, (len(body)-9)/4>>3, len(got), err, n>>20)
		}
	}
}
