package recfile

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestWALOrder: WALOrder puts records of any shape in (wal_seq,
// record_index) order, each record once: dense frames (the slot path),
// sparse sequences and indexes, duplicate positions and huge indexes (the
// sort), shuffled or as row groups of interleaved runs.
func TestWALOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := map[string]func() []Record{
		"dense": func() []Record {
			var recs []Record
			for seq := uint64(5); seq < 40; seq++ {
				for i := range r.IntN(50) {
					recs = append(recs, Record{WALSeq: seq, Index: uint32(i)})
				}
			}
			return recs
		},
		"some lines of each frame": func() []Record {
			var recs []Record
			for seq := uint64(100); seq < 130; seq++ {
				for i := range 60 {
					if r.IntN(3) == 0 {
						recs = append(recs, Record{WALSeq: seq, Index: uint32(i)})
					}
				}
			}
			return recs
		},
		"sparse sequences": func() []Record {
			var recs []Record
			for range 200 {
				recs = append(recs, Record{WALSeq: r.Uint64N(1 << 40), Index: uint32(r.IntN(4))})
			}
			return recs
		},
		"duplicates": func() []Record {
			var recs []Record
			for range 300 {
				recs = append(recs, Record{WALSeq: uint64(r.IntN(5)), Index: uint32(r.IntN(20))})
			}
			return recs
		},
		"huge index": func() []Record {
			return []Record{{WALSeq: 2, Index: 1 << 31}, {WALSeq: 1, Index: 3}, {WALSeq: 2, Index: 0}}
		},
	}
	for name, gen := range shapes {
		for _, layout := range []string{"shuffled", "runs"} {
			recs := gen()
			for i := range recs {
				recs[i].TS = int64(i) // identifies the record
			}
			if layout == "shuffled" {
				r.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
			} else {
				// Row groups: each a run in WAL order, the runs interleaved.
				runs := make3(recs, 4, r)
				recs = runs
			}
			ts := map[int64]bool{}
			for _, x := range recs {
				ts[x.TS] = true
			}
			got := slices.Clone(recs)
			if order := WALOrder(recs); order != nil {
				for x, i := range order {
					got[x] = recs[i]
				}
			}
			if len(got) != len(recs) {
				t.Fatalf("%s %s: %d records, want %d", name, layout, len(got), len(recs))
			}
			for i := range got {
				if !ts[got[i].TS] {
					t.Fatalf("%s %s: record %d twice or unknown", name, layout, got[i].TS)
				}
				delete(ts, got[i].TS)
				if i > 0 {
					a, b := got[i-1], got[i]
					if a.WALSeq > b.WALSeq || a.WALSeq == b.WALSeq && a.Index > b.Index {
						t.Fatalf("%s %s: (%d,%d) before (%d,%d)", name, layout, a.WALSeq, a.Index, b.WALSeq, b.Index)
					}
				}
			}
		}
	}
}

// make3 deals recs (in WAL order after sorting) into k runs and
// concatenates them: k sorted runs, interleaved in WAL order.
func make3(recs []Record, k int, r *rand.Rand) []Record {
	slices.SortFunc(recs, func(a, b Record) int {
		if a.WALSeq != b.WALSeq {
			if a.WALSeq < b.WALSeq {
				return -1
			}
			return 1
		}
		return int(int64(a.Index) - int64(b.Index))
	})
	runs := make([][]Record, k)
	for _, x := range recs {
		i := r.IntN(k)
		runs[i] = append(runs[i], x)
	}
	return slices.Concat(runs...)
}

// TestLinesWALOrderInPlace: Lines.walOrder puts shuffled rows in WAL order,
// each row once with its row group and row, moving them in place: it
// allocates the permutation (4 bytes a row for dense frames), not a second
// array of rows (24 bytes a row) or copies of their positions; the
// permutation's array becomes each row's place in WAL order (rank).
func TestLinesWALOrderInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 64 << 10
	refs := make([]lineRef, n)
	for i := range refs {
		refs[i] = lineRef{seq: uint64(10 + i/64), idx: uint32(i % 64), g: int32(i % 3), row: int32(i)}
	}
	r.Shuffle(n, func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
	shuffled := slices.Clone(refs)
	l := &Lines{refs: refs}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	l.walOrder()
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 8*n {
		t.Errorf("walOrder allocated %d bytes for %d rows, want at most %d", got, n, 8*n)
	}
	for i, ref := range l.refs {
		if want := (lineRef{seq: uint64(10 + i/64), idx: uint32(i % 64), g: int32(i % 3), row: int32(i)}); ref != want {
			t.Fatalf("row %d: %+v, want %+v", i, ref, want)
		}
	}
	// rank: the place each row had before is where it went.
	for j, x := range l.rank {
		if shuffled[j] != l.refs[x] {
			t.Fatalf("row %d went to %d (%+v), want %+v", j, x, l.refs[x], shuffled[j])
		}
	}
}

// TestLinesWALOrdered: a selection of rows decoded in file order comes
// back in (wal_seq, record_index) order, every selected row once, the rows
// not selected left out; dense (slots) and sparse (sorted) selections.
func TestLinesWALOrdered(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 4096
	refs := make([]lineRef, n)
	for i := range refs {
		refs[i] = lineRef{seq: uint64(10 + i/64), idx: uint32(i % 64), row: int32(i)}
	}
	r.Shuffle(n, func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
	l := &Lines{refs: refs}
	for _, every := range []int{1, 2, 97} {
		var sel []int32
		for x := range n {
			if int(refs[x].row)%every == 0 {
				sel = append(sel, int32(x))
			}
		}
		got := l.WALOrdered(slices.Clone(sel))
		if len(got) != len(sel) {
			t.Fatalf("every %d: %d rows, want %d", every, len(got), len(sel))
		}
		for i, x := range got {
			if want := int32(i * every); refs[x].row != want {
				t.Fatalf("every %d: row %d is %d, want %d", every, i, refs[x].row, want)
			}
		}
	}
}
