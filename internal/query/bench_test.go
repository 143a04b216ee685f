package query

import (
	"fmt"
	"testing"
)

// BenchmarkMatch measures one record's decision (ns per line) for a
// selective term, naively on the rendered line and through the plan:
// settled templates cost a lookup, scanned ones render from the pieces.
func BenchmarkMatch(b *testing.B) {
	tpls := []Template{
		{ID: 1, Text: "Accepted password for <*> from <*> port <*> ssh2"},
		{ID: 2, Text: "Connection closed by <*> [preauth]"},
		{ID: 3, Text: "pam_unix(sshd:session): session opened for user <*> by (uid=0)"},
		{ID: 4, Text: "error: Received disconnect from <*>: 11: Bye Bye [preauth]"},
	}
	params := [][]string{
		{"root", "10.0.0.1", "51234"},
		{"192.168.1.20"},
		{"alice"},
		{"172.16.0.9"},
	}
	recs := make([]Record, len(tpls))
	for i, t := range tpls {
		recs[i] = Record{TemplateID: t.ID, Template: t.Text, Params: params[i]}
		recs[i].Line = newTplInfo(t).render(nil, params[i])
	}
	for _, src := range []string{`error`, `"from 10.0"`, `/port \d+5/`, `user=alice`, `Accepted -root`} {
		q := MustCompile(src)
		p := q.PlanTemplates("", tpls)
		b.Run(fmt.Sprintf("naive/%s", src), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				q.Match(&recs[i%len(recs)])
			}
		})
		b.Run(fmt.Sprintf("plan/%s", src), func(b *testing.B) {
			b.ReportAllocs()
			plain := make([]Record, len(recs))
			for i, r := range recs {
				plain[i] = Record{TemplateID: r.TemplateID, Params: r.Params}
			}
			tps := make([]*TemplatePlan, len(plain))
			for i, r := range plain {
				tps[i] = p.Template(r.TemplateID, 0)
			}
			for i := 0; b.Loop(); i++ {
				j := i % len(plain)
				tps[j].Match(&plain[j])
			}
		})
	}
}

// BenchmarkCompile: parsing and compiling a typical query.
func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(`tenant:acme (error OR /fail(ed|ure)/) -"Bye Bye" status>=500 ts:>now-1h | count by 5m`); err != nil {
			b.Fatal(err)
		}
	}
}
