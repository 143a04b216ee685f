package recfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/eventtime"
)

// otherTimeLines writes n lines of the shape of BGL's (an epoch, the local
// date and the local RAS time of the same instant) or of Thunderbird's (an
// epoch, the local date, a host and a syslog time with its day unpadded),
// made up here, into dir/<name>/<name>_2k.log, and returns the corpus.
func otherTimeLines(t *testing.T, name string, n int) *corpus {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	at := time.Date(2005, 11, 9, 1, 1, 1, 0, time.UTC)
	nodes := []string{"R02-M1-N0-C:J12-U11", "R20-M0-NF-C:J07-U01", "R63-M0-NA-C:J05-U01"}
	hosts := []string{"dn228", "an731", "bn450", "en74"}
	for i := range n {
		at = at.Add(time.Duration(17+i%23)*time.Second + time.Duration(i*7919%1000000)*time.Microsecond)
		local := at.Add(-8 * time.Hour) // a day before at's UTC day for a third of them
		switch name {
		case "bgl":
			node := nodes[i%len(nodes)]
			msg := []string{"instruction cache parity error corrected", fmt.Sprintf("generating core.%d", 2000+i)}[i%2]
			fmt.Fprintf(&b, "- %d %s %s %s %s RAS KERNEL INFO %s\n", at.Unix(), local.Format("2006.01.02"), node,
				local.Format("2006-01-02-15.04.05.000000"), node, msg)
		case "linux":
			// A syslog header (its year inferred) and ftpd's own ctime, the
			// same clock 20 years before the inferred one.
			old := at.AddDate(-20, 0, 0)
			fmt.Fprintf(&b, "%s combo ftpd[%d]: connection from 24.54.76.%d (host-%d.example.net) at %s \n", at.Format("Jan _2 15:04:05"),
				29000+i, i%250, i%250, old.Format("Mon Jan _2 15:04:05 2006"))
		default:
			h := hosts[i%len(hosts)]
			msg := []string{fmt.Sprintf("crond(pam_unix)[%d]: session closed for user root", 2000+i),
				fmt.Sprintf("sshd[%d]: Accepted publickey for user%d from 10.0.0.%d", 3000+i, i%7, i%250)}[i%2]
			fmt.Fprintf(&b, "- %d %s %s %s %s/%s %s\n", at.Unix(), local.Format("2006.01.02"), h, local.Format("Jan 2 15:04:05"), h, h, msg)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name, name+"_2k.log"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	old := loghubDir
	loghubDir = dir
	defer func() { loghubDir = old }()
	return loadCorpus(t, name, name)
}

// TestOtherTimes checks the other times of a line (kinds w and y, records
// v6): a line's local date and time beside its epoch are stored as steps
// from ts, render back byte for byte through every reader, and make the
// file smaller than the same rows with them as text.
func TestOtherTimes(t *testing.T) {
	for _, name := range []string{"bgl", "thunderbird", "linux"} {
		c := otherTimeLines(t, name, 600)
		for _, hi := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/high=%v", name, hi), func(t *testing.T) {
				o := defaultOptions()
				if hi {
					WithHighCompression(true)(&o)
				}
				f, err := encode(c.rows, c.tpl, &o)
				if err != nil {
					t.Fatal(err)
				}
				text := o
				text.shift = false
				ft, err := encode(c.rows, c.tpl, &text)
				if err != nil {
					t.Fatal(err)
				}
				if len(f.Data) > len(ft.Data)*9/10 {
					t.Errorf("%d bytes with other times, %d without: not 10%% smaller", len(f.Data), len(ft.Data))
				}
				pf, err := parquet.OpenFile(strings.NewReader(string(f.Data)), int64(len(f.Data)))
				if err != nil {
					t.Fatal(err)
				}
				if v, _ := pf.Lookup("quarry.records.version"); v != "6" {
					t.Errorf("records version %q, want 6", v)
				}
				// Each line's other times: in the header (y) for BGL and
				// Thunderbird, Linux's ctime over three parameters (w, c, c).
				want := map[string]string{"bgl": "yM2", "thunderbird": "yM2", "linux": "wE2p cc"}[name] // ctime, its day space-padded
				y := 0
				for _, k := range readColumn(t, f.Data, colKinds) {
					if strings.Contains(string(k.ByteArray()), want) {
						y++
					}
				}
				if y != len(c.rows) {
					t.Errorf("%d of %d rows with %s", y, len(c.rows), want)
				}
				checkLines(t, f, c)
			})
		}
	}
}

// TestOtherTimesInMore checks a y item whose text has no p column: the
// text without the times is in more, the times stay in their n columns.
func TestOtherTimesInMore(t *testing.T) {
	c := otherTimeLines(t, "bgl", 200)
	o := defaultOptions()
	o.slotMin = everyToMore
	f, err := encode(c.rows, c.tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	cols := fileColumns(t, f.Data)
	if cols["p0"] || !cols["more"] || !cols["n0"] || !cols["n1"] {
		t.Fatalf("columns %v: want more, n0 and n1, no p0", cols)
	}
	checkLines(t, f, c)
}

// checkLines reads f with Decode, DecodeRows and a LineRenderer and checks
// each against c's lines and parameters.
func checkLines(t *testing.T, f File, c *corpus) {
	t.Helper()
	recs, err := Decode(f.Data, c.tpl)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(c.lines) {
		t.Fatalf("Decode: %d records, want %d", len(recs), len(c.lines))
	}
	order := WALOrder(recs) // nil: in WAL order already
	for x := range recs {
		i := x
		if order != nil {
			i = int(order[x])
		}
		if string(recs[i].Line) != c.lines[x] {
			t.Fatalf("Decode line %d:\n got %q\nwant %q", x, recs[i].Line, c.lines[x])
		}
	}
	rows, err := DecodeRows(f.Data, c.tpl)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		if a.WALSeq != b.WALSeq {
			return int(a.WALSeq) - int(b.WALSeq)
		}
		return int(a.Index) - int(b.Index)
	})
	if len(rows) != len(c.rows) {
		t.Fatalf("DecodeRows: %d rows, want %d", len(rows), len(c.rows))
	}
	for x, r := range rows {
		if !slices.Equal(r.Params, c.rows[x].Params) {
			t.Fatalf("DecodeRows row %d: params %q, want %q", x, r.Params, c.rows[x].Params)
		}
	}
	rd, err := OpenAt(strings.NewReader(string(f.Data)), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := rd.DecodeLines(c.tpl, Projection{Lines: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release()
	if ls.Len() != len(c.lines) {
		t.Fatalf("DecodeLines: %d lines, want %d", ls.Len(), len(c.lines))
	}
	var lr LineRenderer
	got := map[[2]uint64]string{}
	for x := range ls.Len() {
		b, err := lr.AppendLine(nil, ls, x)
		if err != nil {
			t.Fatal(err)
		}
		seq, idx := ls.Pos(x)
		got[[2]uint64{seq, uint64(idx)}] = string(b)
	}
	for x, r := range c.rows {
		if g := got[[2]uint64{r.WALSeq, uint64(r.Index)}]; g != c.lines[x] {
			t.Fatalf("LineRenderer line %d:\n got %q\nwant %q", x, g, c.lines[x])
		}
	}
}

// TestShiftProbes checks where the encoder looks for other times: a place
// of a template that held none in shiftProbes rows is not tried again, and
// one that held a time tries only its layout.
func TestShiftProbes(t *testing.T) {
	o := defaultOptions()
	e := &encoder{o: &o}
	ts := ns("2005-06-03T22:42:50Z")
	ti := &tplInfo{pieces: []string{"", " ", " ", ""}}
	shift := func(j int, p string) (innerShift, bool) {
		params := []string{"x", "x", "x"}
		params[j] = p
		ot, last, ok := e.shift(ti, j, params, ts)
		if ok && last != j {
			t.Fatalf("%q covers parameters %d to %d", p, j, last)
		}
		return ot, ok
	}
	for i := range shiftProbes + 2 {
		if _, ok := shift(0, fmt.Sprintf("R0%d-M1-N0-C:J12-U11", i)); ok {
			t.Fatal("a node name taken for a time")
		}
	}
	if ti.shift[0] != -shiftProbes {
		t.Errorf("place 0 after %d misses: state %d, want %d", shiftProbes+2, ti.shift[0], -shiftProbes)
	}
	// Given up: a time there is no longer looked for.
	if _, ok := shift(0, "2005.06.03"); ok {
		t.Error("a place given up on still tried")
	}
	// Found: its rows try that layout, not another.
	if ot, ok := shift(1, "2005.06.03"); !ok || ot.n != 0 {
		t.Fatalf("the local date: %+v %v", ot, ok)
	}
	if _, ok := shift(1, "2005-06-03-15.42.50.675872"); ok {
		t.Error("a place of yyyy.mm.dd took a db2 time")
	}
	if ot, ok := shift(1, "2005.06.02"); !ok || ot.n != -1 {
		t.Errorf("the day before: %+v %v, want n -1", ot, ok)
	}
	// Too far from ts: text.
	if _, ok := shift(1, "2005.05.31"); ok {
		t.Error("a date three days before ts taken")
	}
	// The same day of another year (ts's year inferred): taken.
	if ot, ok := shift(2, "1995.06.03"); !ok || ot.n != -3653 {
		t.Errorf("ten years before: %+v %v, want n -3653 days", ot, ok)
	}
}

// TestShiftAcrossParameters: a time the miner cut at its separators is one
// w item and c items, and a place whose time ends inside a parameter is
// not one.
func TestShiftAcrossParameters(t *testing.T) {
	o := defaultOptions()
	e := &encoder{o: &o}
	ts := ns("2025-06-17T07:07:00Z") // the header's year, inferred
	ti := &tplInfo{pieces: []string{"", " at ", ":", ":", " x ", ""}}
	params := []string{"24.54.76.216", "Fri Jun 17 07", "07", "00 2005", "y"}
	ot, last, ok := e.shift(ti, 1, params, ts)
	if !ok || last != 3 || ot.layout != eventtime.LayoutCtime {
		t.Fatalf("ctime over 3 parameters: %+v last %d %v", ot, last, ok)
	}
	params[3] = "00 2005 and more"
	if _, _, ok := e.shift(ti, 1, params, ts); ok {
		t.Error("a time ending inside a parameter taken")
	}
}

// handRow is a records v6 row written by hand (parquet-go alone), for
// files the encoder would not write.
type handRow struct {
	WALSeq  int64     `parquet:"wal_seq"`
	Index   int32     `parquet:"record_index"`
	TS      time.Time `parquet:"ts,timestamp(microsecond)"`
	ID      int64     `parquet:"template_id"`
	Version int32     `parquet:"template_version"`
	Source  string    `parquet:"source"`
	Kinds   string    `parquet:"kinds"`
	P0      *string   `parquet:"p0,optional"`
	N0      *int64    `parquet:"n0,optional"`
}

// handFile writes row as a records file of the given version with
// parquet-go alone, not recfile's encoder: for files no encoder writes.
func handFile[T any](t *testing.T, version string, row T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, parquet.KeyValueMetadata("quarry.records.version", version))
	if _, err := w.Write([]T{row}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkHand decodes a file of one row with Decode and DecodeRows: its line
// must be want, or both must give ErrCorrupt when want is "". It returns
// DecodeRows' rows.
func checkHand(t *testing.T, data []byte, tpl Templates, want string) []Row {
	t.Helper()
	recs, err := Decode(data, tpl)
	rows, rerr := DecodeRows(data, tpl)
	switch {
	case want != "" && (err != nil || rerr != nil || len(recs) != 1 || string(recs[0].Line) != want):
		t.Fatalf("%v, %v, %d records; want %q", err, rerr, len(recs), want)
	case want == "" && (!errors.Is(err, ErrCorrupt) || !errors.Is(rerr, ErrCorrupt)):
		t.Fatalf("Decode: %v, DecodeRows: %v; want ErrCorrupt", err, rerr)
	}
	return rows
}

// TestOtherTimesDamaged: a w or y item whose values are missing or do not
// fit its text is ErrCorrupt from every decoder, not a panic or a wrong
// line; the same file with its values renders the line.
func TestOtherTimesDamaged(t *testing.T) {
	tpl := Templates{{1, 1}: "<*> x"}
	str := func(s string) *string { return &s }
	num := func(n int64) *int64 { return &n }
	for _, c := range []struct {
		name, kinds string
		p           *string
		n           *int64
		want        string // the line; "" for ErrCorrupt
	}{
		{"y intact", "yM21R=0", str("-   R02"), num(-1), "- 1117838570 2005.06.02 R02 x"},
		{"w intact", "wR0", nil, num(0), "2005.06.03 x"},
		{"y without its time's value", "yM21R=0", str("-   R02"), nil, ""},
		{"y without its text", "yM21R=0", nil, num(0), ""},
		{"y with a time past its text", "yM21R~0", str("-   R02"), num(0), ""},
		{"w without its value", "wR0", nil, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := handFile(t, "6", handRow{WALSeq: 1, TS: time.Unix(1117838570, 0), ID: 1, Version: 1, Source: "s",
				Kinds: c.kinds, P0: c.p, N0: c.n})
			checkHand(t, data, tpl, c.want)
		})
	}
}

// TestShiftStatesApart: innerShifts' state (the timestamp's parameter) is
// not shift's of a parameter: a template whose first parameter held the
// timestamp with other times in one row still finds a date alone there in
// another (it once read innerShifts' mark as shift's layout 1, iso8601).
func TestShiftStatesApart(t *testing.T) {
	o := defaultOptions()
	e := &encoder{o: &o}
	ts := ns("2005-06-03T22:42:50Z")
	ti := &tplInfo{pieces: []string{"", " ", ""}}
	header := "- 1117838570 2005.06.03 R02"
	if ins := e.innerShifts(ti, header, [2]int{2, 10}, ts, MaxSlots); len(ins) != 1 {
		t.Fatalf("the header's date: %d other times", len(ins))
	}
	if ot, _, ok := e.shift(ti, 0, []string{"2005.06.03", "x"}, ts); !ok || ot.layout != eventtime.LayoutDotDate {
		t.Errorf("a date alone at the header's place: %+v %v", ot, ok)
	}
}
