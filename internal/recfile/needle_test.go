package recfile

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/byteset"
	"github.com/quarrylake/quarry/internal/eventtime"
)

// TestMayHold: over rows of every parameter kind (pinRows: timestamps as
// one parameter, over three and inside one, numbers of each kind, hex,
// addresses, bytes that are not UTF-8, digit runs, parameters in more)
// and the Loghub sets, MayHold is never false for a row a parameter of
// which holds the needle (substrings of the row's own parameters, and of
// other rows'), and it does rule most rows out for needles their
// parameters lack: the point of it, a search renders only what it keeps.
func TestMayHold(t *testing.T) {
	type set struct {
		name string
		rows []Row
		tpl  Templates
		opt  func(*options)
	}
	pr, pt := pinRows(t, 3000, 7)
	dr, dt, _ := digitRows(t, 4)
	digitsOn := func(o *options) { o.digits = "on" }
	joined := func(o *options) { WithHighCompression(true)(o); o.moreText = "on" }
	sets := []set{{"pin", pr, pt, nil}, {"pin-digits", pr, pt, digitsOn}, {"pin-more-text", pr, pt, joined}, {"digits", dr, dt, digitsOn}}
	for _, s := range loghubSets {
		if c := loadCorpus(t, s, s); c != nil {
			sets = append(sets, set{s, c.rows, c.tpl, nil})
		}
	}
	for _, s := range sets {
		t.Run(s.name, func(t *testing.T) {
			o := defaultOptions()
			if s.opt != nil {
				s.opt(&o)
			}
			f, err := encode(s.rows, s.tpl, &o)
			if err != nil {
				t.Fatal(err)
			}
			l := openLines(t, f.Data, s.tpl, Projection{Lines: true})
			type pos struct {
				seq uint64
				idx uint32
			}
			byPos := map[pos][]string{}
			r := rand.New(rand.NewPCG(1, 2))
			var pool []string
			for _, row := range s.rows {
				byPos[pos{row.WALSeq, row.Index}] = row.Params
				if len(row.Params) > 0 && r.IntN(20) == 0 {
					pool = append(pool, substr(r, row.Params[r.IntN(len(row.Params))]))
				}
			}
			pool = append(pool, "fc9d3e55.css", "java", "blk_", "x\x80", ":", "-", "0", "Dec", "é")
			var scratch []byte
			var absent, ruledOut, named, namedOut int
			// One Needle a text: a Needle keeps what it found in each row
			// group (Needle.group), as a search's does across its rows, so
			// a text asked of many rows searches each group once.
			made := map[string]*Needle{}
			needle := func(nd string) *Needle {
				n := made[nd]
				if n == nil {
					n = NewNeedle([]byte(nd))
					made[nd] = n
				}
				return n
			}
			for x := range l.Len() {
				seq, idx := l.Pos(x)
				params, ok := byPos[pos{seq, idx}]
				if !ok {
					t.Fatalf("row %d: no input row at %d.%d", x, seq, idx)
				}
				needles := make([]string, 0, 16)
				for range 6 {
					if len(params) > 0 {
						needles = append(needles, substr(r, params[r.IntN(len(params))]))
					}
				}
				// A whole parameter, less a byte or two at its ends: a
				// needle that may hold a timestamp whole.
				if len(params) > 0 {
					p := params[r.IntN(len(params))]
					a, b := r.IntN(2), len(p)-r.IntN(2)
					if a < b {
						needles = append(needles, p[a:b])
					}
				}
				for range 10 {
					needles = append(needles, pool[r.IntN(len(pool))])
				}
				for _, nd := range needles {
					if nd == "" {
						continue
					}
					held := false
					for _, p := range params {
						held = held || strings.Contains(p, nd)
					}
					var got bool
					got, scratch = l.MayHold(x, needle(nd), scratch)
					if held && !got {
						t.Fatalf("row %d.%d %q (kinds of %v): MayHold(%q) false, a parameter holds it", seq, idx, params, l.Key(x), nd)
					}
					if !held {
						absent++
						if !got {
							ruledOut++
						}
						if len(nd) >= 4 && !timeBytes.Covers(&needle(nd).set) {
							named++
							if !got {
								namedOut++
							}
						}
					}
				}
			}
			// Nearly every needle no parameter holds is ruled out: those
			// left span a timestamp's pieces (a date and its clock, two
			// parameters a time covers). A needle of a name or an id (4
			// bytes or more, one no timestamp writes) always is.
			t.Logf("%d rows: of %d needles no parameter holds, %d ruled out; of %d of names, %d", l.Len(), absent, ruledOut, named, namedOut)
			if absent == 0 || ruledOut*100 < absent*95 || namedOut != named {
				t.Fatalf("ruled out %d of %d needles no parameter holds (want 95%%), %d of %d of names (want all)", ruledOut, absent, namedOut, named)
			}
		})
	}
}

// substr is a random substring of s of 1 to 12 bytes ("" for "").
func substr(r *rand.Rand, s string) string {
	if s == "" {
		return ""
	}
	i := r.IntN(len(s))
	n := 1 + r.IntN(min(12, len(s)-i))
	return s[i : i+n]
}

// timeBytes holds every byte a timestamp may render, whatever its layout.
var timeBytes = func() byteset.Set {
	var s byteset.Set
	for l := range 256 {
		b := eventtime.Bytes(eventtime.LayoutID(l), nil)
		for w := range s {
			s[w] |= b[w]
		}
	}
	return s
}()

// TestDecodeProjectedNeedle: DecodeProjected with a Projection's Needle
// returns, in the same order, the records of the decode without it but
// those no parameter of which may hold the needle: every record a
// parameter of which holds it is kept, and most others are dropped.
func TestDecodeProjectedNeedle(t *testing.T) {
	rows, tpl := pinRows(t, 3000, 9)
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	params := map[[2]uint64][]string{}
	for _, r := range rows {
		params[[2]uint64{r.WALSeq, uint64(r.Index)}] = r.Params
	}
	for _, nd := range []string{"blk_", "java.io", "héllo", "x\x80y", "12", "deadbeef"} {
		all, err := DecodeProjected(f.Data, tpl, Projection{Lines: true})
		if err != nil {
			t.Fatal(err)
		}
		n := NewNeedle([]byte(nd))
		got, err := DecodeProjected(f.Data, tpl, Projection{Lines: true, Needle: func(Key) *Needle { return n }})
		if err != nil {
			t.Fatal(err)
		}
		j, held := 0, 0
		for _, r := range all {
			in := false
			for _, p := range params[[2]uint64{r.WALSeq, uint64(r.Index)}] {
				in = in || strings.Contains(p, nd)
			}
			if in {
				held++
			}
			if j < len(got) && got[j].WALSeq == r.WALSeq && got[j].Index == r.Index {
				if !bytes.Equal(got[j].Line, r.Line) {
					t.Fatalf("%q: record %d.%d line %q, want %q", nd, r.WALSeq, r.Index, got[j].Line, r.Line)
				}
				j++
			} else if in {
				t.Fatalf("%q: record %d.%d dropped, a parameter holds it: %q", nd, r.WALSeq, r.Index, r.Line)
			}
		}
		if j != len(got) {
			t.Fatalf("%q: %d records kept, %d of them in order among the decode's", nd, len(got), j)
		}
		t.Logf("%q: %d records, %d kept, %d held", nd, len(all), len(got), held)
		if held == 0 || len(got) > held+len(all)/20 {
			t.Fatalf("%q: kept %d of %d records, %d hold it", nd, len(got), len(all), held)
		}
	}
}

// TestRowOf: rowOf is valueAt's inverse on optional columns of every
// density (runs of empty words included), and -1 past the last value.
func TestRowOf(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, density := range []int{0, 1, 5, 50, 100} {
		nrows := 1 + r.IntN(1000)
		cv := &colVals{read: true, present: make([]uint64, (nrows+63)/64), rank: make([]int32, (nrows+63)/64)}
		values := 0
		for i := range nrows {
			if r.IntN(100) < density {
				cv.present[i>>6] |= 1 << (i & 63)
			}
		}
		for w := range cv.present {
			cv.rank[w] = int32(values)
			values += bits.OnesCount64(cv.present[w])
		}
		seen := 0
		for i := range nrows {
			if j := cv.valueAt(i); j >= 0 {
				seen++
				if got := cv.rowOf(j); got != i {
					t.Fatalf("density %d: rowOf(%d) = %d, want row %d", density, j, got, i)
				}
			}
		}
		if seen != values || cv.rowOf(values) != -1 {
			t.Fatalf("density %d: %d values seen of %d, rowOf(%d) = %d", density, seen, values, values, cv.rowOf(values))
		}
		dense := &colVals{read: true}
		if dense.rowOf(7) != 7 {
			t.Fatal("a column without presence: rowOf(7) != 7")
		}
	}
}

// TestDecodeLinesNeedle: DecodeLines with a Projection's Needle keeps, in
// the same order and rendering the same lines, the rows of the decode
// without it that MayHold keeps (and MayHold gives them the same answer),
// every row a parameter of which holds the needle among them; it drops
// the rest of the rows its group search settles, so that for a needle no
// row holds it reads the columns that render nothing it searches (wal_seq,
// record_index, ts, the n slots) in no row group: the file with those
// chunks overwritten decodes to no row. A needle func that gives no
// version a needle reads as a decode without one.
func TestDecodeLinesNeedle(t *testing.T) {
	rows, tpl := pinRows(t, 3000, 11)
	o := defaultOptions()
	o.groupRows = 200
	f, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rowGroupBounds(t, f.Data)); n < 4 {
		t.Fatalf("%d row groups, want several", n)
	}
	type pos struct {
		seq uint64
		idx uint32
	}
	params := map[pos][]string{}
	r := rand.New(rand.NewPCG(3, 4))
	needles := []string{"fc9d3e55.css", "blk_", "java.io", "x\x80y", "12"}
	for _, row := range rows {
		params[pos{row.WALSeq, row.Index}] = row.Params
		if len(row.Params) > 0 && r.IntN(300) == 0 {
			if p := row.Params[r.IntN(len(row.Params))]; len(p) >= 6 {
				needles = append(needles, p)
			}
		}
	}
	all := openLines(t, f.Data, tpl, Projection{Lines: true})
	line := func(l *Lines, x int) string {
		var rec Record
		if err := l.Record(&rec, x); err != nil {
			t.Fatal(err)
		}
		return string(rec.Line)
	}
	for _, nd := range needles {
		n := NewNeedle([]byte(nd))
		with := openLines(t, f.Data, tpl, Projection{Lines: true, Needle: func(Key) *Needle { return n }})
		var scratch []byte
		j, held, kept := 0, 0, 0
		for x := range all.Len() {
			seq, idx := all.Pos(x)
			in := false
			for _, p := range params[pos{seq, idx}] {
				in = in || strings.Contains(p, nd)
			}
			if in {
				held++
			}
			var may bool
			may, scratch = all.MayHold(x, NewNeedle([]byte(nd)), scratch)
			if may {
				kept++
			}
			if j < with.Len() {
				if s, i := with.Pos(j); s == seq && i == idx {
					if got, want := line(with, j), line(all, x); got != want {
						t.Fatalf("%q: row %d.%d line %q, want %q", nd, seq, idx, got, want)
					}
					var m bool
					if m, scratch = with.MayHold(j, n, scratch); m != may {
						t.Fatalf("%q: row %d.%d MayHold %v, %v without the needle", nd, seq, idx, m, may)
					}
					j++
					continue
				}
			}
			if in || may {
				t.Fatalf("%q: row %d.%d dropped (a parameter holds it: %v; MayHold: %v)", nd, seq, idx, in, may)
			}
		}
		if j != with.Len() {
			t.Fatalf("%q: %d rows, %d of them in order among the decode's", nd, with.Len(), j)
		}
		t.Logf("%q: %d rows, %d decoded with the needle, %d MayHold keeps, %d hold it", nd, all.Len(), with.Len(), kept, held)
		// A name's rows are settled by the group search; a needle of
		// digits leaves the rows with numbers to MayHold.
		if settled := !strings.ContainsAny(nd, "0123456789"); settled && with.Len() > kept+all.Len()/20 {
			t.Fatalf("%q: %d rows decoded, MayHold keeps %d of %d", nd, with.Len(), kept, all.Len())
		}
	}

	// A needle func that gives no version a needle reads each row group in
	// one go, as a decode without one: the same reads, the same rows.
	reads := func(p Projection) (int, int) {
		t.Helper()
		cr := &countingReader{r: bytes.NewReader(f.Data)}
		r, err := OpenAt(cr, int64(len(f.Data)))
		if err != nil {
			t.Fatal(err)
		}
		cr.armed = true
		l, err := r.DecodeLines(tpl, p)
		if err != nil {
			t.Fatal(err)
		}
		return cr.calls, l.Len()
	}
	c0, n0 := reads(Projection{Lines: true})
	c1, n1 := reads(Projection{Lines: true, Needle: func(Key) *Needle { return nil }})
	if c0 != c1 || n0 != n1 || n0 != len(rows) {
		t.Fatalf("no needle: %d reads, %d rows; a needle func giving none: %d reads, %d rows (%d rows in)", c0, n0, c1, n1, len(rows))
	}

	// No row holds fc9d3e55.css: with the other columns' chunks
	// overwritten in every row group, the file decodes to no row.
	pf, err := parquet.OpenFile(bytes.NewReader(f.Data), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	cols := columnsOf(pf.Schema())
	broken := slices.Clone(f.Data)
	for _, rg := range pf.Metadata().RowGroups {
		for ci, c := range rg.Columns {
			switch cols[ci].kind {
			case cWALSeq, cIndex, cTS, cN:
				start, end := chunkRange(&c)
				for b := start; b < end; b++ {
					broken[b] = 0xA5
				}
			}
		}
	}
	if _, err := DecodeProjected(broken, tpl, Projection{Lines: true}); err == nil {
		t.Fatal("the broken file decodes without a needle")
	}
	n := NewNeedle([]byte("fc9d3e55.css"))
	l := openLines(t, broken, tpl, Projection{Lines: true, Needle: func(Key) *Needle { return n }})
	if l.Len() != 0 {
		t.Fatalf("%d rows may hold fc9d3e55.css", l.Len())
	}
}

// TestDecodeLinesRefsSized: with a Needle func that gives no kept version
// a needle (a full render through the needle path), every row is kept and
// the rows' references are sized for them from the file's summary, not
// grown by doubling from a few (59 MB allocated for 12 MB of them over
// the bench lake); a version with a needle adds at most 1,024 to the size.
func TestDecodeLinesRefsSized(t *testing.T) {
	rows, tpl := pinRows(t, 3000, 11)
	o := defaultOptions()
	f, err := encode(rows, tpl, &o)
	if err != nil {
		t.Fatal(err)
	}
	keep := func(Key) bool { return true }
	l := openLines(t, f.Data, tpl, Projection{Lines: true, Keep: keep, Needle: func(Key) *Needle { return nil }})
	if l.Len() != len(rows) || cap(l.refs) != len(rows) {
		t.Fatalf("%d rows in refs of capacity %d, want %d in %d", l.Len(), cap(l.refs), len(rows), len(rows))
	}
	n := NewNeedle([]byte("no line holds this"))
	var first Key
	l = openLines(t, f.Data, tpl, Projection{Lines: true, Keep: keep, Needle: func(k Key) *Needle {
		if first == (Key{}) {
			first = k
		}
		if k == first {
			return n
		}
		return nil
	}})
	if cap(l.refs) > l.Len()+1024 {
		t.Fatalf("%d rows in refs of capacity %d", l.Len(), cap(l.refs))
	}
}
