package recfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// groupRowsCorpus is the round-trip corpus repeated: every third template
// in 40 rows, the others in 8, so template groups are of mixed sizes.
func groupRowsCorpus(t *testing.T) ([]Row, Templates) {
	base, tpl := roundTripRows(t)
	var rows []Row
	for rep := range 40 {
		for i, r := range base {
			if i%3 == 0 || rep%5 == 0 {
				r.WALSeq += uint64(rep) * 1000
				rows = append(rows, r)
			}
		}
	}
	return rows, tpl
}

// rowGroupBounds returns each row group's template_id bounds.
func rowGroupBounds(t *testing.T, data []byte) [][2]int64 {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	tid := -1
	for i, c := range columnsOf(f.Schema()) {
		if c.kind == cTemplateID {
			tid = i
		}
	}
	var out [][2]int64
	for _, rg := range f.RowGroups() {
		lo, hi, ok := rg.ColumnChunks()[tid].(*parquet.FileColumnChunk).Bounds()
		if !ok {
			t.Fatal("no template_id bounds")
		}
		out = append(out, [2]int64{lo.Int64(), hi.Int64()})
	}
	return out
}

// TestRowGroupsCutBetweenTemplates: a file of more than twice groupRows
// rows is cut into row groups between templates (no template's rows in two
// of them), decodes to the same records as the one row group layout, and
// every projection equals Decode filtered, for the cut layout, for one
// whose templates span row groups (rows not sorted by template) and for
// one row group.
func TestRowGroupsCutBetweenTemplates(t *testing.T) {
	rows, tpl := groupRowsCorpus(t)
	enc := func(mod func(*options)) []byte {
		o := defaultOptions()
		mod(&o)
		f, err := encode(rows, tpl, &o)
		if err != nil {
			t.Fatal(err)
		}
		return f.Data
	}
	cut := enc(func(o *options) { o.groupRows = 16 })
	spanning := enc(func(o *options) { o.groupRows = 16; o.sortByTpl = false })
	one := enc(func(o *options) { o.groupRows = 0 })
	want, err := Decode(one, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if pf, err := parquet.OpenFile(bytes.NewReader(one), int64(len(one))); err != nil || len(pf.RowGroups()) != 1 {
		t.Fatalf("groupRows 0: not one row group (%v)", err)
	}
	b := rowGroupBounds(t, cut)
	if len(b) < 4 {
		t.Fatalf("cut layout: %d row groups", len(b))
	}
	for i := 1; i < len(b); i++ {
		if b[i][0] <= b[i-1][1] {
			t.Fatalf("row groups %d and %d share template ids: %v %v", i-1, i, b[i-1], b[i])
		}
	}
	spans := 0
	sb := rowGroupBounds(t, spanning)
	for i := 1; i < len(sb); i++ {
		if sb[i][0] <= sb[i-1][1] {
			spans++
		}
	}
	if len(sb) < 4 || spans == 0 {
		t.Fatalf("spanning layout: %d row groups, %d overlapping", len(sb), spans)
	}
	for name, data := range map[string][]byte{"cut": cut, "spanning": spanning, "one": one} {
		t.Run(name, func(t *testing.T) {
			got, err := Decode(data, tpl)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i := range got {
				if g, w := got[i], want[i]; g.WALSeq != w.WALSeq || g.Index != w.Index || !bytes.Equal(g.Line, w.Line) {
					t.Fatalf("record %d: got %+v, want %+v", i, g, w)
				}
			}
			checkProjected(t, data, tpl)
		})
	}
}

// TestRowGroupsSkipped: DecodeProjected does not read a row group none of
// whose templates it keeps: with the pages of every other row group
// overwritten, keeping one template still gives its records, while keeping
// every template reads the overwritten pages and fails.
func TestRowGroupsSkipped(t *testing.T) {
	rows, tpl := groupRowsCorpus(t)
	o := defaultOptions()
	o.groupRows = 16
	f, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	all, err := Decode(f.Data, tpl)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	bounds := rowGroupBounds(t, f.Data)
	tested := 0
	for _, k := range []Key{{100, 1}, {97, 1}, {100 - uint64(len(roundTrips)) + 1, 1}} {
		var broken []byte = slices.Clone(f.Data)
		others := 0
		for i, rg := range pf.Metadata().RowGroups {
			if int64(k.ID) >= bounds[i][0] && int64(k.ID) <= bounds[i][1] {
				continue
			}
			others++
			for _, c := range rg.Columns {
				start := c.MetaData.DataPageOffset
				if d := c.MetaData.DictionaryPageOffset; d > 0 && d < start {
					start = d
				}
				for j := start; j < start+c.MetaData.TotalCompressedSize; j++ {
					broken[j] = 0xA5
				}
			}
		}
		if others == 0 {
			t.Fatalf("%v: in every row group", k)
		}
		tested++
		for _, lines := range []bool{false, true} {
			got, err := DecodeProjected(broken, tpl, Projection{Keep: func(x Key) bool { return x == k }, Lines: lines})
			if err != nil {
				t.Fatalf("%v lines %v: %v", k, lines, err)
			}
			var want []Record
			for _, r := range all {
				if (Key{r.TemplateID, r.TemplateVersion}) == k {
					want = append(want, r)
				}
			}
			if len(got) == 0 || len(got) != len(want) {
				t.Fatalf("%v: %d records, want %d", k, len(got), len(want))
			}
			for i := range got {
				if got[i].WALSeq != want[i].WALSeq || got[i].Index != want[i].Index || (lines && !bytes.Equal(got[i].Line, want[i].Line)) {
					t.Fatalf("%v record %d: got %+v, want %+v", k, i, got[i], want[i])
				}
			}
		}
		if _, err := DecodeProjected(broken, tpl, Projection{Keep: func(Key) bool { return true }, Lines: true}); err == nil {
			t.Fatalf("%v: every template kept read no broken page", k)
		}
	}
}

// TestRareVersionsLast: in a file cut into row groups, the versions with
// fewer than rareRows rows are written last, a row group of their own: the
// file decodes as the one row group layout does, every projection equals
// Decode filtered, the summary still lists every version once by key, and
// keeping only rare versions reads only that last row group (the pages of
// every other one are overwritten), while keeping a common one does not.
func TestRareVersionsLast(t *testing.T) {
	rows, tpl := groupRowsCorpus(t)
	o := defaultOptions()
	o.groupRows, o.rareRows = 16, 20
	f, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	one := defaultOptions()
	one.groupRows = 0
	f1, err := encode(rows, tpl, &one)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Decode(f1.Data, tpl)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(f.Data, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		if g, w := got[i], want[i]; g.WALSeq != w.WALSeq || g.Index != w.Index || !bytes.Equal(g.Line, w.Line) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
	}
	checkProjected(t, f.Data, tpl)

	count := map[Key]int{}
	for _, r := range rows {
		count[Key{r.TemplateID, r.TemplateVersion}]++
	}
	var rare, common []Key
	for k, n := range count {
		if n < o.rareRows {
			rare = append(rare, k)
		} else {
			common = append(common, k)
		}
	}
	if len(rare) == 0 || len(common) == 0 {
		t.Fatalf("corpus: %d rare and %d common versions", len(rare), len(common))
	}
	pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := FileSummary(pf)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != len(count) {
		t.Fatalf("summary of %d versions, want %d", len(sum), len(count))
	}
	for i := range sum {
		if i > 0 && !(sum[i-1].Key.ID < sum[i].Key.ID || sum[i-1].Key.ID == sum[i].Key.ID && sum[i-1].Key.Version < sum[i].Key.Version) {
			t.Fatalf("summary entries %d and %d out of key order: %v %v", i-1, i, sum[i-1].Key, sum[i].Key)
		}
		if int(sum[i].Rows) != count[sum[i].Key] {
			t.Fatalf("summary %v: %d rows, want %d", sum[i].Key, sum[i].Rows, count[sum[i].Key])
		}
	}
	rgs := pf.Metadata().RowGroups
	var tailRows int
	for _, k := range rare {
		tailRows += count[k]
	}
	if len(rgs) < 3 || rgs[len(rgs)-1].NumRows != int64(tailRows) {
		t.Fatalf("%d row groups, the last of %d rows, want the %d rows of the rare versions", len(rgs), rgs[len(rgs)-1].NumRows, tailRows)
	}
	broken := slices.Clone(f.Data)
	for _, rg := range rgs[:len(rgs)-1] {
		for _, c := range rg.Columns {
			start := c.MetaData.DataPageOffset
			if d := c.MetaData.DictionaryPageOffset; d > 0 && d < start {
				start = d
			}
			for j := start; j < start+c.MetaData.TotalCompressedSize; j++ {
				broken[j] = 0xA5
			}
		}
	}
	isRare := func(k Key) bool { return count[k] < o.rareRows }
	for _, lines := range []bool{false, true} {
		got, err := DecodeProjected(broken, tpl, Projection{Keep: isRare, Lines: lines})
		if err != nil {
			t.Fatalf("rare versions, lines %v: %v", lines, err)
		}
		var w []Record
		for _, r := range want {
			if isRare(Key{r.TemplateID, r.TemplateVersion}) {
				w = append(w, r)
			}
		}
		if len(got) != len(w) {
			t.Fatalf("rare versions: %d records, want %d", len(got), len(w))
		}
		for i := range got {
			if got[i].WALSeq != w[i].WALSeq || got[i].Index != w[i].Index || (lines && !bytes.Equal(got[i].Line, w[i].Line)) {
				t.Fatalf("rare record %d: got %+v, want %+v", i, got[i], w[i])
			}
		}
	}
	if _, err := DecodeProjected(broken, tpl, Projection{Keep: func(k Key) bool { return k == common[0] }, Lines: true}); err == nil {
		t.Fatalf("%v: a common version read no broken page", common[0])
	}
	if v, ok := pf.Lookup(TailKey); !ok || v != "20" {
		t.Fatalf("%s = %q, %v; want 20", TailKey, v, ok)
	}

	// The tail key: a common version whose id lies within the last row
	// group's template_id bounds is not looked for there. Every row group
	// but the one holding it is overwritten.
	bounds := rowGroupBounds(t, f.Data)
	tb := bounds[len(bounds)-1]
	tested := 0
	for _, k := range common {
		if int64(k.ID) <= tb[0] || int64(k.ID) >= tb[1] {
			continue
		}
		tested++
		broken := slices.Clone(f.Data)
		for i, rg := range rgs {
			if i < len(rgs)-1 && int64(k.ID) >= bounds[i][0] && int64(k.ID) <= bounds[i][1] {
				continue
			}
			for _, c := range rg.Columns {
				start, end := chunkRange(&c)
				for j := start; j < end; j++ {
					broken[j] = 0xA5
				}
			}
		}
		got, err := DecodeProjected(broken, tpl, Projection{Keep: func(x Key) bool { return x == k }, Lines: true})
		if err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		if len(got) != count[k] {
			t.Fatalf("%v: %d records, want %d", k, len(got), count[k])
		}
	}
	if tested == 0 {
		t.Fatalf("no common version inside the tail's bounds %v", tb)
	}
}

// countingReader counts the ReadAt calls and bytes after it is armed.
type countingReader struct {
	r            io.ReaderAt
	armed        bool
	calls, bytes int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	if c.armed {
		c.calls++
		c.bytes += len(p)
	}
	return c.r.ReadAt(p, off)
}

// TestReaderReadsChunks: a Reader (OpenAt) decodes a file whose other row
// groups' pages are overwritten when it keeps one template (it neither
// reads nor decompresses them), fetches each read's column chunks with one
// ReadAt per run of them (at most three reads per row group: template
// columns, kinds, the rest), and reads fewer bytes than the file for one
// template than for all.
func TestReaderReadsChunks(t *testing.T) {
	rows, tpl := groupRowsCorpus(t)
	o := defaultOptions()
	o.groupRows = 16
	f, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	bounds := rowGroupBounds(t, f.Data)
	k := Key{100, 1}
	broken := slices.Clone(f.Data)
	read := 0
	for i, rg := range pf.Metadata().RowGroups {
		if int64(k.ID) >= bounds[i][0] && int64(k.ID) <= bounds[i][1] {
			read++
			continue
		}
		for _, c := range rg.Columns {
			start, end := chunkRange(&c)
			for j := start; j < end; j++ {
				broken[j] = 0xA5
			}
		}
	}
	want, err := DecodeProjected(f.Data, tpl, Projection{Keep: func(x Key) bool { return x == k }, Lines: true})
	if err != nil || len(want) == 0 {
		t.Fatalf("%d records, %v", len(want), err)
	}
	decode := func(data []byte, keep func(Key) bool) ([]Record, *countingReader) {
		t.Helper()
		cr := &countingReader{r: bytes.NewReader(data)}
		r, err := OpenAt(cr, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		cr.armed = true
		got, err := r.DecodeProjected(tpl, Projection{Keep: keep, Lines: true})
		if err != nil {
			t.Fatal(err)
		}
		return got, cr
	}
	got, one := decode(broken, func(x Key) bool { return x == k })
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].WALSeq != want[i].WALSeq || got[i].Index != want[i].Index || !bytes.Equal(got[i].Line, want[i].Line) {
			t.Fatalf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if one.calls == 0 || one.calls > 3*read {
		t.Fatalf("%d reads for %d row groups read", one.calls, read)
	}
	_, all := decode(f.Data, nil)
	if one.bytes >= all.bytes || all.bytes > len(f.Data) {
		t.Fatalf("one template read %d bytes, every one %d, the file is %d", one.bytes, all.bytes, len(f.Data))
	}
}

// int64Bounds reads an INT64 chunk's statistics and refuses any other
// type or length, where parquet-go's Bounds panics.
func TestInt64Bounds(t *testing.T) {
	le := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	for _, tt := range []struct {
		name   string
		m      format.ColumnMetaData
		lo, hi int64
		ok     bool
	}{
		{"int64", format.ColumnMetaData{Type: format.Int64, Statistics: format.Statistics{MinValue: le(-3), MaxValue: le(1 << 40)}}, -3, 1 << 40, true},
		{"no max", format.ColumnMetaData{Type: format.Int64, Statistics: format.Statistics{MinValue: le(1)}}, 0, 0, false},
		{"short min", format.ColumnMetaData{Type: format.Int64, Statistics: format.Statistics{MinValue: []byte{1, 2, 3}, MaxValue: le(1)}}, 0, 0, false},
		{"int32", format.ColumnMetaData{Type: format.Int32, Statistics: format.Statistics{MinValue: le(1), MaxValue: le(2)}}, 0, 0, false},
		{"an unknown type", format.ColumnMetaData{Type: format.Type(99), Statistics: format.Statistics{MinValue: le(1), MaxValue: le(2)}}, 0, 0, false},
	} {
		lo, hi, ok := int64Bounds(&tt.m)
		if lo != tt.lo || hi != tt.hi || ok != tt.ok {
			t.Errorf("%s: %d, %d, %v; want %d, %d, %v", tt.name, lo, hi, ok, tt.lo, tt.hi, tt.ok)
		}
	}
}

// checkGroupRows refuses a row group stating more rows than its bytes can
// hold (or than maxGroupRows), before any array is sized by it.
func TestCheckGroupRows(t *testing.T) {
	group := func(rows int64, sizes ...int64) *format.RowGroup {
		rg := &format.RowGroup{NumRows: rows}
		for _, s := range sizes {
			rg.Columns = append(rg.Columns, format.ColumnChunk{MetaData: format.ColumnMetaData{TotalUncompressedSize: s}})
		}
		return rg
	}
	for _, tt := range []struct {
		name string
		rg   *format.RowGroup
		ok   bool
	}{
		{"a few rows", group(10, 5, 5), true},
		{"64 a byte", group(64*100+1024, 60, 40), true},
		{"more than 64 a byte", group(64*100+1025, 60, 40), false},
		{"2^40 rows", group(1<<40, 1<<40), false},
		{"negative", group(-1, 10), false},
		{"a negative size", group(2000, -1<<40, 10), false},
	} {
		err := checkGroupRows(tt.rg)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	// A DELTA_BINARY_PACKED run that states more values than its bytes
	// can hold is refused before they are allocated.
	b := binary.AppendUvarint([]byte{128, 1, 4}, 1<<30)
	b = append(b, 0, 2, 0, 0, 0, 0)
	if _, _, err := deltaValues[int64](nil, b, 1<<31); err == nil || !strings.Contains(err.Error(), "values in") {
		t.Fatalf("2^30 values in %d bytes: %v", len(b), err)
	}
}
