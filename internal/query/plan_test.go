package query

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/byteset"
)

var planTemplates = []Template{
	{ID: 1, Text: "connection from <*> closed"},
	{ID: 2, Text: "status=<*> took <*>ms"},
	{ID: 3, Text: "disk full"},
	{ID: 4, Text: "<*>"},
	{ID: 5, Text: "user <*>: login failed"},
	{ID: 6, Text: "id=<*>"},
	{ID: 7, Text: "<*>:<*>"},
	{ID: 8, Version: 2, Text: "status: <*> status=<*>", Canonical: 2},
}

func digits() *byteset.Set {
	var c byteset.Set
	c.AddString("0123456789")
	return &c
}

// TestPlanDecisions pins the per-template decisions on crafted templates:
// terms inside a piece, spanning a piece and a parameter, next to
// punctuation, with and without knowledge of the parameters' bytes.
func TestPlanDecisions(t *testing.T) {
	withDigits := append([]Template(nil), planTemplates...)
	for i := range withDigits {
		withDigits[i].ParamBytes = digits()
	}
	for _, tc := range []struct {
		q      string
		tenant string
		digits bool   // parameters hold only digits
		want   string // decisions for ids 1..8 (a: all, n: none, s: scan)
	}{
		{q: `closed`, want: "asnsssss"},
		{q: `-closed`, want: "nsasssss"},
		{q: `"from 10"`, want: "ssnsssss"},            // spans the literal "from " and the parameter
		{q: `"id=4"`, want: "ssnsssss"},               // spans "id=" and the parameter
		{q: `"id=4"`, digits: true, want: "nnnnnsnn"}, // digits-only parameters can still spell it on 6 only
		{q: `"id=x"`, digits: true, want: "nnnnnnnn"},
		{q: `"ms took"`, digits: true, want: "nnnnnnnn"},
		{q: `"ms took"`, want: "ssnsssss"},
		{q: `":"`, want: "ssnsasaa"}, // literal in 5, 7 ("<*>:<*>") and 8
		{q: `"a:b"`, want: "ssnsssss"},
		{q: `":"`, digits: true, want: "nnnnanaa"},
		{q: `connection*closed`, want: "asnsssss"}, // segments in different pieces
		{q: `closed*connection`, want: "ssnsssss"},
		{q: `/fro+m/`, want: "asnsssss"},
		{q: `/^connection/`, want: "ssnsssss"},  // an assertion: scan
		{q: `/disk\s+full/`, want: "ssasssss"},  // no parameters: exact
		{q: `/disk\s+full$/`, want: "ssasssss"}, // no parameters: exact even with $
		{q: `template:2`, want: "nannnnna"},     // 8 was merged into 2
		{q: `status=404`, want: "nsnnnnns"},     // only 2 and 8 name a parameter status
		{q: `param[1]>5`, want: "nsnnnnss"},     // 1, 3, 4, 5, 6 have fewer parameters
		{q: `param[0]=x OR closed`, want: "asnsssss"},
		{q: `disk OR NOT disk`, want: "ssasssss"}, // no tautology detection: scans where "disk" is unsettled
		{q: `tenant:acme`, tenant: "acme", want: "aaaaaaaa"},
		{q: `tenant:acme`, tenant: "other", want: "nnnnnnnn"},
		{q: `tenant:acme`, want: "ssssssss"},
		{q: `closed ts:>2026-11-01`, want: "ssnsssss"}, // 1 scans ts only (TestPlanColumns)
	} {
		tpls := planTemplates
		if tc.digits {
			tpls = withDigits
		}
		p := MustCompile(tc.q).PlanTemplates(tc.tenant, tpls)
		var got strings.Builder
		for _, tp := range p.Templates() {
			got.WriteByte(tp.Decision.String()[0])
		}
		if got.String() != tc.want {
			t.Errorf("%q (%d templates): decisions %s, want %s", tc.q, len(tpls), got.String(), tc.want)
			for _, tp := range p.Templates() {
				t.Logf("  %d %q: %s %s", tp.Template.ID, tp.Template.Text, tp.Decision, tp.Residual())
			}
		}
	}
}

// Property: for random templates, parameters and queries, the
// template-aware plan and its residual decide every record exactly as the
// naive evaluation over the rendered line does.
func TestPlanEquivalence(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	settled := 0
	for i := 0; i < n; i++ {
		src := randQuery(r, 3)
		q, err := CompileAt(src, testNow)
		if err != nil {
			t.Fatalf("generated query %q: %v", src, err)
		}
		tpl, paramAlpha := randTemplate(r)
		p := q.PlanTemplates("", []Template{tpl})
		tp := p.Template(tpl.ID, tpl.Version)
		if tp.Decision != Scan {
			settled++
		}
		for j := 0; j < 6; j++ {
			params := make([]string, strings.Count(tpl.Text, Wildcard))
			for k := range params {
				params[k] = randStr(r, paramAlpha, 3)
			}
			if ok, msg := agree(q, p, tpl, params); !ok {
				t.Fatalf("%s\ndecision %s, residual %s", msg, tp.Decision, tp.Residual())
			}
		}
	}
	t.Logf("%d of %d templates settled without a scan", settled, n)
	if settled < n/10 {
		t.Fatalf("only %d of %d plans settled: the generator no longer exercises settling", settled, n)
	}
}

// agree compares the plan's verdict with Query.Match on the rendered line.
func agree(q *Query, p *Plan, tpl Template, params []string) (bool, string) {
	line := newTplInfo(tpl).render(nil, params)
	base := Record{Tenant: "acme", Source: "app", TemplateID: tpl.ID, TemplateVersion: tpl.Version, Params: params, TS: testNow}
	naive := base
	naive.Template, naive.Line = tpl.Text, line
	want := q.Match(&naive)
	got := p.Match(&base)
	if got != want {
		return false, fmt.Sprintf("query %q template %q params %q line %q: plan %v, naive %v", q.Source(), tpl.Text, params, line, got, want)
	}
	return true, ""
}

const alpha = "ab=: 1"

func randStr(r *rand.Rand, alphabet string, maxLen int) string {
	b := make([]byte, r.IntN(maxLen+1))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// randTemplate returns a template and the bytes its parameters are drawn
// from; half the time the template declares them in ParamBytes.
func randTemplate(r *rand.Rand) (Template, string) {
	pieces := make([]string, 1+r.IntN(4))
	for i := range pieces {
		if r.IntN(5) == 0 {
			pieces[i] = randStr(r, alpha, 2) + "st="
		} else {
			pieces[i] = randStr(r, alpha, 4)
		}
	}
	tpl := Template{ID: uint64(1 + r.IntN(2)), Text: strings.Join(pieces, Wildcard)}
	paramAlpha := alpha
	if r.IntN(2) == 0 {
		paramAlpha = []string{"1", "a", "1a", " =", "b:"}[r.IntN(5)]
		tpl.ParamBytes = new(byteset.Set)
		tpl.ParamBytes.AddString(paramAlpha)
	}
	return tpl, paramAlpha
}

func randQuery(r *rand.Rand, depth int) string {
	if depth == 0 || r.IntN(3) == 0 {
		return randLeaf(r)
	}
	a, b := randQuery(r, depth-1), randQuery(r, depth-1)
	switch r.IntN(5) {
	case 0, 1:
		return a + " " + b
	case 2:
		return "(" + a + " OR " + b + ")"
	case 3:
		return "-(" + a + ")"
	}
	return "NOT (" + a + ") " + b
}

func randLeaf(r *rand.Rand) string {
	switch r.IntN(7) {
	case 0, 1:
		s := randStr(r, alpha, 3)
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
	case 2:
		return randStr(r, "ab1", 2) + "*" + randStr(r, "ab1=:", 2)
	case 3:
		return []string{`/a+b/`, `/^a/`, `/b$/`, `/\bab/`, `/[=:]1/`, `/a.?b/`, `/(?i)A/`, `/a|=/`}[r.IntN(8)]
	case 4:
		return []string{`param[0]=a`, `param[1]!=1`, `st=1`, `st>0`, `param[0]=a*`, `st=~/a/`, `param[0]<1`, `st!=a`}[r.IntN(8)]
	case 5:
		return []string{`template:1`, `template:2`, `ts:>2026-11-01`, `ts:<2026-11-01`}[r.IntN(4)]
	}
	w := randStr(r, "ab1", 3)
	if w == "" {
		w = "b"
	}
	return w
}

// TestPlanColumns: what the reader must read per query shape.
func TestPlanColumns(t *testing.T) {
	tpls := []Template{{ID: 1, Text: "connection from <*> closed"}, {ID: 3, Text: "disk full"}}
	for _, tc := range []struct {
		q    string
		want Column
	}{
		{`template:1 | count by template`, ColTemplate},
		{`connection | count by 5m`, ColTS},      // settled true: only ts
		{`connection | count`, 0},                // nothing but the template's row count
		{`closed ts:>2026-11-01 | count`, ColTS}, // the residual reads ts, not params
		{`"from 1" | count by template`, ColTemplate | ColParams},
		{`status=4 | count`, 0}, // no template names status: nothing matches
		{`| count by source`, ColSource},
		{`| top param[0]`, ColParams | ColTemplate},
		{`connection`, ColLine}, // lines are printed
	} {
		p := MustCompile(tc.q).PlanTemplates("", tpls)
		if p.Columns != tc.want {
			t.Errorf("%q: columns %s, want %s", tc.q, p.Columns, tc.want)
		}
	}
	p := MustCompile(`closed ts:>2026-11-01`).PlanTemplates("", tpls)
	if tp := p.Template(1, 0); tp.Decision != Scan || tp.Columns != ColTS {
		t.Errorf("residual of a settled term and a time range: %s %s", tp.Decision, tp.Columns)
	}
	if ids := p.IDs(); len(ids) != 1 || ids[0] != 1 {
		t.Errorf("IDs %v, want [1]", ids)
	}
	old := Record{TemplateID: 1, TS: time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)}
	if p.Match(&old) {
		t.Error("a record before the range matched")
	}
	// an unknown template falls back to the naive evaluation
	un := Record{TemplateID: 99, Template: "pipe <*>", Params: []string{"closed"}, TS: testNow}
	if !p.Match(&un) {
		t.Error("unknown template: the fallback did not match")
	}
}

// TestWithParamBytesEqualsPlanTemplates: re-planning a plan with ParamBytes
// (a records file's summary) gives exactly the plan PlanTemplates gives over
// the templates with those ParamBytes: the same decision, residual and
// columns per template, the same Columns. A re-plan that kept a Scan, or
// settled an All or None again differently, fails here.
func TestWithParamBytesEqualsPlanTemplates(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n := 5000
	if testing.Short() {
		n = 500
	}
	changed := 0
	for i := 0; i < n; i++ {
		src := randQuery(r, 3)
		if r.IntN(4) == 0 {
			src += " | count by template"
		}
		q, err := CompileAt(src, testNow)
		if err != nil {
			t.Fatalf("generated query %q: %v", src, err)
		}
		var tpls, with []Template
		bytes := map[tplKey]*byteset.Set{}
		pairs := map[tplKey]PairSet{}
		for id := range uint64(4) {
			tpl, _ := randTemplate(r)
			tpl.ID, tpl.Version, tpl.ParamBytes = id+1, uint32(r.IntN(2)), nil
			tpls = append(tpls, tpl)
			if r.IntN(3) > 0 {
				cs := new(byteset.Set)
				v := []string{"1", "a", "1a", " =", "b:", "", "a1", "ab1"}[r.IntN(8)]
				cs.AddString(v)
				bytes[tplKey{tpl.ID, tpl.Version}] = cs
				tpl.ParamBytes = cs
				if r.IntN(2) == 0 {
					pairs[tplKey{tpl.ID, tpl.Version}] = pairsOf(v)
					tpl.ParamPairs = pairsOf(v)
				}
			}
			with = append(with, tpl)
		}
		want := q.PlanTemplates("acme", with)
		got := q.PlanTemplates("acme", tpls).WithParamBytes("acme", func(id uint64, v uint32) (*byteset.Set, PairSet) {
			return bytes[tplKey{id, v}], pairs[tplKey{id, v}]
		})
		if got.Columns != want.Columns {
			t.Fatalf("query %q: columns %v, want %v", src, got.Columns, want.Columns)
		}
		for j, wt := range want.Templates() {
			gt := got.Templates()[j]
			if gt.Decision != wt.Decision || gt.Residual() != wt.Residual() || gt.Columns != wt.Columns {
				t.Fatalf("query %q template %q %v: got %s %q %v, want %s %q %v", src, wt.Template.Text, wt.Template.ParamBytes,
					gt.Decision, gt.Residual(), gt.Columns, wt.Decision, wt.Residual(), wt.Columns)
			}
			if gt.Decision != q.PlanTemplates("acme", tpls).Templates()[j].Decision {
				changed++
			}
		}
	}
	t.Logf("%d template decisions changed by ParamBytes", changed)
	if changed < n/20 {
		t.Fatalf("only %d decisions changed: the test no longer exercises re-planning", changed)
	}
}
