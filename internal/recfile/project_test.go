package recfile

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

// roundTripRows is the round-trip corpus as rows and templates, WAL order.
func roundTripRows(t testing.TB) ([]Row, Templates) {
	tpl := Templates{}
	var rows []Row
	for i, c := range roundTrips {
		id := uint64(100 - i)
		tpl[Key{id, 1}] = c.tpl
		r := Row{WALSeq: uint64(1 + i/5), Index: uint32(i % 5), TS: c.ts, TemplateID: id, TemplateVersion: 1,
			Params: c.params, Source: "file:/var/log/" + fmt.Sprint(i%2)}
		if i%3 == 0 {
			r.Attrs = []streams.Attr{{Key: "op", Value: "insert"}, {Key: "k", Value: fmt.Sprint(i)}}
		}
		if _, err := mining.Render(c.tpl, c.params); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows, tpl
}

// keepers are the Keep functions the projection tests try.
func keepers(tpl Templates) map[string]func(Key) bool {
	keys := make([]Key, 0, len(tpl))
	for k := range tpl {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int { return int(a.ID) - int(b.ID) })
	tenth := map[Key]bool{}
	for i, k := range keys {
		if i%10 == 3 {
			tenth[k] = true
		}
	}
	return map[string]func(Key) bool{
		"nil":  nil,
		"all":  func(Key) bool { return true },
		"none": func(Key) bool { return false },
		"odd":  func(k Key) bool { return k.ID%2 == 1 },
		"10%":  func(k Key) bool { return tenth[k] },
	}
}

// checkProjected compares DecodeProjected with Decode filtered for every
// combination of Lines, Source and Attrs and each keeper.
func checkProjected(t *testing.T, data []byte, tpl Templates) {
	t.Helper()
	all, err := Decode(data, tpl)
	if err != nil {
		t.Fatal(err)
	}
	for name, keep := range keepers(tpl) {
		for m := 0; m < 32; m++ {
			// m&8: through a Reader (OpenAt), reading column chunks; m&16:
			// in file order, put in WAL order by WALOrder.
			p := Projection{Keep: keep, Lines: m&1 != 0, Source: m&2 != 0, Attrs: m&4 != 0, FileOrder: m&16 != 0}
			asked := map[Key]int{}
			if keep != nil {
				p.Keep = func(k Key) bool { asked[k]++; return keep(k) }
			}
			decode := func() ([]Record, error) { return DecodeProjected(data, tpl, p) }
			if m&8 != 0 {
				decode = func() ([]Record, error) {
					r, err := OpenAt(bytes.NewReader(data), int64(len(data)))
					if err != nil {
						return nil, err
					}
					return r.DecodeProjected(tpl, p)
				}
			}
			got, err := decode()
			if err != nil {
				t.Fatalf("keep %s lines %v source %v attrs %v reader %v: %v", name, p.Lines, p.Source, p.Attrs, m&8 != 0, err)
			}
			if p.FileOrder {
				if order := WALOrder(got); order != nil {
					inWAL := make([]Record, len(got))
					for x, i := range order {
						inWAL[x] = got[i]
					}
					got = inWAL
				}
			}
			var want []Record
			for _, r := range all {
				if keep != nil && !keep(Key{r.TemplateID, r.TemplateVersion}) {
					continue
				}
				if !p.Lines {
					r.Line = nil
				}
				if !p.Source {
					r.Source = ""
				}
				if !p.Attrs {
					r.Attrs = nil
				}
				want = append(want, r)
			}
			if len(got) != len(want) {
				t.Fatalf("keep %s %+v: %d records, want %d", name, p, len(got), len(want))
			}
			for i := range got {
				g, w := got[i], want[i]
				if g.WALSeq != w.WALSeq || g.Index != w.Index || g.TS != w.TS || g.TSSource != w.TSSource ||
					g.TemplateID != w.TemplateID || g.TemplateVersion != w.TemplateVersion || g.Source != w.Source ||
					!slices.Equal(g.Attrs, w.Attrs) || !bytes.Equal(g.Line, w.Line) || (g.Line == nil) != (w.Line == nil) {
					t.Fatalf("keep %s lines %v source %v attrs %v: record %d\n got %+v\nwant %+v", name, p.Lines, p.Source, p.Attrs, i, g, w)
				}
			}
			for k, n := range asked {
				if n != 1 {
					t.Errorf("keep %s: Keep asked %d times for %v", name, n, k)
				}
			}
		}
	}
}

// TestDecodeProjected: every projection of the round-trip corpus (with
// its slot columns and with most of them left out, in more) and of the
// Loghub corpus, when present, is Decode filtered.
func TestDecodeProjected(t *testing.T) {
	rows, tpl := roundTripRows(t)
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	demoted := defaultOptions()
	demoted.slotMin = 0.5
	fd, err := encode(rows, tpl, &demoted)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("roundtrip", func(t *testing.T) { checkProjected(t, f.Data, tpl) })
	t.Run("roundtrip-more", func(t *testing.T) { checkProjected(t, fd.Data, tpl) })
	c := loadCorpus(t, "all", loghubSets...)
	if c == nil {
		t.Log("no loghub data")
		return
	}
	fl, err := Encode(c.rows, c.tpl)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("loghub", func(t *testing.T) { checkProjected(t, fl.Data, c.tpl) })
}

// TestDecodeProjectedMissingTemplate: a kept version without its text is a
// MissingTemplateError, lines or not; a rejected one needs no text.
func TestDecodeProjectedMissingTemplate(t *testing.T) {
	rows, tpl := roundTripRows(t)
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	gone := Key{uint64(100 - 3), 1}
	lacking := Templates{}
	for k, v := range tpl {
		if k != gone {
			lacking[k] = v
		}
	}
	for _, lines := range []bool{false, true} {
		recs, err := DecodeProjected(f.Data, lacking, Projection{Keep: func(k Key) bool { return k != gone }, Lines: lines})
		if err != nil {
			t.Errorf("lines %v, missing version rejected: %v", lines, err)
		}
		if len(recs) != len(rows)-1 {
			t.Errorf("lines %v: %d records, want %d", lines, len(recs), len(rows)-1)
		}
		for _, keep := range []func(Key) bool{nil, func(k Key) bool { return k == gone }} {
			_, err = DecodeProjected(f.Data, lacking, Projection{Keep: keep, Lines: lines})
			var mt *MissingTemplateError
			if !errors.As(err, &mt) || mt.Key != gone {
				t.Errorf("lines %v, keep nil %v: error %v, want a MissingTemplateError for %v", lines, keep == nil, err, gone)
			}
		}
	}
}

// BenchmarkDecodeProjected: a count by template (no lines, source or
// attrs), the lines of a tenth of the templates, and everything.
func BenchmarkDecodeProjected(b *testing.B) {
	c := benchCorpus(b)
	f, err := Encode(c.rows, c.tpl)
	if err != nil {
		b.Fatal(err)
	}
	tenth := keepers(c.tpl)["10%"]
	for _, bc := range []struct {
		name string
		p    Projection
	}{
		{"count", Projection{}},
		{"lines-10pct", Projection{Keep: tenth, Lines: true, Source: true, Attrs: true}},
		{"all", Projection{Lines: true, Source: true, Attrs: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := DecodeProjected(f.Data, c.tpl, bc.p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.rows)), "ns/line")
		})
	}
}
