package query

import (
	"reflect"
	"testing"
	"time"
)

func rec(tpl string, params ...string) *Record {
	return &Record{
		Tenant: "acme", Source: "web/app.log", TS: time.Date(2026, 11, 1, 10, 3, 0, 0, time.UTC),
		TemplateID: 2, Template: tpl, Params: params, Attrs: map[string]string{"host": "web1"},
	}
}

// TestMatch evaluates every filter kind on records.
func TestMatch(t *testing.T) {
	r := rec("GET <*> status=<*> took <*>ms", "/api/v1/users", "404", "12.5")
	// line: GET /api/v1/users status=404 took 12.5ms
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{`GET`, true},
		{`get`, false}, // case-sensitive
		{`/(?i)get/`, true},
		{`"users status"`, true}, // spans a parameter and the literal text
		{`users status`, true},
		{`GET -users`, false},
		{`GET NOT (users OR nope)`, false},
		{`nope OR took`, true},
		{`api*took`, true},
		{`took*api`, false},
		{`/status=4\d\d/`, true},
		{`/^GET \/api/`, true},
		{`template:2`, true},
		{`template:3`, false},
		{`tenant:acme`, true},
		{`tenant:ac*`, true},
		{`tenant:~/^a/`, true},
		{`tenant:"acme "`, false},
		{`source:web/app.log`, true},
		{`source:web/*`, true},
		{`source:*.log`, true},
		{`source:*.txt`, false},
		{`attrs.host:web1`, true},
		{`attrs.host:web*`, true},
		{`attrs.zone:*`, false}, // absent attribute
		{`-attrs.zone:*`, true},
		{`ts:2026-11-01`, true},
		{`ts:2026-11-01T10:03`, true},
		{`ts:2026-11-01T10:04`, false},
		{`ts:>=2026-11-01T10:03:00Z`, true},
		{`ts:>2026-11-01T10:03:00Z`, false},
		{`ts:[2026-11-01T10:00:00Z, 2026-11-01T10:03:00Z)`, false},
		{`ts:[2026-11-01T10:00:00Z, 2026-11-01T10:03:00Z]`, true},
		{`ts:>=2026-11-01T11:03:00+01:00`, true},
		{`param[1]=404`, true},
		{`param[1]=404.0`, true}, // numeric
		{`param[1]="404.0"`, false},
		{`param[1]>400 param[1]<500`, true},
		{`param[2]>=12.5`, true},
		{`param[2]>12.5`, false},
		{`param[0]>1`, false}, // not a number
		{`param[0]=/api*`, true},
		{`param[0]=/api`, false}, // = is the whole value
		{`param[0]=~/api/`, true},
		{`param[0]!=~/api/`, false},
		{`param[3]=x`, false},
		{`-param[3]=x`, true},
		{`param[3]!=x`, false}, // an absent parameter matches no filter
		{`status=404`, true},
		{`status=4*`, true},
		{`status!=404`, false},
		{`status>=400`, true},
		{`took=12.5`, false}, // "took <*>" names nothing: no = or :
		{`GET=x`, false},
		{`nosuch=1`, false},
		{`*`, true},
		{``, true},
		{`""`, true},
	} {
		checkMatch(t, tc.q, r, tc.want)
	}
}

// checkMatch asserts that the query src matches r as want says, by the
// naive evaluation and by the plan over r's template.
func checkMatch(t *testing.T, src string, r *Record, want bool) {
	t.Helper()
	q, err := CompileAt(src, testNow)
	if err != nil {
		t.Errorf("%q: %v", src, err)
		return
	}
	if got := q.Match(r); got != want {
		t.Errorf("%q on %q: Match = %v, want %v", src, r.Template, got, want)
	}
	p := q.PlanTemplates("acme", []Template{{ID: 2, Text: r.Template}})
	plain := *r
	plain.Template = ""
	if got := p.Match(&plain); got != want {
		t.Errorf("%q on %q: Plan.Match = %v, want %v", src, r.Template, got, want)
	}
}

// TestMatchJSONKeys: a JSON line's keys name its parameters, as docs/query.md
// promises of `status: <*>` (before, a quoted key named nothing, so a filter
// by name never matched a JSON line).
func TestMatchJSONKeys(t *testing.T) {
	r := rec(`{"ts":"<*>","level":"<*>","msg":"order created","total":<*>,"user": "<*>"}`,
		"2026-11-01T10:03:00Z", "error", "912.5", "bob46")
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{`total>900`, true},
		{`total<900`, false},
		{`level=error`, true},
		{`level=info`, false},
		{`user=bob*`, true},
		{`ts:2026-11-01 level!=warn`, true},
		{`msg="order created"`, true}, // a value in the template's text
		{`msg=order*`, true},
		{`msg=other`, false},
	} {
		checkMatch(t, tc.q, r, tc.want)
	}
}

// TestMatchLiteralValues: a name finds its value where the miner kept it
// in the template's text (`level=info` whole, where another template has
// `level=<*>`): a user's level=info should not depend on which the miner
// chose.
func TestMatchLiteralValues(t *testing.T) {
	lit := rec(`time="<*>" level=info msg="loading plugin \"<*>\"..." type=<*> id=7`, "2026-12-07T23:10:53Z", "io.containerd.v1", "io.containerd.snapshotter.v1")
	param := rec(`time="<*>" level=<*> msg="<*>"`, "2026-12-07T23:10:53Z", "warning", "disk full")
	for _, tc := range []struct {
		q          string
		lit, param bool
	}{
		{`level=info`, true, false},
		{`level=warning`, false, true},
		{`level!=info`, false, true},
		{`level=~/^i/`, true, false},
		{`-level=info`, false, true},
		{`level=info OR level=warning`, true, true},
		{`id>5`, true, false}, // a number in the text compares as one
		{`id=7.0`, true, false},
		{`type=io.*`, true, false},
		{`msg="disk full"`, false, true},
		{`msg=loading*`, false, false}, // the value goes on into a parameter: not in the text
		{`time=2026*`, true, true},
	} {
		checkMatch(t, tc.q, lit, tc.lit)
		checkMatch(t, tc.q, param, tc.param)
	}
	// The plan settles a literal value without reading a parameter.
	q, _ := CompileAt(`level=info`, testNow)
	if d := q.PlanTemplates("acme", []Template{{ID: 2, Text: lit.Template}}).Templates()[0].Decision; d != All {
		t.Errorf("level=info on its template's text: decision %v, want All", d)
	}
	// count by a name counts a literal value under it.
	q, _ = CompileAt(`| count by level`, testNow)
	a := q.NewAggregator()
	a.Add(lit)
	a.Add(lit)
	a.Add(param)
	if got := a.Rows(); len(got) != 2 || got[0].Keys[0] != "info" || got[0].Count != 2 || got[1].Keys[0] != "warning" {
		t.Errorf("count by level: %+v", got)
	}
}

// TestLiteralValues: the pairs a piece of template text writes whole.
func TestLiteralValues(t *testing.T) {
	for _, tc := range []struct {
		piece       string
		first, last bool
		want        []string // name=value
	}{
		{`level=info msg=`, true, false, []string{"level=info"}},
		{` level=info`, false, true, []string{"level=info"}},
		{` level=info`, false, false, nil},                        // a parameter may go on after info
		{`level=info`, false, true, nil},                          // ... or before level
		{`"level":"info" x`, false, true, []string{"level=info"}}, // a quote starts the key
		{`\"k\":\"v\"`, false, true, []string{"k=v"}},
		{`level=info`, true, true, []string{"level=info"}},
		{`","level":"info","msg":"order created","order_id":"`, false, false, []string{"level=info", "msg=order created"}},
		{`{\"code\":\"E1\", `, true, false, []string{"code=E1"}},
		{`msg="a \"b\" c" x`, true, false, []string{`msg=a \"b\" c`}},
		{`status: 404, user = root;`, true, false, []string{"status=404", "user=root"}},
		{`logname= uid=`, true, false, nil},
		{`a==b c:=d e::f x!=y p<=q`, true, true, nil},
		{`12:30:00 http://x`, true, true, nil},
		{`user="`, true, false, nil},
		{`k='v' n=""`, true, true, []string{"k=v", "n="}},
	} {
		var got []string
		literalValues(tc.piece, tc.first, tc.last, func(n, v string) { got = append(got, n+"="+v) })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("literalValues(%q, %v, %v) = %q, want %q", tc.piece, tc.first, tc.last, got, tc.want)
		}
	}
}

// TestMatchLine: a record that carries its line is searched as is.
func TestMatchLine(t *testing.T) {
	r := &Record{Line: []byte("kernel: oops"), Template: "kernel: <*>", Params: []string{"oops"}}
	if !MustCompile(`"kernel: oops"`).Match(r) || MustCompile(`panic`).Match(r) {
		t.Fatal("line match")
	}
	// without a template or line, the parameters are the text
	if !MustCompile(`oops`).Match(&Record{Params: []string{"oops"}}) {
		t.Fatal("params only")
	}
}

func TestRenderDamaged(t *testing.T) {
	ti := newTplInfo(Template{Text: "a <*> b <*> c"})
	for _, tc := range []struct {
		params []string
		want   string
	}{
		{[]string{"1", "2"}, "a 1 b 2 c"},
		{[]string{"1"}, "a 1 b  c"},
		{[]string{"1", "2", "3"}, "a 1 b 2 c 3"},
		{nil, "a  b  c"},
	} {
		if got := string(ti.render(nil, tc.params)); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.params, got, tc.want)
		}
	}
}

// TestAggregate: keys, ordering, top, limit, whole-template counts and Merge.
func TestAggregate(t *testing.T) {
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	recs := []*Record{
		{TemplateID: 10, TS: base.Add(1 * time.Minute), Source: "a", Template: "status=<*> user <*>", Params: []string{"200", "bob"}},
		{TemplateID: 10, TS: base.Add(2 * time.Minute), Source: "b", Template: "status=<*> user <*>", Params: []string{"404", "bob"}},
		{TemplateID: 10, TS: base.Add(7 * time.Minute), Source: "b", Template: "status=<*> user <*>", Params: []string{"404", "amy"}},
		{TemplateID: 9, TS: base.Add(-time.Minute), Source: "a", Template: "boot <*>", Params: []string{"ok"}, Attrs: map[string]string{"host": "h1"}},
		{TemplateID: 100, TS: base.Add(11 * time.Minute), Source: "c", Template: "x"},
	}
	run := func(q string) ([]string, []Row) {
		a := MustCompile(q).NewAggregator()
		for _, r := range recs {
			a.Add(r)
		}
		return a.Header(), a.Rows()
	}
	for _, tc := range []struct {
		q      string
		header []string
		rows   []Row
	}{
		{`| count`, []string{"count"}, []Row{{Keys: nil, Count: 5}}},
		{`| count by template`, []string{"template", "count"}, []Row{{[]string{"10"}, 3}, {[]string{"9"}, 1}, {[]string{"100"}, 1}}},
		{`| count by 5m`, []string{"5m", "count"}, []Row{
			{[]string{"2026-11-01T09:55:00Z"}, 1}, {[]string{"2026-11-01T10:00:00Z"}, 2},
			{[]string{"2026-11-01T10:05:00Z"}, 1}, {[]string{"2026-11-01T10:10:00Z"}, 1}}},
		{`| count by 5m, template | limit 2`, []string{"5m", "template", "count"}, []Row{
			{[]string{"2026-11-01T09:55:00Z", "9"}, 1}, {[]string{"2026-11-01T10:00:00Z", "10"}, 2}}},
		{`| count by source`, []string{"source", "count"}, []Row{{[]string{"a"}, 2}, {[]string{"b"}, 2}, {[]string{"c"}, 1}}},
		{`| top 2 param[0]`, []string{"param[0]", "count"}, []Row{{[]string{"404"}, 2}, {[]string{""}, 1}}},
		{`| top params[1]`, []string{"param[1]", "count"}, []Row{{[]string{""}, 2}, {[]string{"bob"}, 2}, {[]string{"amy"}, 1}}},
		{`| count by status`, []string{"status", "count"}, []Row{{[]string{""}, 2}, {[]string{"404"}, 2}, {[]string{"200"}, 1}}},
		{`| count by attrs.host`, []string{"attrs.host", "count"}, []Row{{[]string{""}, 4}, {[]string{"h1"}, 1}}},
	} {
		h, rows := run(tc.q)
		if !reflect.DeepEqual(h, tc.header) || !reflect.DeepEqual(rows, tc.rows) {
			t.Errorf("%q:\n got %v %v\nwant %v %v", tc.q, h, rows, tc.header, tc.rows)
		}
	}
	// whole-template counts and merging per-goroutine aggregators
	q := MustCompile(`| count by template`)
	a, b := q.NewAggregator(), q.NewAggregator()
	a.AddN(&Record{TemplateID: 7}, 1000)
	b.AddN(&Record{TemplateID: 7}, 5)
	b.Add(&Record{TemplateID: 8})
	a.Merge(b)
	if got := a.Rows(); !reflect.DeepEqual(got, []Row{{[]string{"7"}, 1005}, {[]string{"8"}, 1}}) {
		t.Errorf("merge: %v", got)
	}
	if MustCompile(`error`).NewAggregator() != nil {
		t.Error("a line query has an aggregator")
	}
}

// TestBucketBeforeEpoch: buckets floor, also before 1970.
func TestBucketBeforeEpoch(t *testing.T) {
	ts := time.Date(1969, 12, 31, 23, 58, 0, 0, time.UTC)
	if got := time.Unix(0, bucket(ts, 5*time.Minute)).UTC(); !got.Equal(time.Date(1969, 12, 31, 23, 55, 0, 0, time.UTC)) {
		t.Fatalf("bucket %v", got)
	}
}
