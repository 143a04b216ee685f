package mining

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// mustNew returns a model or fails the test.
func mustNew(t testing.TB, cfg Config) *Model {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// checkRoundTrip mines line and verifies that it renders back exactly with
// the text of the version it was assigned.
func checkRoundTrip(t testing.TB, m *Model, tenant, line string) Result {
	t.Helper()
	res, _ := m.Mine(tenant, line, nil)
	text, ok := m.TemplateVersion(res.ID, res.Version)
	if !ok {
		t.Fatalf("TemplateVersion(%d, %d) missing for %q", res.ID, res.Version, line)
	}
	got, err := Render(text, res.Params)
	if err != nil {
		t.Fatalf("Render(%q, %q): %v (line %q)", text, res.Params, err, line)
	}
	if got != line {
		t.Fatalf("round trip mismatch:\n line %q\n got  %q\n tmpl %q params %q", line, got, text, res.Params)
	}
	return res
}

func TestRender(t *testing.T) {
	tests := []struct {
		name     string
		template string
		params   []string
		want     string
		wantErr  bool
	}{
		{"no params", "hello world", nil, "hello world", false},
		{"two params", "a <*> b <*>", []string{"1", "2"}, "a 1 b 2", false},
		{"adjacent", "<*><*>", []string{"x", "y"}, "xy", false},
		{"param is wildcard", "<*>", []string{"<*>"}, "<*>", false},
		{"too few", "a <*> <*>", []string{"1"}, "", true},
		{"too many", "a", []string{"1"}, "", true},
		{"empty", "", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.template, tt.params)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	d := DefaultConfig()
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	bad := Config{MaxTemplatesPerTenant: -1, MaxLineBytes: -1, MaxTokens: -5, Similarity: 2}
	err := bad.Validate()
	if err == nil {
		t.Fatal("want error")
	}
	for _, w := range []string{"max_templates_per_tenant", "max_line_bytes", "max_tokens", "similarity"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %s", err, w)
		}
	}
	if _, err := New(bad); err == nil {
		t.Fatal("New accepted a bad config")
	}
}

func TestGroupingAndEvolution(t *testing.T) {
	m := mustNew(t, Config{VariableAfter: 1})
	var ev []Event
	r1, ev := m.Mine("t", "PacketResponder 1 for block blk_38865049064139660 terminating", ev)
	r2, ev := m.Mine("t", "PacketResponder 0 for block blk_-6952295868487656571 terminating", ev)
	if r1.ID != 1 || r2.ID != 1 || r1.Version != 1 || r2.Version != 1 {
		t.Fatalf("got %+v %+v", r1, r2)
	}
	if len(ev) != 1 || ev[0].Kind != EventCreated || ev[0].Template != "PacketResponder <*> for block blk_<*> terminating" {
		t.Fatalf("events %+v", ev)
	}
	ev = ev[:0]
	r3, ev := m.Mine("t", "Verification good for blk_10", ev)
	r4, ev := m.Mine("t", "Verification poor for blk_20", ev)
	if r3.ID != 2 || r4.ID != 2 || r4.Version != 2 {
		t.Fatalf("got %+v %+v", r3, r4)
	}
	if len(ev) != 2 || ev[1].Kind != EventChanged || ev[1].Previous != "Verification good for blk_<*>" || ev[1].Template != "Verification <*> for blk_<*>" || ev[1].Version != 2 {
		t.Fatalf("events %+v", ev)
	}
	if s, ok := m.TemplateVersion(2, 1); !ok || s != "Verification good for blk_<*>" {
		t.Fatalf("version 1 text %q %v", s, ok)
	}
	if tn, v, s, ok := m.Template(2); !ok || tn != "t" || v != 2 || s != "Verification <*> for blk_<*>" {
		t.Fatalf("Template(2) = %q %d %q %v", tn, v, s, ok)
	}
	// The same text in another tenant is another template.
	r5, _ := m.Mine("u", "PacketResponder 1 for block blk_3 terminating", nil)
	if r5.ID != 3 {
		t.Fatalf("other tenant got id %d", r5.ID)
	}
}

func TestEnumerationsAndMerge(t *testing.T) {
	m := mustNew(t, Config{VariableAfter: 3})
	var ev []Event
	r1, ev := m.Mine("t", "cupsd startup succeeded", ev)
	r2, ev := m.Mine("t", "cupsd shutdown succeeded", ev)
	if r1.ID == r2.ID {
		t.Fatalf("two values of a word position share template %d", r1.ID)
	}
	r3, ev := m.Mine("t", "cupsd restart succeeded", ev)
	if r3.ID != r1.ID || r3.Version != 2 {
		t.Fatalf("third value: %+v, want id %d v2", r3, r1.ID)
	}
	if m.Canonical(r2.ID) != r1.ID {
		t.Fatalf("Canonical(%d) = %d, want %d", r2.ID, m.Canonical(r2.ID), r1.ID)
	}
	kinds := []EventKind{}
	for _, e := range ev {
		kinds = append(kinds, e.Kind)
	}
	if fmt.Sprint(kinds) != fmt.Sprint([]EventKind{EventCreated, EventCreated, EventChanged, EventMerged}) {
		t.Fatalf("events %v", ev)
	}
	if e := ev[3]; e.ID != r2.ID || e.Into != r1.ID || e.Template != "cupsd <*> succeeded" || e.Previous != "cupsd shutdown succeeded" {
		t.Fatalf("merge event %+v", e)
	}
	// The merged template keeps its text; new "shutdown" lines go to the survivor.
	if s, ok := m.TemplateVersion(r2.ID, 1); !ok || s != "cupsd shutdown succeeded" {
		t.Fatalf("merged template text %q %v", s, ok)
	}
	if r, _ := m.Mine("t", "cupsd shutdown succeeded", nil); r.ID != r1.ID {
		t.Fatalf("after merge got id %d", r.ID)
	}
}

func TestRoundTripTable(t *testing.T) {
	lines := []string{
		"",
		" ",
		"\t\tleading tabs and trailing spaces   ",
		"a  b   c\t d",
		"literal <*> in a line",
		"<*><*><*>",
		"<<*>> <*<*>*> <* *> <*",
		"x=<*>,y=<*>",
		"NUL\x00byte and \xff\xfe invalid utf8 \xc3",
		"user=root uid=0 path=/var/log/x.log.",
		"done...",
		"...",
		".",
		"ends with dots 12.",
		"punct!?;:,()[]{}\"'|<>",
		"\r\n",
	}
	m := mustNew(t, Config{})
	for _, l := range lines {
		checkRoundTrip(t, m, "t", l)
	}
	// Feed them again in another order to exercise widening.
	for i := len(lines) - 1; i >= 0; i-- {
		checkRoundTrip(t, m, "t", lines[i])
	}
}

func TestPathological(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	manyTokens := strings.Repeat("a ", 10000)
	junk := make([]byte, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range junk {
		junk[i] = byte(r.UintN(256))
	}
	tests := []struct {
		name      string
		line      string
		oversized bool
	}{
		{"1MB line", huge, true},
		{"10k tokens", manyTokens, true},
		{"binary junk", string(junk), false},
		{"binary junk over limit", strings.Repeat(string(junk), 17), true},
		{"invalid utf8", "\xff\xfe\xfd abc \x80", false},
		{"only NULs", "\x00\x00\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustNew(t, Config{})
			res := checkRoundTrip(t, m, "t", tt.line)
			text, _ := m.TemplateVersion(res.ID, res.Version)
			if tt.oversized != (text == Wildcard && len(res.Params) == 1 && res.Params[0] == tt.line) {
				t.Fatalf("oversized=%v but template %.80q", tt.oversized, text)
			}
			if got := m.Stats().Oversized > 0; got != tt.oversized {
				t.Fatalf("Stats.Oversized>0 = %v, want %v", got, tt.oversized)
			}
			// The prepared path agrees.
			m2 := mustNew(t, Config{})
			p := Prepare(tt.line)
			res2, _ := m2.MinePrepared("t", p, nil)
			if res2.ID != res.ID || res2.Version != res.Version || len(res2.Params) != len(res.Params) {
				t.Fatalf("MinePrepared %+v vs Mine %+v", res2.ID, res.ID)
			}
		})
	}
}

func TestEviction(t *testing.T) {
	m := mustNew(t, Config{MaxTemplatesPerTenant: 3})
	ids := map[uint64]bool{}
	for i := 0; i < 10; i++ {
		line := fmt.Sprintf("event%c happened", 'a'+i)
		res := checkRoundTrip(t, m, "t", line)
		if ids[res.ID] {
			t.Fatalf("id %d reused", res.ID)
		}
		ids[res.ID] = true
		if i == 1 {
			// keep "eventa" hot
			checkRoundTrip(t, m, "t", "eventa happened")
		}
	}
	st := m.Stats()
	if st.Templates != 3 || st.Evictions != 7 || len(st.Tenants) != 1 || st.Tenants[0].Templates != 3 {
		t.Fatalf("stats %+v", st)
	}
	if _, _, _, ok := m.Template(1); ok {
		t.Fatal("evicted template still live")
	}
}

func TestSnapshotRestore(t *testing.T) {
	lines := genCorpus(3000, 7)
	cfg := Config{MaxTemplatesPerTenant: 40}
	a := mustNew(t, cfg)
	for i, l := range lines[:1500] {
		a.Mine(fmt.Sprint("t", i%3), l, nil)
	}
	var buf bytes.Buffer
	if err := a.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	b, err := Restore(cfg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines[1500:] {
		ten := fmt.Sprint("t", i%3)
		ra, ea := a.Mine(ten, l, nil)
		rb, eb := b.Mine(ten, l, nil)
		if fmt.Sprint(ra, ea) != fmt.Sprint(rb, eb) {
			t.Fatalf("line %d diverged: %v %v vs %v %v", i, ra, ea, rb, eb)
		}
	}
	if fmt.Sprint(a.Stats()) != fmt.Sprint(b.Stats()) {
		t.Fatalf("stats differ: %+v vs %+v", a.Stats(), b.Stats())
	}
	if _, err := Restore(cfg, strings.NewReader("junk")); err == nil {
		t.Fatal("restore of junk succeeded")
	}
}

// genCorpus returns a synthetic log corpus (deterministic for a seed).
func genCorpus(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, seed*31+1))
	users := []string{"root", "admin", "bob", "alice", "guest"}
	verbs := []string{"opened", "closed", "reset", "refused"}
	out := make([]string, n)
	for i := range out {
		switch r.IntN(8) {
		case 0:
			out[i] = fmt.Sprintf("Accepted password for %s from 10.%d.%d.%d port %d ssh2", users[r.IntN(5)], r.IntN(256), r.IntN(256), r.IntN(256), 1024+r.IntN(60000))
		case 1:
			out[i] = fmt.Sprintf("PacketResponder %d for block blk_%d terminating", r.IntN(3), r.Int64())
		case 2:
			out[i] = fmt.Sprintf("Connection %s by peer %s:%d", verbs[r.IntN(4)], users[r.IntN(5)], r.IntN(65536))
		case 3:
			out[i] = fmt.Sprintf("session %x took %dms  status=%s", r.Uint32(), r.IntN(1000), verbs[r.IntN(4)])
		case 4:
			out[i] = fmt.Sprintf("[client %d.%d.%d.%d] Directory index forbidden by rule: /var/www/%s/", r.IntN(256), r.IntN(256), r.IntN(256), r.IntN(256), users[r.IntN(5)])
		case 5:
			out[i] = fmt.Sprintf("job_%d_%04d finished in %d.%ds", r.IntN(1e9), r.IntN(1e4), r.IntN(100), r.IntN(10))
		case 6:
			out[i] = fmt.Sprintf("kind%d event %s happened", r.IntN(100), users[r.IntN(5)])
		default:
			out[i] = fmt.Sprintf("Unique message number %s %s", users[r.IntN(5)], verbs[r.IntN(4)])
		}
	}
	return out
}

// TestJunkLines mines random lines made of structural characters (the
// worst case for alignment and template growth): every line round-trips
// and the work per line stays bounded (the test finishes quickly).
func TestJunkLines(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alpha := []byte("ab1 .:=()<*>[]/-_\t\x00\xff")
	m := mustNew(t, Config{MaxTemplatesPerTenant: 500})
	var recs []record
	for i := 0; i < 1500; i++ {
		b := make([]byte, r.IntN(300))
		for j := range b {
			b[j] = alpha[r.IntN(len(alpha))]
		}
		res, _ := m.Mine("t", string(b), nil)
		recs = append(recs, record{"t", string(b), res})
	}
	// Evicted templates cannot be checked; check the live ones.
	live := recs[:0]
	for _, rc := range recs {
		if _, ok := m.TemplateVersion(rc.res.ID, rc.res.Version); ok {
			live = append(live, rc)
		}
	}
	checkRecords(t, m, live)
	if st := m.Stats(); st.Templates > 500 {
		t.Fatalf("cap exceeded: %+v", st)
	}
}

// TestPreparedLimits: Mine and MinePrepared agree at the MaxTokens edge,
// also when dates and id lists shorten the token list.
func TestPreparedLimits(t *testing.T) {
	lines := []string{
		"at Sat Jun 18 02:08:10 2005 ok",
		"delete blk_10 blk_20 blk_30 blk_40",
		"a b c d e",
		"a b c d e f",
	}
	for max := 1; max <= 16; max++ {
		cfg := Config{MaxTokens: max}
		a, b := mustNew(t, cfg), mustNew(t, cfg)
		for _, l := range lines {
			ra, ea := a.Mine("t", l, nil)
			rb, eb := b.MinePrepared("t", Prepare(l), nil)
			if fmt.Sprint(ra, ea) != fmt.Sprint(rb, eb) {
				t.Fatalf("MaxTokens %d, %q: Mine %v %v, MinePrepared %v %v", max, l, ra, ea, rb, eb)
			}
		}
	}
}

// TestWhitespaceAfterWidening: a line whose extra whitespace was absorbed
// by the parameter before it still renders after the word after it widens.
func TestWhitespaceAfterWidening(t *testing.T) {
	m := mustNew(t, Config{VariableAfter: 1})
	var recs []record
	for _, l := range []string{"id 42 foo end", "id 43\t bar end", "id 44\t foo end", "id 45 baz end", "id 46  qux end"} {
		r, _ := m.Mine("t", l, nil)
		recs = append(recs, record{"t", l, r})
	}
	checkRecords(t, m, recs)
}

// TestHugeLinesWithinLimits: with limits raised, 10k-token and 1 MB lines
// are mined normally (no oversized template) and still round-trip.
func TestHugeLinesWithinLimits(t *testing.T) {
	m := mustNew(t, Config{MaxLineBytes: 2 << 20, MaxTokens: HardMaxTokens})
	var recs []record
	for i := 0; i < 3; i++ {
		many := "start " + strings.Repeat(fmt.Sprintf("w%d x ", i), 5000)
		long := "blob " + strings.Repeat(string(rune('a'+i)), 1<<20)
		for _, l := range []string{many, long} {
			r, _ := m.Mine("t", l, nil)
			recs = append(recs, record{"t", l, r})
		}
	}
	checkRecords(t, m, recs)
	if st := m.Stats(); st.Oversized != 0 {
		t.Fatalf("oversized lines: %+v", st)
	}
}

// TestIdenticalTextsMerge: two templates of one tenant that end up with the
// same text (here counter-led lines and lines with a timestamp header, which
// have different shapes and widen apart) become one template, with a merge
// event, and later lines of either shape go to the survivor.
func TestIdenticalTextsMerge(t *testing.T) {
	m, err := New(Config{VariableAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	mine := func(line string) uint64 {
		t.Helper()
		var r Result
		r, events = m.Mine("t", line, events)
		text, ok := m.TemplateVersion(r.ID, r.Version)
		if !ok {
			t.Fatalf("%q: template %d v%d missing", line, r.ID, r.Version)
		}
		if got, err := Render(text, r.Params); err != nil || got != line {
			t.Fatalf("render %q = %q, %v", line, got, err)
		}
		return r.ID
	}
	a := mine("17 job alpha done")
	mine("18 job beta done")
	b := mine("2031-01-02 03:04:05 job gamma done")
	mine("2031-01-02 03:04:06 job delta done")
	if m.Canonical(a) != m.Canonical(b) {
		_, _, ta, _ := m.Template(m.Canonical(a))
		_, _, tb, _ := m.Template(m.Canonical(b))
		t.Fatalf("templates %d %q and %d %q read alike but stay apart", a, ta, b, tb)
	}
	merged := false
	for _, e := range events {
		if e.Kind == EventMerged && e.Previous == e.Template {
			merged = true
		}
	}
	if !merged {
		t.Fatalf("no merge event in %+v", events)
	}
	want := m.Canonical(a)
	for _, l := range []string{"19 job omega done", "2031-01-02 03:04:07 job sigma done"} {
		if id := mine(l); id != want {
			t.Fatalf("%q got template %d, want the survivor %d", l, id, want)
		}
	}
	if n := m.Stats().Templates; n != 2 { // the survivor and the merged (aliased) one
		t.Fatalf("%d live templates, want 2", n)
	}
}

// TestValueShapeChangeDoesNotSplit: a variable written in another shape in
// one line (a name with a number in parentheses where the other lines have
// an address or an IP) stays in the group.
func TestValueShapeChangeDoesNotSplit(t *testing.T) {
	for _, other := range []string{"0x7f3a10c4", "10.1.2.3"} {
		m, err := New(Config{})
		if err != nil {
			t.Fatal(err)
		}
		lines := []string{
			"released buffer " + other + " back to pool main",
			"released buffer 0x7f3a10d8 back to pool main",
			"released buffer 0x7f3a11e0 back to pool main",
			"released buffer NONE(0) back to pool main",
			"released buffer 0x7f3a12f4 back to pool main",
		}
		ids := map[uint64]bool{}
		var rs []Result
		for _, l := range lines {
			r, _ := m.Mine("t", l, nil)
			rs = append(rs, r)
			text, _ := m.TemplateVersion(r.ID, r.Version)
			if got, err := Render(text, r.Params); err != nil || got != l {
				t.Fatalf("render %q = %q, %v", l, got, err)
			}
		}
		for _, r := range rs {
			ids[m.Canonical(r.ID)] = true
		}
		if len(ids) != 1 {
			t.Errorf("%s: %d templates, want 1", other, len(ids))
		}
		// Words on both sides are not one value: another event stays apart.
		r, _ := m.Mine("t", "released buffer limit 7 back to pool main", nil)
		if ids[m.Canonical(r.ID)] {
			t.Errorf("%s: a line with another word joined the group", other)
		}
	}
}

// TestEnumerationConstantsStayApart: words written like enumeration
// constants (capitals and '_') name different events however many occur,
// while ordinary words at one position widen after VariableAfter values.
func TestEnumerationConstantsStayApart(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	states := []string{"NEW", "QUEUED", "RUNNING", "DRAINING", "STOPPED", "FAILED_CLEANUP"}
	ids := map[uint64]bool{}
	for round := 0; round < 2; round++ {
		for i, s := range states {
			l := fmt.Sprintf("unit %d went to %s", 10*round+i+2, s)
			r, _ := m.Mine("t", l, nil)
			text, _ := m.TemplateVersion(r.ID, r.Version)
			if got, err := Render(text, r.Params); err != nil || got != l {
				t.Fatalf("render %q = %q, %v", l, got, err)
			}
			if round == 1 {
				ids[m.Canonical(r.ID)] = true
			}
		}
	}
	if len(ids) != len(states) {
		t.Fatalf("%d templates for %d enumeration constants", len(ids), len(states))
	}
	names := map[uint64]bool{}
	for i, u := range []string{"alice", "bob", "carol", "dave", "erin", "frank"} {
		r, _ := m.Mine("t", fmt.Sprintf("session %d opened by %s", i+2, u), nil)
		if i >= 4 {
			names[m.Canonical(r.ID)] = true
		}
	}
	if len(names) != 1 {
		t.Fatalf("names did not widen into one template: %v", names)
	}
}

// TestListLengthDoesNotSplit: a list of a variable number of names is one
// value; a list of enumeration constants stays literal.
func TestListLengthDoesNotSplit(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		"granted access to alice, bob, carol",
		"granted access to dave, erin, frank, gina",
		"granted access to hal, ivy, jo, kim, lee, max",
		"granted access to 10.0.0.1;10.0.0.2;10.0.0.3",
	}
	rs, _ := mineAll(t, m, "t", lines)
	for _, r := range rs[1:] {
		if m.Canonical(r.ID) != m.Canonical(rs[0].ID) {
			t.Fatalf("lists of other lengths got template %d, want %d", m.Canonical(r.ID), m.Canonical(rs[0].ID))
		}
	}
	toks, _, _ := tokenize(nil, "trapping INT, TERM, HUP now", 100)
	for _, tk := range toks {
		if tk.kind == kVar {
			t.Fatalf("a list of enumeration constants became a parameter: %v", toks)
		}
	}
	toks, _, _ = tokenize(nil, "Service,attach,pid = 3", 100)
	if toks[0].kind != kWord {
		t.Fatalf("comma-joined name became a list: %v", toks)
	}
}

// A Preparer gives exactly what Prepare gives, for short, long and
// oversized lines mixed (long ones overflow the shared array), and takes
// far fewer allocations.
func TestPreparerAgreesWithPrepare(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var lines []string
	for i := range 5000 {
		switch {
		case i%997 == 0:
			lines = append(lines, strings.Repeat("x, ", 30000)) // more than a chunk of tokens
		case i%10 == 0:
			lines = append(lines, fmt.Sprintf("2026-11-29T10:00:%02d.000Z delete blk_%d blk_%d of user u%d", i%60, r.IntN(1000), r.IntN(1000), i))
		default:
			lines = append(lines, fmt.Sprintf("GET /api/v1/users/%d 200 %dms from 10.0.%d.%d", r.IntN(99999), r.IntN(900), r.IntN(256), r.IntN(256)))
		}
	}
	var pr Preparer
	got := make([]Prepared, len(lines))
	for i, l := range lines {
		got[i] = pr.Prepare(l)
	}
	a, b := mustNew(t, Config{}), mustNew(t, Config{})
	for i, l := range lines {
		want := Prepare(l)
		if fmt.Sprint(want) != fmt.Sprint(got[i]) {
			t.Fatalf("line %d: Preparer %v, Prepare %v", i, got[i], want)
		}
		ra, ea := a.MinePrepared("t", want, nil)
		rb, eb := b.MinePrepared("t", got[i], nil)
		if fmt.Sprint(ra, ea) != fmt.Sprint(rb, eb) {
			t.Fatalf("line %d mines differently: %v %v and %v %v", i, ra, ea, rb, eb)
		}
	}
	short := lines[1:10]
	if n := testing.AllocsPerRun(20, func() {
		for _, l := range short {
			pr.Prepare(l)
		}
	}); n > 1 {
		t.Fatalf("%v allocations for %d lines", n, len(short))
	}
}

// A Preparer takes an array back once every batch that cut lines from it
// is done, and never one a batch still in use shares: batch 2's tokens
// stay what Prepare gives while batch 3 reuses batch 1's arrays.
func TestPreparerReusesDoneArrays(t *testing.T) {
	line := func(i int) string {
		return fmt.Sprintf("GET /api/v1/users/%d 200 %dms from 10.0.%d.%d", i, i%900, i%256, i%7)
	}
	var pr Preparer
	arrays := func() map[*token]bool { return map[*token]bool{} }
	// prepare cuts lines for batch n until it has moved past `retire`
	// arrays, and returns what it prepared and the arrays it used.
	next := 0
	prepare := func(n uint64, retire int) ([]Prepared, []string, map[*token]bool) {
		pr.Begin(n)
		used := arrays()
		var got []Prepared
		var lines []string
		for moved := 0; moved < retire; {
			before := unsafe.SliceData(pr.whole)
			l := line(next)
			next++
			got = append(got, pr.Prepare(l))
			lines = append(lines, l)
			if w := unsafe.SliceData(pr.whole); w != before {
				if before != nil {
					moved++
				}
			}
			used[unsafe.SliceData(pr.whole)] = true
		}
		return got, lines, used
	}
	_, _, used1 := prepare(1, 3)
	got2, lines2, used2 := prepare(2, 2)
	carry := unsafe.SliceData(pr.whole) // batch 3 goes on cutting it
	pr.Done(1)
	_, _, used3 := prepare(3, 3)
	reused := 0
	for a := range used3 {
		if used1[a] && !used2[a] {
			reused++
		}
		if used2[a] && a != carry {
			t.Errorf("batch 3 took an array batch 2 still uses")
		}
	}
	if reused == 0 {
		t.Errorf("batch 3 reused none of batch 1's %d arrays after Done(1)", len(used1))
	}
	for i, l := range lines2 {
		if want := Prepare(l); fmt.Sprint(want) != fmt.Sprint(got2[i]) {
			t.Fatalf("batch 2 line %d changed under batch 3: %v, want %v", i, got2[i], want)
		}
	}
}
