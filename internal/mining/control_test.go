package mining

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestConfigValidateControl(t *testing.T) {
	yes := true
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{"ok", Config{Masks: []Mask{{Name: "ip", Regex: `\d+\.\d+\.\d+\.\d+`}},
			Tenants: map[string]TenantConfig{"a": {Similarity: 0.7, MatchOnly: &yes, Masks: []Mask{{Name: "user", Regex: `u[0-9]+`}}}}}, nil},
		{"bad regex", Config{Masks: []Mask{{Name: "x", Regex: `(`}}}, []string{"masks[0].regex"}},
		{"empty match", Config{Masks: []Mask{{Name: "x", Regex: `a*`}}}, []string{"matches the empty string"}},
		{"bad name", Config{Masks: []Mask{{Name: "1x", Regex: `a`}}}, []string{"masks[0].name"}},
		{"dup name", Config{Masks: []Mask{{Name: "x", Regex: `a`}, {Name: "x", Regex: `b`}}}, []string{"used twice"}},
		{"tenant", Config{Tenants: map[string]TenantConfig{"t": {Similarity: 2, Masks: []Mask{{Name: "y", Regex: `[`}}}}},
			[]string{"tenants.t.similarity", "tenants.t.masks[0].regex"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("New accepted an invalid config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func mineAll(t *testing.T, m *Model, tenant string, lines []string) ([]Result, []Event) {
	t.Helper()
	var rs []Result
	var events []Event
	for _, l := range lines {
		var r Result
		r, events = m.Mine(tenant, l, events)
		text, ok := m.TemplateVersion(r.ID, r.Version)
		if !ok {
			t.Fatalf("%q: template %d v%d missing", l, r.ID, r.Version)
		}
		if got, err := Render(text, r.Params); err != nil || got != l {
			t.Fatalf("render %q = %q, %v", l, got, err)
		}
		rs = append(rs, r)
	}
	return rs, events
}

func TestMasks(t *testing.T) {
	cfg := Config{Masks: []Mask{{Name: "ticket", Regex: `TKT-[A-Z]+`}, {Name: "mail", Regex: `[a-z]+@[a-z]+\.[a-z]+`}}}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		"opened TKT-ABC for ann@example.org today",
		"opened TKT-XYZ for bob@example.net today",
	}
	rs, events := mineAll(t, m, "t", lines)
	if rs[0].ID != rs[1].ID {
		t.Fatalf("masked lines got templates %d and %d", rs[0].ID, rs[1].ID)
	}
	_, _, text, _ := m.Template(rs[0].ID)
	if text != "opened <*> for <*> today" {
		t.Fatalf("text %q", text)
	}
	// The masked values are parameters from the first line: no widening.
	if len(events) != 1 || events[0].Kind != EventCreated {
		t.Fatalf("events %+v, want one creation", events)
	}
	if want := []string{"ticket", "mail"}; !slices.Equal(events[0].Kinds, want) || !slices.Equal(m.Kinds(rs[0].ID), want) {
		t.Fatalf("kinds %q / %q, want %q", events[0].Kinds, m.Kinds(rs[0].ID), want)
	}
	// Prepared lines give the same as Mine.
	m2, _ := New(cfg)
	for _, l := range lines {
		a, _ := m2.MinePrepared("t", Prepare(l), nil)
		if a.ID != rs[0].ID || !slices.Equal(a.Params, []string{l[7:14], l[19 : len(l)-6]}) {
			t.Fatalf("MinePrepared(%q) = %+v", l, a)
		}
	}
	// A snapshot keeps the kinds.
	var buf bytes.Buffer
	if err := m.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	m3, err := Restore(cfg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m3.Kinds(rs[0].ID), []string{"ticket", "mail"}) {
		t.Fatalf("restored kinds %q", m3.Kinds(rs[0].ID))
	}
}

// A line no mask matches leaves its tokens as they are; the next line's
// masked tokens must not be cut into that array while it is read (they
// were: "p a1 a21 b b \xe22?\x0e" after "a1 a21 b b \xe22?\x0e" got
// a template of eleven adjacent wildcards and parameters that rendered
// "p a1 a2111111111", FuzzMineMasks). Every line renders back exactly,
// and mining after a line without a match gives what a fresh model gives.
func TestMasksAfterUnmaskedLine(t *testing.T) {
	cfg := Config{Masks: []Mask{{Name: "lw", Regex: `[a-z][0-9]`}}}
	for _, tt := range []struct{ first, next string }{
		{"a1 a21 b b \xe22?\x0e", "p a1 a21 b b \xe22?\x0e"},
		{"no match here", "q b7b7b7b7 c8c8c8 done"},
		{"2026-01-02 03:04:05 x", "k a1a2a3a4a5a6 z"},
	} {
		m := mustNew(t, cfg)
		var recs []record
		for _, l := range []string{tt.first, tt.next} {
			r, _ := m.Mine("t", l, nil)
			recs = append(recs, record{"t", l, r})
		}
		checkRecords(t, m, recs)
		fresh := mustNew(t, cfg)
		want, _ := fresh.Mine("t", tt.next, nil)
		wantText, _ := fresh.TemplateVersion(want.ID, want.Version)
		gotText, _ := m.TemplateVersion(recs[1].res.ID, recs[1].res.Version)
		if gotText != wantText || fmt.Sprint(recs[1].res.Params) != fmt.Sprint(want.Params) {
			t.Errorf("%q after %q: %q %q, a fresh model %q %q", tt.next, tt.first, gotText, recs[1].res.Params, wantText, want.Params)
		}
	}
}

func TestPerTenantConfig(t *testing.T) {
	cfg := Config{Tenants: map[string]TenantConfig{
		"masked": {Masks: []Mask{{Name: "code", Regex: `E[A-Z]{3}`}}},
		"eager":  {VariableAfter: 1},
	}}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := mineAll(t, m, "masked", []string{"failed with EABC", "failed with EXYZ"})
	b, _ := mineAll(t, m, "plain", []string{"failed with EABC", "failed with EXYZ"})
	if a[0].ID != a[1].ID {
		t.Error("tenant with a mask: codes split the event")
	}
	if b[0].ID == b[1].ID {
		t.Error("tenant without the mask: the other tenant's mask applied")
	}
	e, _ := mineAll(t, m, "eager", []string{"state is up", "state is down"})
	if e[0].ID != e[1].ID {
		t.Error("variable_after 1 for the tenant did not widen at once")
	}
}

func TestMatchOnly(t *testing.T) {
	learn, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := mineAll(t, learn, "t", []string{"disk 3 is full", "disk 4 is full", "fan stopped"})
	var buf bytes.Buffer
	if err := learn.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	m, err := Restore(Config{MatchOnly: true}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	before := m.Stats()
	got, events := mineAll(t, m, "t", []string{"disk 9 is full", "fan stopped", "fan started", "disk 9 is empty"})
	if got[0].ID != rs[0].ID || got[1].ID != rs[2].ID {
		t.Fatalf("known lines went to %d, %d; want %d, %d", got[0].ID, got[1].ID, rs[0].ID, rs[2].ID)
	}
	// Unknown lines go whole to the catch-all; nothing is created or widened.
	catch := got[2].ID
	if got[3].ID != catch || len(got[2].Params) != 1 || got[2].Params[0] != "fan started" {
		t.Fatalf("unknown lines: %+v %+v", got[2], got[3])
	}
	if _, _, text, _ := m.Template(catch); text != Wildcard {
		t.Fatalf("catch-all text %q", text)
	}
	for _, e := range events {
		if e.Kind != EventCreated || e.ID != catch {
			t.Fatalf("match-only emitted %+v", e)
		}
	}
	after := m.Stats()
	if after.Changes != before.Changes || after.Created != before.Created+1 || after.Unmatched != 2 {
		t.Fatalf("stats before %+v after %+v", before, after)
	}
}

// FuzzMineMasks: with masks that cut tokens anywhere (inside words, across
// whitespace and punctuation), every line still renders back exactly, and
// MinePrepared agrees with Mine.
func FuzzMineMasks(f *testing.F) {
	for _, s := range []string{
		"", "a1 b2", "x=1 y=<*>", "2031-01-02 03:04:05 INFO a.B: k=v z9", "((a1))[] {}",
		"list a, b, c, d", "NAME(0) at 0x7f3a", "\x00\xff q7", "Jun 18 02:08:10 h p[1]: t3 x",
		"a1 a21 b b \xe22?\x0e", // no mask matches it, then "p " + it: TestMasksAfterUnmaskedLine
	} {
		f.Add(s)
	}
	cfg := Config{MaxLineBytes: 4096, MaxTokens: 256, Masks: []Mask{
		{Name: "lw", Regex: `[a-z][0-9]`}, {Name: "sp", Regex: `\s[0-9]+`}, {Name: "eq", Regex: `=.`},
		{Name: "br", Regex: `\][ ]?`}, {Name: "star", Regex: `\*>`},
	}}
	f.Fuzz(func(t *testing.T, line string) {
		m := mustNew(t, cfg)
		var recs []record
		for _, l := range []string{line, line + " a1", "p " + line, line} {
			r, _ := m.Mine("t", l, nil)
			recs = append(recs, record{"t", l, r})
		}
		checkRecords(t, m, recs)
		m2 := mustNew(t, cfg)
		for _, rc := range recs {
			r, _ := m2.MinePrepared("t", Prepare(rc.line), nil)
			if fmt.Sprint(r) != fmt.Sprint(rc.res) {
				t.Fatalf("MinePrepared %v, Mine %v", r, rc.res)
			}
		}
	})
}
