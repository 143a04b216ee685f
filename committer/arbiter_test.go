package committer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/streams"
)

// rep builds a report covering the batches (seq, prev) pairs with one
// records file per report.
func rep(id string, chain ...uint64) *streams.Report {
	r := &streams.Report{ID: id, Encoder: "e1"}
	for i := 0; i+1 < len(chain); i += 2 {
		r.Batches = append(r.Batches, streams.BatchRef{Seq: chain[i], Prev: chain[i+1], Records: 1})
	}
	r.Files = []streams.FileInfo{{Table: streams.TableRecords, Path: "tenant=t/" + id + ".parquet", Size: 10,
		PartitionValues: map[string]string{"tenant": "t"}}}
	return r
}

// dated makes r's records file one of a (tenant, date) partition.
func dated(r *streams.Report) *streams.Report {
	r.Files[0].Path = "tenant=t/date=2026-01-01/" + r.ID + ".parquet"
	r.Files[0].PartitionValues = map[string]string{"tenant": "t", "date": "2026-01-01"}
	return r
}

func TestArbiterRules(t *testing.T) {
	type step struct {
		r       *streams.Report
		missing bool // the Stat check fails
		want    string
	}
	// want: "A" accepted, "R:<dups>" rejected with duplicates, "R!<reason substring>"
	tests := []struct {
		name   string
		hw     uint64
		steps  []step
		wantHW uint64
		layout lake.Layout
	}{
		{"in order", 0, []step{
			{rep("a", 1, 0, 2, 1), false, "A"},
			{rep("b", 3, 2), false, "A"},
		}, 3, lake.CurrentLayout},
		{"duplicate batch rejects whole report", 0, []step{
			{rep("a", 1, 0, 2, 1), false, "A"},
			{rep("b", 2, 1, 3, 2), false, "R:2"},
			{rep("c", 3, 2), false, "A"},
		}, 3, lake.CurrentLayout},
		{"redelivery of committed batch", 5, []step{
			{rep("a", 5, 4), false, "R:5"},
			{rep("b", 6, 5), false, "A"},
		}, 6, lake.CurrentLayout},
		{"same id republished gets same verdict", 0, []step{
			{rep("a", 1, 0), false, "A"},
			{rep("a", 1, 0), false, "A"},
			{rep("b", 1, 0), false, "R:1"},
			{rep("b", 1, 0), false, "R:1"},
		}, 1, lake.CurrentLayout},
		{"missing file rejects without duplicates", 0, []step{
			{rep("a", 1, 0), true, "R!missing"},
			{rep("b", 1, 0), false, "A"},
		}, 1, lake.CurrentLayout},
		{"rejected report owns nothing", 0, []step{
			{rep("a", 1, 0, 2, 1), true, "R!missing"},
			{rep("b", 2, 1), false, "A"},
			{rep("c", 1, 0), false, "A"},
		}, 2, lake.CurrentLayout},
		{"gap in WAL seqs followed via prev", 0, []step{
			{rep("a", 3, 0), false, "A"},
			{rep("b", 7, 3), false, "A"},
		}, 7, lake.CurrentLayout},
		{"out of order waits", 0, []step{
			{rep("a", 3, 2), false, "A"},
			{rep("b", 1, 0), false, "A"},
		}, 1, lake.CurrentLayout},
		{"records file without partition values", 0, []step{
			{func() *streams.Report { r := rep("a", 1, 0); r.Files[0].PartitionValues = nil; return r }(), false, "R!partitioned by tenant"},
		}, 0, lake.CurrentLayout},
		{"dated file in a table partitioned by tenant", 0, []step{
			{dated(rep("a", 1, 0)), false, "R!the table is partitioned by tenant"},
			{rep("b", 1, 0), false, "A"},
		}, 1, lake.CurrentLayout},
		{"tenant file in a table partitioned by tenant and date", 0, []step{
			{rep("a", 1, 0), false, "R!the table is partitioned by tenant,date"},
			{dated(rep("b", 1, 0)), false, "A"},
		}, 1, lake.DatedLayout},
		{"dated table, date not a day", 0, []step{
			{func() *streams.Report {
				r := dated(rep("a", 1, 0))
				r.Files[0].PartitionValues["date"] = "today"
				return r
			}(), false, "R!not a day"},
		}, 0, lake.DatedLayout},
		{"file outside its partition's directory", 0, []step{
			{func() *streams.Report { r := rep("a", 1, 0); r.Files[0].Path = "tenant=u/a.parquet"; return r }(), false, "R!not in the directory of its partition"},
		}, 0, lake.CurrentLayout},
		{"unclean path", 0, []step{
			{func() *streams.Report { r := rep("a", 1, 0); r.Files[0].Path = "../x.parquet"; return r }(), false, "R!not a clean relative path"},
		}, 0, lake.CurrentLayout},
		{"path into the log", 0, []step{
			{func() *streams.Report {
				r := rep("a", 1, 0)
				r.Files[0].Path = "_delta_log/00000000000000000001.json"
				return r
			}(), false, "R!not a clean relative path"},
		}, 0, lake.CurrentLayout},
		{"file of an accepted report listed by another", 0, []step{
			{rep("a", 1, 0), false, "A"},
			{func() *streams.Report { r := rep("b", 2, 1); r.Files = rep("a", 1, 0).Files; return r }(), false, "R!belongs to accepted report a"},
		}, 1, lake.CurrentLayout},
		{"batch listed twice", 0, []step{
			{rep("a", 1, 0, 1, 0), false, "R!listed twice"},
		}, 0, lake.CurrentLayout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newArbiter(tc.hw)
			a.layout = tc.layout
			for i, st := range tc.steps {
				d := a.decide(st.r)
				v := d.verdict
				if !d.final && st.missing {
					v = streams.Verdict{ReportID: st.r.ID, Reason: "file missing"}
				}
				if err := a.apply(st.r, uint64(i+1), v); err != nil {
					t.Fatalf("step %d: apply: %v", i, err)
				}
				if got := show(v); !matches(got, st.want) {
					t.Errorf("step %d (%s): verdict %s, want %s", i, st.r.ID, got, st.want)
				}
			}
			if w := a.advance(); w != tc.wantHW {
				t.Errorf("advance = %d, want %d", w, tc.wantHW)
			}
		})
	}
}

func show(v streams.Verdict) string {
	if v.Accepted {
		return "A"
	}
	if len(v.Duplicates) > 0 {
		return "R:" + formatSeqs(v.Duplicates) + " " + v.Reason
	}
	return "R!" + v.Reason
}

func matches(got, want string) bool {
	if strings.HasPrefix(want, "R!") {
		return strings.HasPrefix(got, "R!") && strings.Contains(got, want[2:])
	}
	if strings.HasPrefix(want, "R:") {
		return strings.HasPrefix(got, want+" ")
	}
	return got == want
}

func TestArbiterBarrierAndCommit(t *testing.T) {
	a := newArbiter(0)
	must := func(r *streams.Report) {
		t.Helper()
		d := a.decide(r)
		if !d.verdict.Accepted {
			t.Fatalf("%s rejected: %s", r.ID, d.verdict.Reason)
		}
		if err := a.apply(r, 1, d.verdict); err != nil {
			t.Fatal(err)
		}
	}
	must(rep("r3", 3, 2))
	must(rep("r1", 1, 0))
	if w := a.advance(); w != 1 {
		t.Fatalf("advance %d, want 1", w)
	}
	if low, prev, ok := a.gap(); ok {
		t.Fatalf("gap reported before commit: %d %d", low, prev)
	}
	a.committedUpTo(1, a.commitSet())
	if a.hw != 1 || len(a.pending) != 0 {
		t.Fatalf("hw %d pending %d", a.hw, len(a.pending))
	}
	low, prev, ok := a.gap()
	if !ok || low != 3 || prev != 2 {
		t.Fatalf("gap = %d %d %v, want 3 2 true", low, prev, ok)
	}
	must(rep("r2", 2, 1))
	if w := a.advance(); w != 3 {
		t.Fatalf("advance %d, want 3", w)
	}
	a.committedUpTo(3, a.commitSet())
	if a.pendingBatches() != 0 || len(a.next) != 0 {
		t.Fatalf("state left: owner %v next %v", a.owner, a.next)
	}
	// a redelivery of any of them is now a duplicate
	if d := a.decide(rep("x", 2, 1)); d.verdict.Accepted || !slices.Equal(d.verdict.Duplicates, []uint64{2}) {
		t.Fatalf("redelivery after commit: %+v", d.verdict)
	}
	// committed reports republished stay accepted
	if d := a.decide(rep("r2", 2, 1)); !d.verdict.Accepted {
		t.Fatalf("committed report republished: %+v", d.verdict)
	}
}

func TestArbiterAdoptedConflict(t *testing.T) {
	a := newArbiter(4)
	err := a.apply(rep("old", 4, 3), 1, streams.Verdict{ReportID: "old", Accepted: true})
	if !errors.Is(err, errConflict) {
		t.Fatalf("apply = %v, want errConflict", err)
	}
	if len(a.pending) != 0 {
		t.Fatal("conflicting report became pending")
	}
}

func TestArbiterPurgePoint(t *testing.T) {
	a := newArbiter(0)
	a.track(1, 2)
	a.track(2, 0) // malformed
	a.track(3, 5)
	a.track(4, 1)
	if p := a.purgeBefore(); p != 0 {
		t.Fatalf("purge before %d at hw 0", p)
	}
	a.hw = 2
	if p := a.purgeBefore(); p != 3 {
		t.Fatalf("purge before %d, want 3", p)
	}
	a.purged(3)
	a.hw = 5
	if p := a.purgeBefore(); p != 5 {
		t.Fatalf("purge before %d, want 5", p)
	}
}

func TestSeqsRoundTrip(t *testing.T) {
	for _, in := range [][]uint64{{1}, {5, 6, 7, 8, 9, 12}, {3, 1, 2, 2}, {1, 3, 5}} {
		s := formatSeqs(in)
		out, err := parseSeqs(s)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(in)))
		if !slices.Equal(out, want) {
			t.Errorf("%v -> %q -> %v", in, s, out)
		}
	}
	if s := formatSeqs([]uint64{5, 6, 7, 8, 9, 12}); s != "5-9,12" {
		t.Errorf("format = %q", s)
	}
	for _, bad := range []string{"x", "5-", "9-5", "1-99999999999", ",", "-3"} {
		if _, err := parseSeqs(bad); err == nil {
			t.Errorf("parseSeqs(%q) accepted", bad)
		}
	}
}

func FuzzParseSeqs(f *testing.F) {
	f.Add("5-9,12")
	f.Add("1")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSeqs(s)
		if err != nil {
			return
		}
		again, err := parseSeqs(formatSeqs(v))
		if err != nil {
			t.Fatalf("reformatted %q: %v", s, err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(v)))
		if !slices.Equal(again, want) {
			t.Fatal(fmt.Sprint(again, want))
		}
	})
}

// TestArbiterForgetsPurgedCommits: a report this term committed is
// remembered (a copy of it is accepted) while the report stream holds its
// message, and forgotten with its file paths once the stream is purged past
// it; reports found committed in the Delta log at rebuild stay.
func TestArbiterForgetsPurgedCommits(t *testing.T) {
	a := newArbiter(0)
	a.loadCommitted(streams.TableRecords, "old.parquet", "r0", nil)
	r1 := rep("r1", 1, 0)
	r1.Files = []streams.FileInfo{{Table: streams.TableRecords, Path: "f1.parquet"}}
	if err := a.apply(r1, 10, streams.Verdict{ReportID: "r1", Accepted: true}); err != nil {
		t.Fatal(err)
	}
	a.track(10, 1)
	a.committedUpTo(a.advance(), a.commitSet())
	if d := a.decide(r1); !d.verdict.Accepted {
		t.Fatalf("a copy of a committed report before the purge: %+v", d.verdict)
	}
	// A copy at stream sequence 12 moves the report's last message on.
	if err := a.apply(r1, 12, streams.Verdict{ReportID: "r1", Accepted: true}); err != nil {
		t.Fatal(err)
	}
	a.purged(11)
	if _, ok := a.committed["r1"]; !ok {
		t.Fatal("r1 forgotten while its copy at 12 is above the purge point 11")
	}
	a.purged(13)
	if _, ok := a.committed["r1"]; ok {
		t.Fatal("r1 remembered after the stream was purged past every message of it")
	}
	if _, ok := a.paths[streams.TableRecords+"/f1.parquet"]; ok {
		t.Fatal("the path of a forgotten report is still held")
	}
	if _, ok := a.committed["r0"]; !ok {
		t.Fatal("a report the Delta log names was forgotten")
	}
}
