package mining

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// record is one mined line, kept to re-render it later.
type record struct {
	tenant, line string
	res          Result
}

// checkRecords re-renders every record with the text of the version it was
// assigned: versions stay retrievable after templates widen.
func checkRecords(t *testing.T, m *Model, recs []record) {
	t.Helper()
	for i, r := range recs {
		text, ok := m.TemplateVersion(r.res.ID, r.res.Version)
		if !ok {
			t.Fatalf("record %d: TemplateVersion(%d, %d) missing", i, r.res.ID, r.res.Version)
		}
		got, err := Render(text, r.res.Params)
		if err != nil || got != r.line {
			t.Fatalf("record %d (%s): %q renders %q, %v; want %q", i, r.tenant, text, got, err, r.line)
		}
		if !utf8.ValidString(text) {
			t.Fatalf("record %d (%s): template text %q is not UTF-8 (line %q): bytes that are not UTF-8 must be parameters", i, r.tenant, text, r.line)
		}
	}
}

// TestLoghubRoundTrip mines every Loghub-2k line (one tenant per dataset),
// checks that each line renders back byte for byte with the version it was
// given, also after later widenings, and that Prepare/MinePrepared agree
// with Mine.
func TestLoghubRoundTrip(t *testing.T) {
	data, names := loadLoghub(t)
	if data == nil {
		t.Skip("Loghub-2k data absent (set LOGHUB_DIR or provide /work/shared/loghub2k)")
	}
	a := mustNew(t, Config{})
	b := mustNew(t, Config{})
	var recs []record
	for _, name := range names {
		for _, line := range data[name] {
			ra, ea := a.Mine(name, line, nil)
			p := Prepare(line)
			rb, eb := b.MinePrepared(name, p, nil)
			if fmt.Sprint(ra, ea) != fmt.Sprint(rb, eb) {
				t.Fatalf("%s: Mine %v %v, MinePrepared %v %v", name, ra, ea, rb, eb)
			}
			recs = append(recs, record{name, line, ra})
		}
	}
	checkRecords(t, a, recs)
	// Every Loghub line with an extra "<*>", a tab and invalid UTF-8.
	c := mustNew(t, Config{})
	recs = recs[:0]
	for _, name := range names {
		for i, line := range data[name] {
			if i%7 == 0 {
				line = line + " <*>\t\xff"
			}
			r, _ := c.Mine(name, line, nil)
			recs = append(recs, record{name, line, r})
		}
	}
	checkRecords(t, c, recs)
}

// streams returns per-tenant line streams: Loghub datasets when present,
// else generated corpora.
func streams(t *testing.T, perTenant int) (names []string, lines [][]string) {
	data, all := loadLoghub(t)
	if data != nil {
		// five datasets, spread over the sorted list
		for i := 0; i < len(all) && len(names) < 5; i += 2 {
			n := all[i]
			if len(data[n]) < perTenant {
				continue
			}
			names = append(names, n)
			lines = append(lines, data[n][:perTenant])
		}
		return names, lines
	}
	for i := 0; i < 4; i++ {
		names = append(names, fmt.Sprint("gen", i))
		lines = append(lines, genCorpus(perTenant, uint64(i+1)))
	}
	return names, lines
}

// step is one (tenant, line) of an interleaving.
type step struct {
	tenant int
	index  int
}

func interleave(r *rand.Rand, lines [][]string) []step {
	pos := make([]int, len(lines))
	var out []step
	for {
		var open []int
		for k := range lines {
			if pos[k] < len(lines[k]) {
				open = append(open, k)
			}
		}
		if len(open) == 0 {
			return out
		}
		k := open[r.IntN(len(open))]
		out = append(out, step{k, pos[k]})
		pos[k]++
	}
}

// canon describes, per tenant, each line's template as the order in which
// the tenant first saw it (ids depend on the interleaving because the
// counter is shared), its version and the tenant's events in the same
// terms.
func canon(t *testing.T, names []string, lines [][]string, order []step, cfg Config) []string {
	t.Helper()
	m := mustNew(t, cfg)
	local := make([]map[uint64]int, len(names))
	desc := make([]strings.Builder, len(names))
	for k := range local {
		local[k] = map[uint64]int{}
	}
	lid := func(k int, id uint64) int {
		if _, ok := local[k][id]; !ok {
			local[k][id] = len(local[k])
		}
		return local[k][id]
	}
	for _, s := range order {
		r, ev := m.Mine(names[s.tenant], lines[s.tenant][s.index], nil)
		fmt.Fprintf(&desc[s.tenant], "%d/%d", lid(s.tenant, r.ID), r.Version)
		for _, e := range ev {
			if e.Tenant != names[s.tenant] {
				t.Fatalf("event of tenant %q while mining %q", e.Tenant, names[s.tenant])
			}
			fmt.Fprintf(&desc[s.tenant], "[%v %d %d %d %q %q]", e.Kind, lid(s.tenant, e.ID), e.Version, lid(s.tenant, e.Into), e.Template, e.Previous)
		}
		desc[s.tenant].WriteByte(' ')
	}
	out := make([]string, len(names))
	for k := range desc {
		out[k] = desc[k].String()
	}
	return out
}

// TestDeterminismInterleavings: per-tenant groupings, versions and events
// do not depend on how tenants interleave; exact ids are a pure function of
// the interleaving (a replay gives the same ids), and a snapshot/restore at
// a random point continues identically.
func TestDeterminismInterleavings(t *testing.T) {
	names, lines := streams(t, 600)
	cfg := Config{MaxTemplatesPerTenant: 25} // small cap: evictions too
	r := rand.New(rand.NewPCG(42, 7))
	var want []string
	for round := 0; round < 4; round++ {
		order := interleave(r, lines)
		got := canon(t, names, lines, order, cfg)
		if want == nil {
			want = got
		}
		for k := range names {
			if got[k] != want[k] {
				t.Fatalf("round %d: tenant %s differs between interleavings", round, names[k])
			}
		}
		// Serial replay of this interleaving, with a snapshot/restore at
		// a random point, gives the same ids, versions and events.
		a := mustNew(t, cfg)
		b := mustNew(t, cfg)
		cut := r.IntN(len(order))
		for i, s := range order {
			if i == cut {
				var buf bytes.Buffer
				if err := b.Snapshot(&buf); err != nil {
					t.Fatal(err)
				}
				var err error
				if b, err = Restore(cfg, &buf); err != nil {
					t.Fatal(err)
				}
			}
			line := lines[s.tenant][s.index]
			ra, ea := a.Mine(names[s.tenant], line, nil)
			rb, eb := b.Mine(names[s.tenant], line, nil)
			if fmt.Sprint(ra, ea) != fmt.Sprint(rb, eb) {
				t.Fatalf("round %d step %d (cut %d): %v %v vs %v %v", round, i, cut, ra, ea, rb, eb)
			}
		}
		if fmt.Sprint(a.Stats()) != fmt.Sprint(b.Stats()) {
			t.Fatalf("stats differ after replay: %+v vs %+v", a.Stats(), b.Stats())
		}
		var sa, sb bytes.Buffer
		if err := a.Snapshot(&sa); err != nil {
			t.Fatal(err)
		}
		if err := b.Snapshot(&sb); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sa.Bytes(), sb.Bytes()) {
			t.Fatal("snapshots of replay and restored replay differ")
		}
	}
}

// TestSameTextTwoTenants: identical lines in two tenants get two ids.
func TestSameTextTwoTenants(t *testing.T) {
	m := mustNew(t, Config{})
	r1, _ := m.Mine("a", "disk full on /dev/sda1", nil)
	r2, _ := m.Mine("b", "disk full on /dev/sda1", nil)
	if r1.ID == r2.ID {
		t.Fatalf("tenants share template %d", r1.ID)
	}
	if ten, _, _, _ := m.Template(r2.ID); ten != "b" {
		t.Fatalf("template %d belongs to %q", r2.ID, ten)
	}
}

// FuzzMineRender: any line, mined after and before other lines, renders
// back exactly; Prepare/MinePrepared agree with Mine.
func FuzzMineRender(f *testing.F) {
	for _, s := range []string{
		"", " ", "a", "<*>", "a <*> b", "x=1 y=<*>", "\x00\xff", "Jun 18 02:08:10 2005 up",
		"blk_1 blk_22 blk_333", "proxy.example.com:80 close, 5 bytes (1.1 KB) sent, lifetime <1 sec",
		"user  0101 from 1.2.3.4", "id 42\t foo end", "((()))[]{}", "a......1", "scheme://h@1.2.3.4:5]",
	} {
		f.Add(s, "prefix "+s)
	}
	f.Fuzz(func(t *testing.T, line, other string) {
		m := mustNew(t, Config{MaxLineBytes: 4096, MaxTokens: 256})
		var recs []record
		for _, l := range []string{other, line, other + " " + line, line, line + " 1", line} {
			r, _ := m.Mine("t", l, nil)
			recs = append(recs, record{"t", l, r})
		}
		checkRecords(t, m, recs)
		m2 := mustNew(t, Config{MaxLineBytes: 4096, MaxTokens: 256})
		for _, rc := range recs {
			p := Prepare(rc.line)
			r, _ := m2.MinePrepared("t", p, nil)
			if fmt.Sprint(r) != fmt.Sprint(rc.res) {
				t.Fatalf("MinePrepared %v, Mine %v", r, rc.res)
			}
		}
	})
}

// TestParallelPrepare: Prepare runs on many goroutines in any order; the
// ordered MinePrepared calls give exactly what Mine gives.
func TestParallelPrepare(t *testing.T) {
	names, lines := streams(t, 400)
	var order []step
	r := rand.New(rand.NewPCG(9, 9))
	order = interleave(r, lines)
	prepared := make([]Prepared, len(order))
	const workers = 4
	done := make(chan struct{})
	for w := 0; w < workers; w++ {
		go func(w int) {
			defer func() { done <- struct{}{} }()
			// each worker takes every workers-th line, back to front
			for i := len(order) - 1 - w; i >= 0; i -= workers {
				s := order[i]
				prepared[i] = Prepare(lines[s.tenant][s.index])
			}
		}(w)
	}
	for w := 0; w < workers; w++ {
		<-done
	}
	a, b := mustNew(t, Config{}), mustNew(t, Config{})
	for i, s := range order {
		ra, ea := a.Mine(names[s.tenant], lines[s.tenant][s.index], nil)
		rb, eb := b.MinePrepared(names[s.tenant], prepared[i], nil)
		if fmt.Sprint(ra, ea) != fmt.Sprint(rb, eb) {
			t.Fatalf("step %d: Mine %v %v, MinePrepared %v %v", i, ra, ea, rb, eb)
		}
	}
}
