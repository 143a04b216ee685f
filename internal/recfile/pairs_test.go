package recfile

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// pairsRows makes n rows: template 1 with a hex id, template 2 with a
// user name, template 3 (rare: fewer than paramBytesMinRows rows) with a
// word.
func pairsRows(n int) ([]Row, Templates) {
	tpl := Templates{{1, 1}: "req <*> done", {2, 1}: "user <*> in", {3, 1}: "rare <*>"}
	r := rand.New(rand.NewPCG(1, 7))
	var rows []Row
	for i := range n {
		row := Row{WALSeq: 1 + uint64(i/100), Index: uint32(i % 100), TS: ns("2026-11-29T00:00:00.010Z") + int64(i)*1e6, Source: "s"}
		switch {
		case i%500 == 7:
			row.TemplateID, row.Params = 3, []string{"zebra"}
		case i%2 == 0:
			row.TemplateID, row.Params = 1, []string{fmt.Sprintf("%08x", r.Uint32())}
		default:
			row.TemplateID, row.Params = 2, []string{[]string{"alice", "bob", "carol"}[r.IntN(3)]}
		}
		row.TemplateVersion = 1
		rows = append(rows, row)
	}
	return rows, tpl
}

// TestPairsWritten: a records file of several row groups written at zstd's
// best level (as compaction writes) carries, for
// each version with a byte set, the pairs of adjacent bytes of its
// parameters (PairsKey), which FileSummary hands out: every pair a
// parameter holds is in its version's set, pairs none holds mostly are
// not, and a rare version (no byte set) has none. A file of one row group
// has no PairsKey, nor one written at the default level (a busy
// encoder's).
func TestPairsWritten(t *testing.T) {
	rows, tpl := pairsRows(2*defaultOptions().groupRows + 100)
	f, err := Encode(rows, tpl, WithHighCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	pf, err := OpenParquet(bytes.NewReader(f.Data), int64(len(f.Data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(pf.RowGroups()) < 2 {
		t.Fatalf("%d row groups, want several", len(pf.RowGroups()))
	}
	if _, ok := pf.Lookup(PairsKey); !ok {
		t.Fatal("no PairsKey in a file of several row groups")
	}
	sum, err := FileSummary(pf)
	if err != nil {
		t.Fatal(err)
	}
	sets := map[Key]Pairs{}
	for _, s := range sum {
		if s.AnyBytes != (s.ParamPairs == nil) {
			t.Errorf("%v: AnyBytes %v, pairs %v", s.Key, s.AnyBytes, s.ParamPairs)
		}
		sets[s.Key] = s.ParamPairs
	}
	if sets[Key{1, 1}] == nil || sets[Key{2, 1}] == nil || sets[Key{3, 1}] != nil {
		t.Fatalf("pairs by version: %v", slices.Collect(maps.Keys(sets)))
	}
	held := map[Key]map[[2]byte]bool{}
	for _, r := range rows {
		k := Key{r.TemplateID, r.TemplateVersion}
		if held[k] == nil {
			held[k] = map[[2]byte]bool{}
		}
		for _, p := range r.Params {
			for j := 1; j < len(p); j++ {
				held[k][[2]byte{p[j-1], p[j]}] = true
				if ps := sets[k]; ps != nil && !ps.HasPair(p[j-1], p[j]) {
					t.Fatalf("%v: pair %q of %q not in its set", k, p[j-1:j+1], p)
				}
			}
		}
	}
	// Of the pairs of bytes the file's parameters use that a version's
	// parameters never hold, most are not in its set.
	for _, k := range []Key{{1, 1}, {2, 1}} {
		var out, in int
		for a := range 256 {
			for b := range 256 {
				if held[k][[2]byte{byte(a), byte(b)}] {
					continue
				}
				if sets[k].HasPair(byte(a), byte(b)) {
					in++
				} else {
					out++
				}
			}
		}
		if in*3 > out {
			t.Errorf("%v: %d pairs it never holds in its set of %d words, %d not", k, in, len(sets[k]), out)
		}
	}
	for name, opts := range map[string][]Option{
		"a file of one row group":     {WithHighCompression(true)},
		"a file at the default level": nil,
	} {
		n := len(rows)
		if len(opts) > 0 {
			n = defaultOptions().groupRows
		}
		g, err := Encode(rows[:n], tpl, opts...)
		if err != nil {
			t.Fatal(err)
		}
		gf, err := OpenParquet(bytes.NewReader(g.Data), int64(len(g.Data)))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := gf.Lookup(PairsKey); ok {
			t.Errorf("%s has PairsKey", name)
		}
	}
}

// TestParsePairsDamaged: a PairsKey value cut, padded, of another
// version or claiming more words than it holds is an error, never a
// panic (the lake's TestPairsAgreeWithoutPairs reads a file with such a
// value).
func TestParsePairsDamaged(t *testing.T) {
	var p pairSeen
	var seen [256]bool
	p.addParam("alice", &seen)
	p.addParam("bob", &seen)
	good := encodePairs(map[Key]Pairs{{1, 1}: p.hashed(), {4, 2}: p.hashed()})
	got, err := ParsePairs(good)
	if err != nil || len(got) != 2 || !got[Key{4, 2}].HasPair('l', 'i') {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	raw := func(b []byte) string {
		z, err := codec(zstd.SpeedBetterCompression).Encode(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		return pack7(append([]byte{pairsVersion}, z...))
	}
	for name, v := range map[string]string{
		"empty":          "",
		"base64":         "AQID",
		"cut":            good[:len(good)/2],
		"version 2":      pack7([]byte{2, 0}),
		"not zstd":       pack7([]byte{pairsVersion, 1, 2, 3}),
		"count too high": raw([]byte{9}),
		"words missing":  raw([]byte{1, 1, 1, 3, 0, 0}),
		"too many words": raw(append([]byte{1, 1, 1, 7}, make([]byte, 8<<7)...)),
		"trailing bytes": raw(append([]byte{1, 1, 1, 0}, make([]byte, 9)...)),
		"repeated key":   raw(append(append([]byte{2, 1, 1, 0}, make([]byte, 8)...), append([]byte{0, 1, 0}, make([]byte, 8)...)...)),
	} {
		if _, err := ParsePairs(v); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "parameter pairs") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParsePairs(f *testing.F) {
	var p pairSeen
	p.addParam("alice", new([256]bool))
	f.Add(encodePairs(map[Key]Pairs{{1, 1}: p.hashed(), {9, 3}: make(Pairs, 64)}))
	f.Add(encodePairs(nil))
	f.Add("~")
	f.Fuzz(func(t *testing.T, v string) {
		ps, err := ParsePairs(v)
		if err != nil {
			return
		}
		again, err := ParsePairs(encodePairs(ps))
		if err != nil {
			t.Fatalf("re-encoded: %v", err)
		}
		if len(again) != len(ps) {
			t.Fatalf("re-encoded %d entries, had %d", len(again), len(ps))
		}
		for k, s := range ps {
			if !slices.Equal(again[k], s) {
				t.Fatalf("%v: %v, had %v", k, again[k], s)
			}
			s.HasPair('a', 'b')
		}
	})
}
