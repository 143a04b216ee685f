package subscribe_test

import (
	"slices"
	"testing"

	"github.com/quarrylake/quarry/subscribe"
)

// TestWALOrderAcrossEncoders: encoder A reports WAL batches 1, 2, 4 and 5
// (tenants acme and beta) before encoder B reports batch 3; the committer
// commits A's files at once, with the high-water at 2, and B's file with
// the high-water at 5. The subscriber delivers each tenant's lines in WAL
// order, each once: batches 4 and 5 are held until the commit whose
// high-water covers them. A subscription resumed from a cursor taken while
// they are held, and one resumed after every record, deliver the same.
func TestWALOrderAcrossEncoders(t *testing.T) {
	e := newEnv(t)
	s := e.subscribe(subscribe.Config{JS: e.js, From: subscribe.Beginning(), PollInterval: never})
	e.commitUpTo([]batch{ // encoder A
		{tenant: "acme", date: "2026-01-01", n: 2, seq: 1, prev: 0},
		{tenant: "beta", date: "2026-01-01", n: 1, seq: 2, prev: 1},
		{tenant: "acme", date: "2026-01-01", n: 3, seq: 4, prev: 3},
		{tenant: "beta", date: "2026-01-01", n: 2, seq: 5, prev: 4},
	}, nil, 2)
	first := []string{"line acme-1-0", "line acme-1-1", "line beta-2-0"}
	if got := take(t, s, len(first)); !slices.Equal(got, first) {
		t.Fatalf("first commit (high-water 2): got %v, want %v", got, first)
	}
	held := s.Cursor()                                                                         // batches 4 and 5 are committed and held
	e.commitUpTo([]batch{{tenant: "acme", date: "2026-01-01", n: 1, seq: 3, prev: 2}}, nil, 5) // encoder B
	second := []string{"line acme-3-0", "line acme-4-0", "line acme-4-1", "line acme-4-2", "line beta-5-0", "line beta-5-1"}
	if got := take(t, s, len(second)); !slices.Equal(got, second) {
		t.Fatalf("second commit (high-water 5): got %v, want %v", got, second)
	}
	r := e.subscribe(subscribe.Config{JS: e.js, From: subscribe.After(held), PollInterval: never})
	if got := take(t, r, len(second)); !slices.Equal(got, second) {
		t.Fatalf("resumed at %s, where batches 4 and 5 were held: got %v, want %v", held, got, second)
	}
	all := append(slices.Clone(first), second...)
	var resumed []string
	from := subscribe.Beginning()
	for range all {
		s := e.subscribe(subscribe.Config{From: from, PollInterval: never})
		resumed = append(resumed, take(t, s, 1)...)
		s.Close()
		from = subscribe.After(s.Cursor())
	}
	if !slices.Equal(resumed, all) {
		t.Fatalf("resumed after every record:\n got %v\nwant %v", resumed, all)
	}
	// Nothing is delivered twice: the next line each one gets is new.
	next := e.commit(1, "beta")
	for name, sub := range map[string]*subscribe.Subscription{"follower": s, "resumed at held": r,
		"resumed at the end": e.subscribe(subscribe.Config{JS: e.js, From: from, PollInterval: never})} {
		if got := take(t, sub, 1); !slices.Equal(got, next) {
			t.Fatalf("%s: after the lake got %v, want %v", name, got, next)
		}
	}
}
