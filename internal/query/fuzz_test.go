package query

import (
	"errors"
	"strings"
	"testing"

	"github.com/quarrylake/quarry/internal/byteset"
)

// FuzzQuery: any input either compiles or yields a *ParseError pointing
// inside the query; a compiled query's plan agrees with the naive
// evaluation on the fuzzed template and parameters, with and without the
// parameters' bytes declared.
func FuzzQuery(f *testing.F) {
	for _, s := range [][3]string{
		{`error`, "connection <*> error", "x"},
		{`"id=4" OR -closed`, "id=<*> closed", "42"},
		{`status=404 | count by template`, "status: <*> took <*>", "404,12"},
		{`/^a.b/ param[1]>5`, "<*>:<*>", "a,6"},
		{`err*time (x OR "y z")`, "<*> z <*>", "err,time"},
		{`ts:[2026-11-01, 2026-11-02) source:~"a" attrs.k:v | top 3 param[0] | limit 2`, "<*>", ""},
		{`(a`, "", ""},
		{`tenant:acme template:1 -param[0]=~/x/`, "<*>", "x"},
		{`level=info -msg="a b" | count by level`, `level=info msg="a b" x=<*> {"k":"v"}`, "1"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, src, text, params string) {
		q, err := CompileAt(src, testNow)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: error %T %v", src, err, err)
			}
			if pe.Column < 1 || pe.Column > len(src)+1 {
				t.Fatalf("%q: column %d out of range", src, pe.Column)
			}
			_ = pe.Caret()
			return
		}
		_ = q.String()
		n := strings.Count(text, Wildcard)
		if n > 16 || len(text) > 256 {
			return
		}
		vals := strings.Split(params, ",")
		ps := make([]string, n)
		var cs byteset.Set
		for i := range ps {
			ps[i] = vals[i%len(vals)]
			cs.AddString(ps[i])
		}
		for _, chars := range []*byteset.Set{nil, &cs} {
			tpl := Template{ID: 1, Text: text, ParamBytes: chars}
			p := q.PlanTemplates("acme", []Template{tpl})
			if ok, msg := agree(q, p, tpl, ps); !ok {
				tp := p.Template(1, 0)
				t.Fatalf("%s\nparam bytes declared %v, decision %s, residual %s", msg, chars != nil, tp.Decision, tp.Residual())
			}
		}
		if a := q.NewAggregator(); a != nil {
			a.Add(&Record{TemplateID: 1, Template: text, Params: ps, TS: testNow})
			if len(a.Rows()) > 1 {
				t.Fatal("one record, several rows")
			}
		}
	})
}
