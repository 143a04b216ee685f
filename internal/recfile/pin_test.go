package recfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/streams"
)

// pinTemplates are the templates of pinRows: every kind of parameter, a
// timestamp as one parameter, over three and inside one, none at all, and
// more numeric parameters than there are n columns.
var pinTemplates = []string{
	"<*> INFO <*> took <*> ms from <*> id <*>",
	"<*> <*> <*> WARN <*> retry <*>",
	"<*> dfs.DataNode: block <*> size <*> to <*>",
	"[<*>] client <*> said <*>",
	"no time here <*> <*> <*>",
	"<*>" + strings.Repeat(" <*>", 39),
	"<*> conn <*>",
}

// pinParam is one parameter of a kind chosen by r: canonical and
// non-canonical numbers, addresses, hex, words, bytes that are not UTF-8.
func pinParam(r *rand.Rand) string {
	switch r.IntN(16) {
	case 0:
		return fmt.Sprint(r.Int64N(1e6))
	case 1:
		return fmt.Sprint(-r.Int64N(1e12))
	case 2:
		return fmt.Sprintf("%d.%0*d", r.IntN(1000), 1+r.IntN(4), r.IntN(1000))
	case 3:
		return fmt.Sprintf("%d.%d.%d.%d", r.IntN(256), r.IntN(256), r.IntN(300), r.IntN(256))
	case 4:
		return fmt.Sprintf("%x", r.Uint64()>>r.IntN(64))
	case 5:
		return fmt.Sprintf("%X", r.Uint32())
	case 6:
		return fmt.Sprintf("%03d", r.IntN(100))
	case 7:
		return []string{"add", "failed", "ok", "-", "", "0", "-0", "+5", "1e5", "deadbeef", "0x1f", "1.2.3", "1..2"}[r.IntN(13)]
	case 8:
		return fmt.Sprintf("blk_%d", r.Int64())
	case 9:
		return string([]byte{'x', byte(0x80 + r.IntN(64)), 'y'})
	case 10:
		return fmt.Sprintf("/10.%d.%d.%d:%d", r.IntN(256), r.IntN(256), r.IntN(256), r.IntN(65536))
	case 11:
		return fmt.Sprint(r.Uint64())
	case 12:
		return fmt.Sprintf("%d.%d", r.IntN(100), r.IntN(1e9))
	default:
		return []string{"user", "root", "héllo", "java.io.IOException", "R02-M1-N0-C:J12-U11"}[r.IntN(5)]
	}
}

// pinRows are n records built from a fixed seed without the miner, so
// their encoding depends on this package and eventtime only. Each row's ts
// is what eventtime finds in its line, as the pipeline stamps it, or the
// read time.
func pinRows(t testing.TB, n int, seed uint64) ([]Row, Templates) {
	r := rand.New(rand.NewPCG(seed, 14))
	tpl := Templates{}
	for i, s := range pinTemplates {
		tpl[Key{uint64(10 + i), 1 + uint32(i%2)}] = s
	}
	p, err := eventtime.New(eventtime.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	read := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	p.SetReference(read)
	base := time.Date(2026, 11, 30, 23, 59, 50, 0, time.UTC)
	rows := make([]Row, 0, n)
	for i := range n {
		ti := r.IntN(len(pinTemplates))
		k := Key{uint64(10 + ti), 1 + uint32(ti%2)}
		pieces := strings.Split(pinTemplates[ti], Wildcard)
		params := make([]string, len(pieces)-1)
		for j := range params {
			params[j] = pinParam(r)
		}
		at := base.Add(time.Duration(i) * 37 * time.Millisecond)
		if r.IntN(5) == 0 {
			at = at.Add(time.Duration(r.IntN(1000)) * time.Microsecond)
		}
		switch ti {
		case 0, 3, 6:
			params[0] = at.Format([]string{time.RFC3339Nano, "2006-01-02 15:04:05,000", "Jan _2 15:04:05", "2006-01-02T15:04:05.000000Z"}[r.IntN(4)])
		case 1:
			params[0], params[1], params[2] = at.Format("2006-01-02"), at.Format("15:04:05.000"), "host"+fmt.Sprint(r.IntN(3))
		case 2:
			params[0] = at.Format("060102 150405") + fmt.Sprintf(" %d INFO", r.IntN(200))
		}
		var line []byte
		for j, q := range params {
			line = append(line, pieces[j]...)
			line = append(line, q...)
		}
		line = append(line, pieces[len(pieces)-1]...)
		ts, src := read.UnixNano(), streams.TSRead
		if m, _, ok := p.Parse(line); ok {
			ts, src = m.Time.UnixNano(), streams.TSEvent
		}
		row := Row{WALSeq: uint64(1 + i/64), Index: uint32(i % 64), TS: ts, TSSource: src, TemplateID: k.ID,
			TemplateVersion: k.Version, Params: params, Source: "file:pin" + fmt.Sprint(r.IntN(2))}
		if r.IntN(7) == 0 {
			row.Attrs = []streams.Attr{{Key: "op", Value: "u"}, {Key: "n", Value: fmt.Sprint(i)}}
		}
		rows = append(rows, row)
	}
	return rows, tpl
}

// TestEncodePinned pins the exact bytes Encode writes for fixed inputs of
// several sizes (the small-file levers switch at 16, 32 and 64 rows): an
// optimisation of the encoder must not change a file. A deliberate format
// change updates the hashes and docs/formats.md.
func TestEncodePinned(t *testing.T) {
	want := map[int]string{
		3:    "f9e830918c09f829e31e27f5e21b2eee11564cda74b66cc7d7774b5e65ca5561",
		40:   "88d4b05c0a47e24ea9c37e2ade8d3f41e130ff6e0f487052a6e0c2b602dec888",
		500:  "4a0f5cbe95c3184f5c810c1c80104b3bba6338a58e6b0ae04870597509b3572a",
		5000: "693e20f5c8fe4498f977e7f85c2d3f35382c8e067a26a724a58673ce85ee22b2",
	}
	for _, n := range []int{3, 40, 500, 5000} {
		rows, tpl := pinRows(t, n, uint64(n))
		f, err := Encode(rows, tpl)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(append([]byte(f.Stats), f.Data...))
		if got := hex.EncodeToString(sum[:]); got != want[n] {
			t.Errorf("%d rows: encoded sha256 %s, pinned %s", n, got, want[n])
		}
		checkDecoded(t, f, tpl, rows)
		if n == 5000 {
			// The input reaches every kind and the more column.
			kinds := string(readKinds(t, f.Data))
			for _, k := range "sbifaxtcu" {
				if !strings.ContainsRune(kinds, k) {
					t.Errorf("no parameter of kind %c in the pinned input", k)
				}
			}
			if !fileColumns(t, f.Data)[colMore] {
				t.Error("the pinned input has no more column")
			}
		}
	}
}

// checkDecoded decodes f and compares every line with the rows rendered.
func checkDecoded(t *testing.T, f File, tpl Templates, rows []Row) {
	t.Helper()
	got, err := Decode(f.Data, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("decoded %d rows of %d", len(got), len(rows))
	}
	want := map[[2]uint64]string{}
	for _, r := range rows {
		want[[2]uint64{r.WALSeq, uint64(r.Index)}] = renderRow(t, tpl, r)
	}
	for _, g := range got {
		if w := want[[2]uint64{g.WALSeq, uint64(g.Index)}]; !bytes.Equal([]byte(g.Line), []byte(w)) {
			t.Fatalf("row %d/%d: decoded %q, want %q", g.WALSeq, g.Index, g.Line, w)
		}
	}
}

// TestEncodeLoghubReference encodes the Loghub 2k datasets (read in
// place), each as one tenant and all as one, with the encoder as it is and
// with the reference classifier (classifyRef, the parser chain classify
// replaced): the files must be byte for byte the same, and decode to the
// lines.
func TestEncodeLoghubReference(t *testing.T) {
	var sets [][]string
	for _, s := range loghubSets {
		sets = append(sets, []string{s})
	}
	sets = append(sets, loghubSets)
	ran := 0
	for _, s := range sets {
		c := loadCorpus(t, strings.Join(s, "+"), s...)
		if c == nil {
			continue
		}
		ran++
		f, err := Encode(c.rows, c.tpl)
		if err != nil {
			t.Fatal(err)
		}
		o := defaultOptions()
		o.classify = classifyRef
		ref, err := encode(c.rows, c.tpl, &o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.Data, ref.Data) || f.Stats != ref.Stats {
			t.Errorf("%s: %d bytes encoded, %d with the reference classifier, not the same", c.name, len(f.Data), len(ref.Data))
		}
		checkDecoded(t, f, c.tpl, c.rows)
	}
	if ran == 0 {
		t.Skip("no loghub data in " + loghubDir)
	}
}

// TestEncodeScratchCleared: an encode leaves its arrays for the next one
// (a sync.Pool may drop them, under -race at random, so a few tries), and
// leaves them holding no reference to the rows' text and enc zeroed, so a
// kept array neither pins a frame in memory nor leaks a row into the next
// file.
func TestEncodeScratchCleared(t *testing.T) {
	rows, tpl := pinRows(t, 500, 500)
	var sc *scratch
	for range 20 {
		if _, err := Encode(rows, tpl); err != nil {
			t.Fatal(err)
		}
		if sc = getScratch(); cap(sc.enc) >= len(rows) {
			break
		}
	}
	if cap(sc.enc) < len(rows) || cap(sc.svals) == 0 || cap(sc.vals) == 0 {
		t.Fatalf("no arrays kept after 20 encodes: enc %d, svals %d, vals %d", cap(sc.enc), cap(sc.svals), cap(sc.vals))
	}
	for i, en := range sc.enc[:cap(sc.enc)] {
		if en.kinds != "" || en.residue != nil || en.s != (span{}) || en.n != (span{}) || en.b != (span{}) || en.m != (span{}) {
			t.Fatalf("kept enc[%d] not zero: %+v", i, en)
		}
	}
	for i, s := range sc.svals[:cap(sc.svals)] {
		if s != "" {
			t.Fatalf("kept svals[%d] holds %q", i, s)
		}
	}
	for i, v := range sc.vals[:cap(sc.vals)] {
		if v != (parquet.Value{}) {
			t.Fatalf("kept vals[%d] holds %v", i, v)
		}
	}
	// The next encode with the kept arrays writes the pinned bytes.
	scratchPool.Put(sc)
	rows, tpl = pinRows(t, 40, 40)
	f, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(append([]byte(f.Stats), f.Data...)); hex.EncodeToString(sum[:]) != "88d4b05c0a47e24ea9c37e2ade8d3f41e130ff6e0f487052a6e0c2b602dec888" {
		t.Error("an encode on kept arrays wrote other bytes than the pinned ones")
	}
}
