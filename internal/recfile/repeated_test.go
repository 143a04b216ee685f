package recfile

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
)

// levelPage is a page of a repeated byte array column with the levels and
// values a test gives, whatever a writer would make of them: the pages a
// damaged file may hold.
type levelPage struct {
	parquet.Page // nil: only the methods below are called
	reps, defs   []byte
	vals         []string
}

func (p *levelPage) RepetitionLevels() []byte       { return p.reps }
func (p *levelPage) DefinitionLevels() []byte       { return p.defs }
func (p *levelPage) Dictionary() parquet.Dictionary { return nil }
func (p *levelPage) Data() encoding.Values {
	var b []byte
	offs := []uint32{0}
	for _, v := range p.vals {
		b = append(b, v...)
		offs = append(offs, uint32(len(b)))
	}
	return encoding.ByteArrayValues(b, offs)
}

// fakePages hands out its pages in turn.
type fakePages struct{ pages []parquet.Page }

func (f *fakePages) ReadPage() (parquet.Page, error) {
	if len(f.pages) == 0 {
		return nil, io.EOF
	}
	p := f.pages[0]
	f.pages = f.pages[1:]
	return p, nil
}
func (f *fakePages) SeekToRow(int64) error { return nil }
func (f *fakePages) Close() error          { return nil }

// TestReadRepeated: a repeated column's levels walked over its values, in
// one page or across pages, rows skipped, and every way the levels and
// values of a damaged page can disagree an ErrCorrupt, not a read past
// them or a row the row group does not have.
func TestReadRepeated(t *testing.T) {
	c := column{kind: cMore, maxDef: 2}
	tests := []struct {
		name  string
		nrows int
		skip  []bool
		pages []*levelPage
		want  [][]string // by row; nil: none
		err   string     // a part of the ErrCorrupt's text
	}{
		{name: "rows with items, empty and null lists", nrows: 4,
			pages: []*levelPage{{reps: []byte{0, 1, 0, 0, 0}, defs: []byte{2, 2, 1, 0, 2}, vals: []string{"a", "b", "c"}}},
			want:  [][]string{{"a", "b"}, nil, nil, {"c"}}},
		{name: "a row's items across two pages", nrows: 2,
			pages: []*levelPage{{reps: []byte{0, 1}, defs: []byte{2, 2}, vals: []string{"a", "b"}}, {reps: []byte{1, 0}, defs: []byte{2, 2}, vals: []string{"c", "d"}}},
			want:  [][]string{{"a", "b", "c"}, {"d"}}},
		{name: "skipped rows left out", nrows: 3, skip: []bool{false, true, false},
			pages: []*levelPage{{reps: []byte{0, 0, 1, 0}, defs: []byte{2, 2, 2, 2}, vals: []string{"a", "b", "c", "d"}}},
			want:  [][]string{{"a"}, nil, {"d"}}},
		{name: "levels of different lengths", nrows: 1,
			pages: []*levelPage{{reps: []byte{0}, defs: []byte{2, 2}, vals: []string{"a"}}}, err: "repetition levels"},
		{name: "fewer values than defined levels", nrows: 1,
			pages: []*levelPage{{reps: []byte{0, 1}, defs: []byte{2, 2}, vals: []string{"a"}}}, err: "more defined levels"},
		{name: "more values than defined levels", nrows: 1,
			pages: []*levelPage{{reps: []byte{0}, defs: []byte{2}, vals: []string{"a", "b"}}}, err: "defined levels"},
		{name: "the first level continues a row", nrows: 1,
			pages: []*levelPage{{reps: []byte{1}, defs: []byte{2}, vals: []string{"a"}}}, err: "continues a row"},
		{name: "more rows than the row group", nrows: 1,
			pages: []*levelPage{{reps: []byte{0, 0}, defs: []byte{2, 2}, vals: []string{"a", "b"}}}, err: "more rows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []parquet.Page
			for _, p := range tt.pages {
				ps = append(ps, p)
			}
			var cv colVals
			err := readRepeated(&fakePages{pages: ps}, c, &cv, tt.nrows, tt.skip)
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
			for r := range tt.nrows {
				var got []string
				for _, item := range cv.listAt(r) {
					got = append(got, string(item))
				}
				if strings.Join(got, ",") != strings.Join(tt.want[r], ",") || (got == nil) != (tt.want[r] == nil) {
					t.Errorf("row %d: %q, want %q", r, got, tt.want[r])
				}
			}
		})
	}
}
