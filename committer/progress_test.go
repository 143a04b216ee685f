package committer

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/streams"
)

func TestProgressStateCountsOnlyCoveredFacts(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	fact := func(src string, d time.Duration) streams.Progress {
		return streams.Progress{Source: src, FinalizedUntil: t0.Add(d)}
	}
	tests := []struct {
		name   string
		facts  []factAt
		hw     uint64
		want   map[string]time.Time // done after advance(hw)
		change bool
	}{
		{"not covered", []factAt{{fact("a", 0), 5}}, 4, map[string]time.Time{}, false},
		{"covered exactly", []factAt{{fact("a", 0), 5}}, 5, map[string]time.Time{"a": t0}, true},
		{"newest covered wins", []factAt{{fact("a", 0), 3}, {fact("a", time.Minute), 4}, {fact("a", time.Hour), 9}}, 6,
			map[string]time.Time{"a": t0.Add(time.Minute)}, true},
		{"never backwards", []factAt{{fact("a", time.Hour), 2}, {fact("a", 0), 3}}, 3, map[string]time.Time{"a": t0.Add(time.Hour)}, true},
		{"sources apart", []factAt{{fact("a", 0), 2}, {fact("b", 0), 8}}, 5, map[string]time.Time{"a": t0}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ps := newProgressState()
			for _, f := range tc.facts {
				ps.observe(f.p, f.walSeq)
			}
			info := ps.info(tc.hw)
			if got := ps.advance(tc.hw, 7); got != tc.change {
				t.Errorf("advance changed = %v, want %v", got, tc.change)
			}
			if len(ps.done) != len(tc.want) || len(info) != len(tc.want) {
				t.Fatalf("done %v info %v, want %v", ps.done, info, tc.want)
			}
			for src, want := range tc.want {
				if got := ps.done[src].FinalizedUntil; !got.Equal(want) {
					t.Errorf("%s: finalized_until %v, want %v", src, got, want)
				}
				if got := info[src].(map[string]any)["finalized_until"]; got != want.Format(time.RFC3339Nano) {
					t.Errorf("%s: commitInfo finalized_until %v, want %v", src, got, want)
				}
				if ps.done[src].HighWater != int64(tc.hw) || ps.done[src].Version != 7 {
					t.Errorf("%s: row %+v", src, ps.done[src])
				}
			}
		})
	}
}

func TestProgressPendingBounded(t *testing.T) {
	ps := newProgressState()
	for i := range uint64(10 * maxPendingFacts) {
		ps.observe(streams.Progress{Source: "a", FinalizedUntil: time.Unix(int64(i), 0)}, i+1)
		ps.observe(streams.Progress{Source: "a", FinalizedUntil: time.Unix(int64(i), 1)}, i+1) // same seq: replaces
	}
	if n := len(ps.pending["a"]); n != maxPendingFacts {
		t.Fatalf("pending facts %d, want %d", n, maxPendingFacts)
	}
}

// lastCommitInfoProgress is the "progress" object of the records table's
// newest commit.
func (e *env) lastCommitInfoProgress() map[string]any {
	e.t.Helper()
	snap, err := delta.OpenTable(e.local, lake.RecordsTable).Snapshot(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	q, _ := snap.CommitInfo["quarry"].(map[string]any)
	p, _ := q["progress"].(map[string]any)
	return p
}

func TestProgressWaitsForTheHighWater(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// Three frames are in the WAL before the source's fact: the fact
	// speaks for all three.
	for range 3 {
		if _, err := e.js.Publish(ctx, "quarry.wal.s1", []byte("frame")); err != nil {
			t.Fatal(err)
		}
	}
	pkv, err := e.js.KeyValue(ctx, streams.ProgressBucket)
	if err != nil {
		t.Fatal(err)
	}
	fin := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	b, _ := json.Marshal(streams.Progress{Source: "s1", Tenant: "acme", Kind: "lines", FinalizedUntil: fin, UpdatedAt: fin})
	if _, err := pkv.Put(ctx, "s1", b); err != nil {
		t.Fatal(err)
	}
	// A progress/1 fact, from a producer before tenants: no tenant.
	old := `{"source":"s2","kind":"lines","rows":1,"frames":1,"finalized_until":"2026-11-30T11:00:00Z","updated_at":"2026-11-30T11:00:00Z"}`
	if _, err := pkv.Put(ctx, "s2", []byte(old)); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig("c1")
	cfg.ProgressInterval = time.Millisecond
	r := e.start(cfg, nil)
	lk := lake.Open(e.local)

	e.publish(e.encode("r1", chain(1, 2)...))
	e.waitHW(r.c, 2)
	eventually(t, 10*time.Second, "records commit at high-water 2", func() bool { return e.table(lake.RecordsTable).txn == 2 })
	if p := e.lastCommitInfoProgress(); p["s1"] != nil || p["s2"] != nil {
		t.Fatalf("commitInfo at high-water 2 shows %v; the facts need WAL seq 3", p)
	}
	rows, v, err := lk.Progress(ctx)
	if err != nil || v < 0 {
		t.Fatalf("progress table: version %d, %v", v, err)
	}
	if len(rows) != 0 {
		t.Fatalf("progress rows at high-water 2: %+v", rows)
	}

	e.publish(e.encode("r2", batch{3, 2}))
	e.waitHW(r.c, 3)
	eventually(t, 10*time.Second, "progress rows of s1 and s2", func() bool {
		rows, _, err = lk.Progress(ctx)
		return err == nil && len(rows) == 2
	})
	slices.SortFunc(rows, func(a, b lake.ProgressRow) int { return strings.Compare(a.Source, b.Source) })
	got := rows[0]
	if got.Source != "s1" || got.Tenant != "acme" || !got.FinalizedUntil.Equal(fin) || got.WALSeq != 3 || got.HighWater != 3 || got.Version < 1 {
		t.Fatalf("progress row %+v", got)
	}
	if rows[1].Source != "s2" || rows[1].Tenant != "" || rows[1].FinalizedUntil.IsZero() {
		t.Fatalf("progress row of the progress/1 fact %+v", rows[1])
	}
	p := e.lastCommitInfoProgress()
	s1, _ := p["s1"].(map[string]any)
	if s1["finalized_until"] != fin.Format(time.RFC3339Nano) || s1["tenant"] != "acme" {
		t.Fatalf("commitInfo at high-water 3: progress %v", p)
	}
	if s2, _ := p["s2"].(map[string]any); s2 == nil || s2["tenant"] != nil {
		t.Fatalf("commitInfo at high-water 3: progress of the progress/1 fact %v", p["s2"])
	}
	if err := delta.ValidateLog(ctx, e.local, lake.ProgressTable); err != nil {
		t.Fatal(err)
	}
}

// TestProgressStallIsVisible: a progress table that cannot be written does
// not hold up the high-water, but Ready says so after StallAfter, and the
// progress lands once the store heals.
func TestProgressStallIsVisible(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.js.Publish(ctx, "quarry.wal.s1", []byte("frame")); err != nil {
		t.Fatal(err)
	}
	pkv, err := e.js.KeyValue(ctx, streams.ProgressBucket)
	if err != nil {
		t.Fatal(err)
	}
	fin := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	b, _ := json.Marshal(streams.Progress{Source: "s1", Kind: "lines", FinalizedUntil: fin})
	if _, err := pkv.Put(ctx, "s1", b); err != nil {
		t.Fatal(err)
	}
	faults := objstore.NewFaults(1)
	id := faults.Add(objstore.Rule{Op: objstore.OpPut, KeyPrefix: lake.ProgressTable + "/part-"})
	cfg := testConfig("c1")
	cfg.StallAfter = 200 * time.Millisecond
	cfg.ProgressInterval = time.Millisecond
	r := e.start(cfg, objstore.NewFaulty(e.local, faults))
	e.publish(e.encode("r1", batch{1, 0}))
	e.waitHW(r.c, 1)
	eventually(t, 10*time.Second, "Ready to report the progress stall", func() bool {
		err := r.c.Ready()
		return err != nil && strings.Contains(err.Error(), "progress table not written")
	})
	faults.Remove(id)
	eventually(t, 10*time.Second, "Ready after the store healed", func() bool { return r.c.Ready() == nil })
	rows, _, err := lake.Open(e.local).Progress(ctx)
	if err != nil || len(rows) != 1 || !rows[0].FinalizedUntil.Equal(fin) {
		t.Fatalf("progress rows %+v, %v", rows, err)
	}
}
