package recfile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

func ns(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixNano()
}

// rt is one round-trip case: a template, its parameters and the record's ts.
type rt struct {
	name   string
	tpl    string
	params []string
	ts     int64
	kinds  string // the expected kinds, "" to skip the check
}

var many = func() []string {
	p := make([]string, MaxSlots+8)
	for i := range p {
		p[i] = fmt.Sprint(i * 7)
	}
	p[MaxSlots+2] = "\xff\xfeoverflow"
	p[MaxSlots+3] = "text"
	return p
}()

var roundTrips = []rt{
	{"iso8601 one param", "<*> INFO took <*> ms", []string{"2026-11-29T00:00:00.010Z", "42"}, ns("2026-11-29T00:00:00.010Z"), "tBi"},
	{"iso8601 split", "<*>-<*>-<*>T<*>:<*>:<*>Z up", []string{"2026", "11", "29", "00", "00", "00.010"}, ns("2026-11-29T00:00:00.010Z"), "tBccccc"},
	{"iso8601 offset", "<*> x", []string{"2026-11-29T01:00:00+01:00"}, ns("2026-11-29T00:00:00Z"), "tB"},
	{"hadoop", "<*> <*> INFO [main] x", []string{"2015-10-18", "18:01:47,978"}, ns("2015-10-18T18:01:47.978Z"), "tCc"},
	{"syslog", "<*> combo sshd[<*>]: check pass", []string{"Jun 14 15:16:01", "19939"}, ns("2005-06-14T15:16:01Z"), "tDi"},
	{"syslog padded day", "<*> <*> <*> combo", []string{"Jun", " 4", "15:16:01"}, ns("2005-06-04T15:16:01Z"), "tDcc"},
	{"ctime bracketed", "[<*>] [notice] child <*>", []string{"Sun Dec 04 04:47:44 2005", "6725"}, ns("2005-12-04T04:47:44Z"), "tEi"},
	{"clf", "<*> - - [<*>] \"GET /\"", []string{"10.1.2.3", "10/Oct/2000:13:55:36 -0700"}, ns("2000-10-10T20:55:36Z"), "atJ"},
	{"epoch", "- <*> <*> R02", []string{"1117838570", "2005.06.03"}, ns("2005-06-03T22:42:50Z"), "tMwR0"},
	// Other times of the line than its timestamp, as steps of their layout
	// from ts (w; y inside the parameter that holds the timestamp).
	{"local date of the day before", "- <*> <*> R02", []string{"1117767770", "2005.06.02"}, ns("2005-06-03T03:02:50Z"), "tMwR0"},
	{"local time with microseconds", "<*> RAS <*> KERNEL", []string{"1117838570", "2005-06-03-15.42.50.675872"}, ns("2005-06-03T22:42:50Z"), "tMwQ0"},
	{"year-less time", "<*> up since <*>", []string{"2005-06-03T22:42:50Z", "Jun  3 08:00:00"}, ns("2005-06-03T22:42:50Z"), "tBwD0"},
	{"header with other times", "<*> instruction cache parity error corrected", []string{"- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO"}, ns("2005-06-03T22:42:50Z"), "yM22R=0Q\\0"},
	{"header with a time before its timestamp", "<*> x", []string{"2005.06.03 [2005-06-03T22:42:50Z] node"}, ns("2005-06-03T22:42:50Z"), "yB<1R00"},
	{"another time three days off", "<*> built <*>", []string{"2005-06-03T22:42:50Z", "2005.05.31"}, ns("2005-06-03T22:42:50Z"), "tBs"},
	{"another time with a residue", "<*> built <*>", []string{"2005-06-03T22:42:50Z", "2005-06-03T15:42:50.5Z"}, ns("2005-06-03T22:42:50Z"), "tBwB2f1"},
	{"another time with its day unpadded", "<*> <*> dn228/dn228 crond", []string{"- 1131566461 2005.11.09 dn228", "Nov 9 12:01:01"}, ns("2005-11-09T20:01:01Z"), "yM21R=0wD2p-"},
	{"another time with a zone offset", "<*> built <*>", []string{"2005-06-03T22:42:50Z", "2005-06-03T15:42:50+02:00"}, ns("2005-06-03T22:42:50Z"), "tBs"},
	{"timestamp inside a parameter", "<*> took <*> ms", []string{"- 2026-11-29T00:00:00.010Z foo", "42"}, ns("2026-11-29T00:00:00.010Z"), "uB2i"},
	{"timestamp at a parameter's start", "<*> ms", []string{"081109 203615 148 INFO dfs.DataNode:"}, ns("2008-11-09T20:36:15Z"), "uF0"},
	{"klog header", "<*> Starting kubelet", []string{"I1207 23:10:53.845933    1488 server.go:123]"}, ns("2026-12-07T23:10:53.845933Z"), "uS1"}, // after its severity letter
	{"timestamp not the record's ts", "<*> again", []string{"2026-11-29T00:00:00.010Z"}, ns("2026-11-29T00:00:01Z"), "wB2f3"},                   // another time of the line
	{"continuation line", "\tat org.Foo.bar(Foo.java:<*>)", []string{"123"}, ns("2026-11-29T00:00:00Z"), "i"},
	{"nanosecond fraction", "<*> x", []string{"2026-11-29T00:00:00.123456789Z"}, ns("2026-11-29T00:00:00.123456789Z"), "tB"}, // ts keeps microseconds, ts_residue the 789 ns below them
	{"nanoseconds across parameters", `time="<*>:<*>:<*>" level=info msg="Starting up"`, []string{"2026-12-06T08", "27", "29.906963455Z"}, ns("2026-12-06T08:27:29.906963455Z"), "tBcc"},
	{"no params", "plain line", nil, 0, ""},
	{"empty params", "a<*>b<*>c", []string{"", ""}, 0, "ss"},
	{"invalid utf8", "user <*> from <*>", []string{"m\xfcller", "\xff"}, 0, "bb"},
	{"whole invalid line", "<*>", []string{"\x00\xff\xfe binary \xc3"}, 0, "b"},
	{"not canonical ints", "<*> <*> <*> <*> <*> <*>", []string{"007", "+5", "-0", "1e5", "00.5", "-0.0"}, 0, "sssxss"}, // 1e5 is hex: canonical, exact
	{"canonical numbers", "<*> <*> <*> <*> <*> <*> <*>", []string{"0", "-17", "1.50", "-0.05", "10.0.0.255", "7f3a9", "9223372036854775807"}, 0, "iif2f2axi"},
	{"int limits", "<*> <*> <*>", []string{"-9223372036854775808", "9223372036854775808", "99999999999999999999"}, 0, "iss"},
	{"not ip or hex", "<*> <*> <*> <*> <*> <*>", []string{"256.1.1.1", "01.2.3.4", "1.2.3", "0abc", "ABC1", "deadbeef"}, 0, "ssssss"},
	{"huge value", "x=<*>", []string{strings.Repeat("héllo ", 200000)}, 0, "s"},
	{"many params", strings.Repeat("<*> ", MaxSlots+8), many, 0, ""},
	{"wildcard-like param", "<*>|<*>", []string{"<*>", "<*><*>"}, 0, "ss"},
}

func TestRoundTrip(t *testing.T) {
	tpl := Templates{}
	var rows []Row
	want := map[[2]uint64]string{}
	for i, c := range roundTrips {
		id := uint64(100 - i) // templates out of WAL order, so rows get sorted
		tpl[Key{id, 1}] = c.tpl
		r := Row{WALSeq: uint64(1 + i/5), Index: uint32(i % 5), TS: c.ts, TemplateID: id, TemplateVersion: 1,
			Params: c.params, Source: "file:/var/log/" + fmt.Sprint(i%2)}
		if i%3 == 0 {
			r.Attrs = []streams.Attr{{Key: "op", Value: "insert"}, {Key: "k", Value: fmt.Sprint(i)}}
		}
		rows = append(rows, r)
		line, err := mining.Render(c.tpl, c.params)
		if err != nil {
			t.Fatal(err)
		}
		want[[2]uint64{r.WALSeq, uint64(r.Index)}] = line
	}
	// Every slot column the file has in it, and most of them left out
	// (their values in more).
	demoted := defaultOptions()
	demoted.slotMin = 0.5
	fd, err := encode(rows, tpl, &demoted)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fileColumns(t, fd.Data)["p3"]; ok {
		t.Error("p3 not left out at slotMin 0.5")
	}
	// Every slot column some row uses (the default leaves out those fewer
	// than 16 rows use: most, in this file of a few rows per case).
	all := defaultOptions()
	all.slotRows = 0
	f, err := encode(rows, tpl, &all)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fileColumns(t, f.Data)["p3"]; !ok {
		t.Error("no p3 with every slot column")
	}
	fdef, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []File{f, fd, fdef} {
		checkRoundTrip(t, file, tpl, rows, want)
	}
	// The kinds each case expects, read with a plain Parquet reader.
	kinds := readColumn(t, f.Data, colKinds)
	ids := readColumn(t, f.Data, colTemplateID)
	for i := range kinds {
		c := roundTrips[100-ids[i].Int64()]
		if c.kinds != "" && string(kinds[i].ByteArray()) != c.kinds {
			t.Errorf("%s: kinds %q, want %q", c.name, kinds[i].ByteArray(), c.kinds)
		}
	}
}

// fileColumns returns the names of a file's top-level columns.
func fileColumns(t *testing.T, data []byte) map[string]bool {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, field := range f.Schema().Fields() {
		out[field.Name()] = true
	}
	return out
}

func checkRoundTrip(t *testing.T, f File, tpl Templates, rows []Row, want map[[2]uint64]string) {
	t.Helper()
	got, err := Decode(f.Data, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("%d records, want %d", len(got), len(rows))
	}
	for i, g := range got {
		r := rows[i] // rows are in WAL order
		c := roundTrips[i]
		if g.WALSeq != r.WALSeq || g.Index != r.Index {
			t.Fatalf("%s: record %d at wal %d/%d, want %d/%d", c.name, i, g.WALSeq, g.Index, r.WALSeq, r.Index)
		}
		if string(g.Line) != want[[2]uint64{r.WALSeq, uint64(r.Index)}] {
			t.Errorf("%s: line\n got %q\nwant %q", c.name, g.Line, want[[2]uint64{r.WALSeq, uint64(r.Index)}])
		}
		if g.TS != floorDiv(r.TS, 1000)*1000 || g.TemplateID != r.TemplateID || g.TemplateVersion != r.TemplateVersion ||
			g.Source != r.Source || !slices.Equal(g.Attrs, r.Attrs) {
			t.Errorf("%s: record %+v, want %+v", c.name, g, r)
		}
	}
}

// readColumn returns a top-level leaf column's values with parquet-go alone.
func readColumn(t *testing.T, data []byte, name string) []parquet.Value {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	leaf, ok := f.Schema().Lookup(name)
	if !ok {
		t.Fatalf("no column %s", name)
	}
	var out []parquet.Value
	for _, rg := range f.RowGroups() {
		out = append(out, chunkValues(t, rg.ColumnChunks()[leaf.ColumnIndex])...)
	}
	return out
}

// chunkValues returns a column chunk's values with parquet-go alone.
func chunkValues(t *testing.T, cc parquet.ColumnChunk) []parquet.Value {
	t.Helper()
	pages := cc.Pages()
	defer pages.Close()
	var out []parquet.Value
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]parquet.Value, p.NumValues())
		n, _ := p.Values().ReadValues(vals)
		for _, v := range vals[:n] {
			out = append(out, v.Clone())
		}
		parquet.Release(p)
	}
	return out
}

func TestEncodeBadInput(t *testing.T) {
	tpl := Templates{{1, 1}: "a <*> b"}
	for name, r := range map[string]Row{
		"unknown template": {TemplateID: 2, TemplateVersion: 1, Params: []string{"x"}},
		"unknown version":  {TemplateID: 1, TemplateVersion: 2, Params: []string{"x"}},
		"too few params":   {TemplateID: 1, TemplateVersion: 1},
		"too many params":  {TemplateID: 1, TemplateVersion: 1, Params: []string{"x", "y"}},
	} {
		if _, err := Encode([]Row{r}, tpl); !errors.Is(err, ErrInput) {
			t.Errorf("%s: err %v, want ErrInput", name, err)
		}
	}
}

func TestDecodeMissingTemplate(t *testing.T) {
	tpl := Templates{{1, 1}: "a <*> b"}
	f, err := Encode([]Row{{WALSeq: 1, TemplateID: 1, TemplateVersion: 1, Params: []string{"x"}}}, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(f.Data, Templates{}); err == nil {
		t.Fatal("decode without the template succeeded")
	}
	if _, err := Decode(f.Data[:len(f.Data)/2], tpl); err == nil {
		t.Fatal("decode of a truncated file succeeded")
	}
}

// TestPlainParquet opens a file with parquet-go alone and checks the
// documented columns, their types and that a typed value is queryable as is.
func TestPlainParquet(t *testing.T) {
	tpl := Templates{{7, 2}: "<*> took <*> ms for <*> from <*> bytes <*>"}
	rows := []Row{
		{WALSeq: 9, Index: 0, TS: ns("2026-11-29T00:00:00.010Z"), TemplateID: 7, TemplateVersion: 2, Source: "s",
			Params: []string{"2026-11-29T00:00:00.010Z", "42", "alice", "10.0.0.1", "\xff"}},
		{WALSeq: 9, Index: 1, TS: ns("2026-11-29T00:00:01Z"), TemplateID: 7, TemplateVersion: 2, Source: "s",
			Params: []string{"2026-11-29T00:00:01Z", "0.5", "bob", "x", "ok"}},
	}
	// Every slot column some row uses: by default a file has only those
	// 16 rows or more use, and this one has 2.
	o := defaultOptions()
	o.slotRows = 0
	f, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, field := range pf.Schema().Fields() {
		lt := ""
		if l := field.Type().LogicalType(); l != nil {
			lt = strings.ToLower(l.String())
			if i := strings.IndexByte(lt, '('); i >= 0 {
				lt = lt[:i]
			}
		}
		if field.Leaf() {
			types[field.Name()] = field.Type().Kind().String() + "/" + lt
		} else {
			types[field.Name()] = "group"
		}
	}
	want := map[string]string{
		"wal_seq": "INT64/int", "record_index": "INT32/int", "ts": "INT64/timestamp", "template_id": "INT64/int",
		"template_version": "INT32/int", "ts_source": "INT32/int", "source": "BYTE_ARRAY/string", "kinds": "BYTE_ARRAY/string",
		"ts_residue": "BYTE_ARRAY/", "n0": "INT64/int", "n1": "INT64/int", "p0": "BYTE_ARRAY/string",
		"p1": "BYTE_ARRAY/string", "p2": "BYTE_ARRAY/string", "b0": "BYTE_ARRAY/",
	}
	for k, v := range want {
		if types[k] != v {
			t.Errorf("column %s: %q, want %q", k, types[k], v)
		}
	}
	for k := range types {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected column %s (%s)", k, types[k])
		}
	}
	// The k-th parameter of a kind is in column k of that kind.
	if n0 := readColumn(t, f.Data, "n0"); n0[0].Int64() != 42 || n0[1].Int64() != 5 {
		t.Errorf("n0 = %v, want 42 and 5 (0.5 with one fraction digit)", n0)
	}
	if p1 := readColumn(t, f.Data, "p1"); !p1[0].IsNull() || string(p1[1].ByteArray()) != "x" {
		t.Errorf("p1 = %v, want null, x", p1)
	}
	if n1 := readColumn(t, f.Data, "n1"); n1[0].Int64() != 10<<24|1 || !n1[1].IsNull() {
		t.Errorf("n1 = %v, want 10.0.0.1 as 167772161, null", n1)
	}
	if b0 := readColumn(t, f.Data, "b0"); string(b0[0].ByteArray()) != "\xff" || !b0[1].IsNull() {
		t.Errorf("b0 = %v", b0)
	}
	if k := readColumn(t, f.Data, "kinds"); string(k[0].ByteArray()) != "tBisab" || string(k[1].ByteArray()) != "tBf1sss" {
		t.Errorf("kinds = %q, %q", k[0].ByteArray(), k[1].ByteArray())
	}
	if !strings.Contains(f.Stats, `"numRecords":2`) || !strings.Contains(f.Stats, `"template_id":7`) {
		t.Errorf("stats %s", f.Stats)
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		p    string
		kind byte
		v    int64
	}{
		{"0", kindInt, 0}, {"42", kindInt, 42}, {"-42", kindInt, -42}, {"007", kindString, 0}, {"+5", kindString, 0},
		{"-0", kindString, 0}, {"-", kindString, 0}, {"", kindString, 0}, {"1.25", kindDecimal, 125},
		{"0.001", kindDecimal, 1}, {"-0.001", kindDecimal, -1}, {"1.", kindString, 0}, {".5", kindString, 0},
		{"1.2.3.4", kindIPv4, 1<<24 | 2<<16 | 3<<8 | 4}, {"ff01", kindHex, 0xff01}, {"ffff", kindString, 0},
		{"\xff", kindBytes, 0},
	} {
		k, _, v := classify(c.p)
		if k != c.kind || v != c.v {
			t.Errorf("classify(%q) = %c %d, want %c %d", c.p, k, v, c.kind, c.v)
		}
	}
}

// TestSortRows checks the linear bucket sort of rows in WAL order against
// the general sort of rows out of order: both order by template, then WAL
// position.
func TestSortRows(t *testing.T) {
	var rows []Row
	for i := 0; i < 200; i++ {
		rows = append(rows, Row{WALSeq: uint64(1 + i/7), Index: uint32(i % 7), TemplateID: uint64(i*31%5 + 1), TemplateVersion: uint32(i % 2)})
	}
	check := func(name string, rows []Row, order []int32) {
		if len(order) != len(rows) {
			t.Fatalf("%s: %d rows ordered, want %d", name, len(order), len(rows))
		}
		for i := 1; i < len(order); i++ {
			x, y := rows[order[i-1]], rows[order[i]]
			if cmp.Compare(x.TemplateID, y.TemplateID)*4+cmp.Compare(x.TemplateVersion, y.TemplateVersion)*2 > 0 ||
				x.TemplateID == y.TemplateID && x.TemplateVersion == y.TemplateVersion &&
					(x.WALSeq > y.WALSeq || x.WALSeq == y.WALSeq && x.Index >= y.Index) {
				t.Fatalf("%s: row %d %+v before %+v", name, i, x, y)
			}
		}
	}
	check("wal order", rows, sortRows(rows, true))
	shuffled := slices.Clone(rows)
	slices.Reverse(shuffled)
	check("reversed", shuffled, sortRows(shuffled, true))
	if o := sortRows(rows, false); !slices.IsSorted(o) {
		t.Fatal("wal order without templates is not the identity")
	}
}

// TestTrimFooter checks a trimmed file of another table reads back the
// same rows with parquet-go alone and is smaller.
func TestTrimFooter(t *testing.T) {
	type row struct {
		ID   int64  `parquet:"id"`
		Text string `parquet:"text"`
	}
	var rows []row
	for i := range 300 {
		rows = append(rows, row{int64(i), fmt.Sprint("template ", i%17, " <*>")})
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	trimmed, err := TrimFooter(buf.Bytes(), "id")
	if err != nil {
		t.Fatal(err)
	}
	if len(trimmed) >= buf.Len() {
		t.Errorf("trimmed %d bytes, untrimmed %d", len(trimmed), buf.Len())
	}
	got, err := parquet.Read[row](bytes.NewReader(trimmed), int64(len(trimmed)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, rows) {
		t.Fatalf("rows differ after trimming: %d rows", len(got))
	}
	// parquet-go writes a CRC in every page header; the trimmed file has none.
	f, err := parquet.OpenFile(bytes.NewReader(trimmed), int64(len(trimmed)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Metadata().RowGroups[0].Columns {
		m := c.MetaData
		pos := m.DataPageOffset
		if m.DictionaryPageOffset > 0 {
			pos = min(pos, m.DictionaryPageOffset)
		}
		for end := pos + m.TotalCompressedSize; pos < end; {
			r := bytes.NewReader(trimmed[pos:end])
			var h format.PageHeader
			if err := thrift.NewDecoder((&thrift.CompactProtocol{}).NewReader(r)).Decode(&h); err != nil {
				t.Fatal(err)
			}
			if h.CRC != 0 {
				t.Errorf("%v: page at %d has a CRC", m.PathInSchema, pos)
			}
			pos = end - int64(r.Len()) + int64(h.CompressedPageSize)
		}
	}
	if _, err := TrimFooter(buf.Bytes()[:buf.Len()-3]); err == nil {
		t.Error("trimmed a truncated file")
	}
}

// TestTimestampUnit checks ts is written in milliseconds when every
// record's time is whole milliseconds, in microseconds otherwise, and reads
// back the same either way.
func TestTimestampUnit(t *testing.T) {
	tpl := Templates{{1, 1}: "<*> x"}
	for _, c := range []struct {
		name, unit string
		ts         []string
	}{
		{"whole milliseconds", "MILLIS", []string{"2026-11-29T00:00:00.010Z", "2026-11-29T00:00:01Z"}},
		{"a microsecond", "MICROS", []string{"2026-11-29T00:00:00.010Z", "2026-11-29T00:00:01.000001Z"}},
	} {
		var rows []Row
		for i, ts := range c.ts {
			rows = append(rows, Row{WALSeq: 1, Index: uint32(i), TS: ns(ts), TemplateID: 1, TemplateVersion: 1, Params: []string{ts}})
		}
		f, err := Encode(rows, tpl)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := pf.Schema().Lookup(colTS)
		if lt := leaf.Node.Type().LogicalType().String(); !strings.Contains(lt, c.unit) {
			t.Errorf("%s: ts is %s, want %s", c.name, lt, c.unit)
		}
		got, err := Decode(f.Data, tpl)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			if r.TS != rows[i].TS || string(r.Line) != c.ts[i]+" x" {
				t.Errorf("%s: record %d ts %d line %q, want %d %q", c.name, i, r.TS, r.Line, rows[i].TS, c.ts[i]+" x")
			}
		}
	}
}

// TestTSSourceRoundTrip: each row keeps where its ts came from (event time,
// the previous line's, the read time).
func TestTSSourceRoundTrip(t *testing.T) {
	tpl := Templates{{ID: 1, Version: 1}: "job <*> done"}
	srcs := []streams.TSSource{streams.TSEvent, streams.TSPrevious, streams.TSRead, streams.TSEvent}
	var rows []Row
	for i, s := range srcs {
		rows = append(rows, Row{WALSeq: 9, Index: uint32(i), TS: int64(i) * 1e9, TSSource: s,
			TemplateID: 1, TemplateVersion: 1, Params: []string{fmt.Sprint(i)}, Source: "src"})
	}
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := Decode(f.Data, tpl)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.TSSource != srcs[i] {
			t.Errorf("record %d: ts source %d, want %d", i, r.TSSource, srcs[i])
		}
	}
}
