package recfile

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/mining"
)

func TestSplitRuns(t *testing.T) {
	cases := []struct {
		p    string
		most int
		skel string
		runs []int64
	}{
		{"node-246", 9, "node-\x11", []int64{246}},
		{"12abc34", 9, "\x11abc\x11", []int64{12, 34}},
		{"combo sshd(pam_unix)[19939]:", 9, "combo sshd(pam_unix)[\x11]:", []int64{19939}},
		{"0 00 007 7", 9, "\x11 00 007 \x11", []int64{0, 7}},
		{"v=9223372036854775807 w=9223372036854775808", 9, "v=\x11 w=9223372036854775808", []int64{9223372036854775807}},
		{"x99999999999999999999y1", 9, "x99999999999999999999y\x11", []int64{1}},
		{"1.2.3.4.5.6.7.8.9.10.11", 9, "\x11.\x11.\x11.\x11.\x11.\x11.\x11.\x11.\x11.10.11", []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"a1 b2 c3", 2, "a\x11 b\x11 c3", []int64{1, 2}},
		{"a1", 0, "", nil},
		{"no digits", 9, "", nil},
		{"007", 9, "", nil},
		{"a\x11b 5", 9, "", nil},
		{"5 a\x11b", 9, "", nil},
		{"héllo 42 wörld", 9, "héllo \x11 wörld", []int64{42}},
	}
	for _, c := range cases {
		skel, runs, n := splitRuns([]byte("prefix"), []int64{-1}, c.p, c.most)
		if string(skel) != "prefix"+c.skel || !slices.Equal(runs, append([]int64{-1}, c.runs...)) || n != len(c.runs) {
			t.Errorf("splitRuns(%q, %d) = %q %v %d, want %q %v", c.p, c.most, skel, runs, n, c.skel, c.runs)
			continue
		}
		if n == 0 {
			continue
		}
		if back, ok := appendRuns(nil, skel[len("prefix"):], runs[1:]); !ok || string(back) != c.p {
			t.Errorf("appendRuns(%q, %v) = %q %v, want %q", c.skel, c.runs, back, ok, c.p)
		}
	}
}

// FuzzSplitRuns checks a split parameter renders back to its exact text.
func FuzzSplitRuns(f *testing.F) {
	for _, s := range []string{"node-246", "0 00 007", "a\x11b1", "1.2.3.4.5.6.7.8.9.10", "x99999999999999999999", "9223372036854775808"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		skel, runs, n := splitRuns(nil, nil, p, maxRuns)
		if n == 0 {
			if len(skel) != 0 || len(runs) != 0 {
				t.Fatalf("splitRuns(%q): nothing split, but %q %v", p, skel, runs)
			}
			return
		}
		if strings.IndexByte(p, runMarker) >= 0 || n > maxRuns || n != len(runs) {
			t.Fatalf("splitRuns(%q) = %q %v %d", p, skel, runs, n)
		}
		if back, ok := appendRuns(nil, skel, runs); !ok || string(back) != p {
			t.Fatalf("splitRuns(%q) = %q %v renders %q, %v", p, skel, runs, back, ok)
		}
	})
}

// digitCases are rows of one file with digits "on": their parameters'
// expected kinds, and the lines they render.
var digitCases = []struct {
	name   string
	tpl    string
	params []string
	kinds  string
}{
	{"hpc header", "<*> <*>", []string{"134681 node-246 unix.hw state_change.unavailable", "1"}, "d2i"},
	{"runs at both ends", "x <*> y", []string{"12xyz34"}, "d2"},
	{"pid in brackets", "<*> session opened", []string{"combo sshd(pam_unix)[19939]:"}, "d1"},
	{"leading zeros stay", "<*>", []string{"id=007 x=5 y=00"}, "d1"},
	{"all leading zeros", "<*> <*>", []string{"007", "z007"}, "ss"},
	{"19 and 20 digits", "<*>", []string{"v=9223372036854775807 w=99999999999999999999"}, "d1"},
	{"too large", "<*>", []string{"v=9223372036854775808"}, "s"},
	{"marker in value", "<*>", []string{"a\x11b 5"}, "s"},
	{"invalid utf8", "<*>", []string{"m\xfcller 5"}, "b"},
	{"more than 9 runs", "<*>", []string{"1.2.3.4.5.6.7.8.9.10.11"}, "d9"},
	{"numeric before and after", "<*> took <*> ms <*> <*>", []string{"job-5", "42", "task 7 of 9", "0.5"}, "d1id2f1"},
	{"same template, no runs", "<*> took <*> ms <*> <*>", []string{"job", "43", "task", "1.5"}, "sisf1"},
	{"timestamp and runs", "<*> <*>", []string{"2026-11-29T00:00:00.010Z", "block blk_42 of 3"}, "tBd2"},
	{"timestamp inside, runs around", "<*> took <*> ms", []string{"- 2026-11-29T00:00:00.010Z job 7", "42"}, "vB21i"},
	{"timestamp between runs", "<*>", []string{"pid 12 2026-11-29T00:00:00.010Z 34 x"}, "vB72"},
	{"numbers fill the columns", strings.Repeat("<*> ", 40), func() []string {
		p := make([]string, 40)
		for i := range p {
			p[i] = fmt.Sprintf("n%d", i)
		}
		return p
	}(), strings.Repeat("d1", 32) + strings.Repeat("s", 8)},
}

// digitRows returns the rows of digitCases, each case rep times (with its
// runs changed), and their templates and lines.
func digitRows(t *testing.T, rep int) ([]Row, Templates, []string) {
	t.Helper()
	tpl := Templates{}
	var rows []Row
	var lines []string
	for i, c := range digitCases {
		tpl[Key{uint64(i + 1), 1}] = c.tpl
	}
	for r := range rep {
		for i, c := range digitCases {
			params := slices.Clone(c.params)
			if r > 0 && c.kinds != "s" && c.kinds != "b" {
				params[0] = strings.ReplaceAll(params[0], "5", fmt.Sprint(5+r))
			}
			row := Row{WALSeq: uint64(1 + r), Index: uint32(i), TS: ns("2026-11-29T00:00:00.010Z"), TemplateID: uint64(i + 1), TemplateVersion: 1,
				Params: params, Source: "s"}
			rows = append(rows, row)
			line, err := mining.Render(c.tpl, params)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
	}
	return rows, tpl, lines
}

// TestDigitRunsRoundTrip: parameters split at their digit runs (kind d)
// have the kinds expected and read back exactly, through every decoder, with
// every slot column, with most left out (values in more), numbered from
// the right (r), at zstd's best level; the runs take the n columns after
// the row's numeric parameters, so those keep theirs.
func TestDigitRunsRoundTrip(t *testing.T) {
	rows, tpl, lines := digitRows(t, 1)
	on := func(mod func(*options)) options {
		o := defaultOptions()
		o.digits, o.slotRows = "on", 0
		mod(&o)
		return o
	}
	variants := map[string]options{
		"every column": on(func(*options) {}),
		"more":         on(func(o *options) { o.slotMin = 0.5 }),
		"right":        on(func(o *options) { o.rightShare = 1e9 }),
		"right, more":  on(func(o *options) { o.rightShare, o.slotMin = 1e9, 0.5 }),
		"high":         on(func(o *options) { WithHighCompression(true)(o) }),
	}
	for name, o := range variants {
		f, err := encode(rows, tpl, &o)
		if err != nil {
			t.Fatal(err)
		}
		if name == "every column" {
			kinds := readColumn(t, f.Data, colKinds)
			ids := readColumn(t, f.Data, colTemplateID)
			for i := range kinds {
				c := digitCases[ids[i].Int64()-1]
				if string(kinds[i].ByteArray()) != c.kinds {
					t.Errorf("%s: kinds %q, want %q", c.name, kinds[i].ByteArray(), c.kinds)
				}
			}
			// "numeric before and after": 42 in n0 on both rows, whatever
			// the first parameter split into.
			n0 := readColumn(t, f.Data, "n0")
			for i := range n0 {
				if id := ids[i].Int64(); (id == 11 && n0[i].Int64() != 42) || (id == 12 && n0[i].Int64() != 43) {
					t.Errorf("%s: n0 = %v", digitCases[id-1].name, n0[i])
				}
			}
			if v, _ := fileVersion(t, f.Data); v != "5" {
				t.Errorf("version %q, want 5", v)
			}
		}
		if name == "more" {
			// A d item whose columns the file leaves out is in more whole.
			if !bytes.Contains(moreText(t, f.Data), []byte("134681 node-246 unix.hw state_change.unavailable")) {
				t.Errorf("%s: the hpc header's text is not in more", name)
			}
		}
		if strings.HasPrefix(name, "right") && !slices.ContainsFunc(readColumn(t, f.Data, colKinds), func(v parquet.Value) bool {
			return strings.HasPrefix(string(v.ByteArray()), "rd")
		}) {
			t.Errorf("%s: no d row numbered from the right", name)
		}
		recs, err := Decode(f.Data, tpl)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, r := range recs {
			if string(r.Line) != lines[i] {
				t.Errorf("%s: line %d = %q, want %q", name, i, r.Line, lines[i])
			}
		}
		// Parameters cut back (jsonl and table output, compaction).
		got, err := DecodeRows(f.Data, tpl)
		if err != nil {
			t.Fatalf("%s: DecodeRows: %v", name, err)
		}
		for i := range got {
			if !slices.Equal(got[i].Params, rows[i].Params) {
				t.Errorf("%s: row %d params %q, want %q", name, i, got[i].Params, rows[i].Params)
			}
		}
		// A projection that keeps one template reads the n columns its
		// d items use, through a Reader too.
		for _, id := range []uint64{1, 11, 14, 15} {
			p := Projection{Keep: func(k Key) bool { return k.ID == id }, Lines: true}
			r, err := OpenAt(bytes.NewReader(f.Data), int64(len(f.Data)))
			if err != nil {
				t.Fatal(err)
			}
			kept, err := r.DecodeProjected(tpl, p)
			if err != nil || len(kept) != 1 || string(kept[0].Line) != lines[id-1] {
				t.Errorf("%s: template %d kept: %v %v, want %q", name, id, kept, err, lines[id-1])
			}
		}
	}
}

// fileVersion is a file's quarry.records.version.
func fileVersion(t *testing.T, data []byte) (string, bool) {
	t.Helper()
	f, err := OpenAt(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return f.f.Lookup("quarry.records.version")
}

// TestDigitRunsSmaller: at zstd's best level an HPC-like header parameter
// ("134681 node-246 unix.hw state_change.unavailable") is split at its
// digit runs, and the file is smaller for it; at the default level (the
// busy encoder) nothing is split.
func TestDigitRunsSmaller(t *testing.T) {
	tpl := Templates{{1, 1}: "<*> <*>"}
	states := []string{"unix.hw state_change.unavailable", "unix.hw state_change.available", "boot_generic.uptime"}
	rows := make([]Row, 2000)
	for i := range rows {
		id := 100000 + (i*7919)%60000
		node := (i * 104729) % 1024
		rows[i] = Row{WALSeq: 1, Index: uint32(i), TS: ns("2026-11-29T00:00:00.010Z") + int64(i)*1e9, TemplateID: 1, TemplateVersion: 1, Source: "s",
			Params: []string{fmt.Sprintf("%d node-%d %s", id, node, states[i%len(states)]), "1"}}
	}
	hi, err := Encode(rows, tpl, WithHighCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	whole := defaultOptions()
	WithHighCompression(true)(&whole)
	whole.digits = "off"
	plain, err := encode(rows, tpl, &whole)
	if err != nil {
		t.Fatal(err)
	}
	if 10*len(hi.Data) > 9*len(plain.Data) {
		t.Errorf("split at the digit runs %d bytes, not split %d: want at most 0.9 of it", len(hi.Data), len(plain.Data))
	}
	if v, _ := fileVersion(t, hi.Data); v != "5" {
		t.Errorf("best level: version %q, want 5 (split)", v)
	}
	busy, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := fileVersion(t, busy.Data); v != "3" {
		t.Errorf("default level: version %q, want 3 (not split)", v)
	}
	readsBack(t, tpl, rows, hi.Data, busy.Data)
}

// TestDigitRunsOnlyWherePaid: a split that saves less than splitGain of
// the file is not kept (each run costs a reader a value to decode and
// render): Loghub's Hadoop sample saves 0.3% split, HPC's 7.0% (Linux's
// saved 0.8% until its ftpd lines' other time left the text, 3.9% since).
func TestDigitRunsOnlyWherePaid(t *testing.T) {
	for _, c := range []struct {
		set   string
		split bool
	}{{"Hadoop", false}, {"HPC", true}} {
		corp := loadCorpus(t, c.set, c.set)
		if corp == nil {
			t.Skip("no loghub data")
		}
		f, err := Encode(corp.rows, corp.tpl, WithHighCompression(true))
		if err != nil {
			t.Fatal(err)
		}
		split := false
		for _, k := range readColumn(t, f.Data, colKinds) {
			slots, err := parseKinds(nil, string(k.ByteArray()))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range slots {
				split = split || s.kind == kindDigits || s.kind == kindInnerD
			}
		}
		if split != c.split {
			t.Errorf("%s: split %v, want %v", c.set, split, c.split)
		}
		readsBack(t, corp.tpl, corp.rows, f.Data)
	}
}

// TestDigitRunsSummaryBytes: a split file's template summary has the bytes
// of the parameters' original text, digits included, not the skeleton's
// marker: a term with a digit of a split value keeps the template.
func TestDigitRunsSummaryBytes(t *testing.T) {
	tpl := Templates{{1, 1}: "<*> state"}
	var rows []Row
	for i := range 2 * paramBytesMinRows {
		rows = append(rows, Row{WALSeq: 1, Index: uint32(i), TemplateID: 1, TemplateVersion: 1, Source: "s",
			Params: []string{fmt.Sprintf("node-%d", 100+i%3)}})
	}
	o := defaultOptions()
	o.digits = "on"
	f, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := fileVersion(t, f.Data); v != "5" {
		t.Fatalf("version %q, want 5 (split)", v)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := FileSummary(pf)
	if err != nil || len(sum) != 1 || sum[0].AnyBytes {
		t.Fatalf("summary %v, %v", sum, err)
	}
	has := func(c byte) bool { return sum[0].ParamBytes[c>>6]&(1<<(c&63)) != 0 }
	for _, c := range []byte("node-012") {
		if !has(c) {
			t.Errorf("summary lacks %q", c)
		}
	}
	if has(runMarker) {
		t.Error("summary has the run marker")
	}
}

// moreText is every value of a file's more column, concatenated.
func moreText(t *testing.T, data []byte) []byte {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, path := range f.Schema().Columns() {
		if path[0] != colMore {
			continue
		}
		leaf, _ := f.Schema().Lookup(path...)
		for _, rg := range f.RowGroups() {
			pages := rg.ColumnChunks()[leaf.ColumnIndex].Pages()
			for {
				p, err := pages.ReadPage()
				if err != nil {
					break
				}
				vals := make([]parquet.Value, p.NumValues())
				n, _ := p.Values().ReadValues(vals)
				for _, v := range vals[:n] {
					out = append(append(out, v.ByteArray()...), '\n')
				}
			}
			pages.Close()
		}
	}
	return out
}
