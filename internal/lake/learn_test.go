package lake_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/lake"
	quarryql "github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
)

// TestCacheLearnsRareBytes: a lake with EnableCache learns, from the rows
// a search renders, the parameter bytes of the versions a file's summary
// gives none (fewer than 64 rows), so a later term those bytes cannot
// spell rules the file out without reading it: after the learning search
// the file's pages are garbled (same size, footer kept), and the cached
// lake still answers from the footer alone where a fresh lake, which must
// read the rare rows, fails; the same for a lake that learns through
// Search. Every answer before the garbling equals a fresh lake's.
func TestCacheLearnsRareBytes(t *testing.T) {
	f := newFixture(t)
	texts := recfile.Templates{{ID: 1, Version: 1}: "GET <*> status=<*>", {ID: 2, Version: 1}: "job <*> done in <*>"}
	f.commit(f.tpl, 1, f.templatesFile("w1", []lake.TemplateRow{
		{TemplateID: 1, Tenant: "acme", Version: 1, Template: texts[recfile.Key{ID: 1, Version: 1}], Kind: "created", WALSeq: 1},
		{TemplateID: 2, Tenant: "acme", Version: 1, Template: texts[recfile.Key{ID: 2, Version: 1}], Kind: "created", WALSeq: 1},
	}))
	at := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC).UnixMicro()
	var rows []recfile.Row
	for i := range 200 {
		r := recfile.Row{WALSeq: 1, Index: uint32(i), TS: at + int64(i), TemplateID: 1, TemplateVersion: 1, Source: "web",
			Params: []string{fmt.Sprintf("/p%d", i%7), "200"}}
		if i%50 == 0 { // four rows: no byte set in the footer
			r.TemplateID, r.Params = 2, []string{fmt.Sprint("j", i), fmt.Sprint(i%9, "s")}
		}
		rows = append(rows, r)
	}
	add := f.v3File("acme", "2026-01-02", "w1", rows, texts)
	f.commit(f.rec, 1, add)

	cached := lake.Open(f.store)
	cached.EnableCache()
	raw := func(l *lake.Lake, src string) (string, error) {
		var b bytes.Buffer
		err := l.SearchRaw(context.Background(), quarryql.MustCompile(src), lake.SearchOptions{}, &b)
		return b.String(), err
	}
	lines := func(l *lake.Lake, src string) (string, error) {
		var b bytes.Buffer
		err := l.Search(context.Background(), quarryql.MustCompile(src), lake.SearchOptions{LineOnly: true}, func(r lake.Record) error {
			return lake.WriteRaw(&b, r)
		})
		return b.String(), err
	}
	// A second cached lake learns through Search (records, the API's
	// NDJSON) only.
	viaSearch := lake.Open(f.store)
	viaSearch.EnableCache()
	for _, src := range []string{"QZX", "j50", "done", "s", "GET", "j1 OR QZX", "-j0"} {
		want, err := raw(lake.Open(f.store), src)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // learning, then learnt
			if got, err := raw(cached, src); err != nil || got != want {
				t.Fatalf("%q: %q %v, want %q", src, got, err, want)
			}
			if got, err := lines(viaSearch, src); err != nil || got != want {
				t.Fatalf("%q through Search: %q %v, want %q", src, got, err, want)
			}
		}
		if want2 := searchLines(t, cached, quarryql.MustCompile(src), lake.SearchOptions{}); len(want2) != bytes.Count([]byte(want), []byte("\n")) {
			t.Fatalf("%q: Search %d lines, SearchRaw %q", src, len(want2), want)
		}
	}

	// Garble every byte between the magic and the footer.
	key := f.rec.FileKey(add.Path)
	data, err := f.store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	foot := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	bad := slices.Clone(data)
	for i := 4; i < len(bad)-8-foot; i++ {
		bad[i] ^= 0x5a
	}
	if err := f.store.Put(context.Background(), key, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := raw(lake.Open(f.store), "QZX"); err == nil {
		t.Fatal("a fresh lake read the garbled file without error: the test proves nothing")
	}
	if got, err := raw(cached, "QZX"); err != nil || got != "" {
		t.Fatalf("cached lake, a term the learnt bytes rule out: %q %v, want nothing read", got, err)
	}
	if got, err := lines(viaSearch, "QZX"); err != nil || got != "" {
		t.Fatalf("lake that learnt through Search, a term the learnt bytes rule out: %q %v, want nothing read", got, err)
	}
}
