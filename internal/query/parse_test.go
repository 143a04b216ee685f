package query

import (
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC)

// TestParse pins the canonical form of every construct: precedence,
// quoting and escapes, fields, time syntax, parameter filters and pipes.
func TestParse(t *testing.T) {
	for _, tc := range []struct{ q, want string }{
		{``, `*`},
		{`*`, `*`},
		{`error`, `"error"`},
		{`error timeout`, `(AND "error" "timeout")`},
		{`a OR b c`, `(OR "a" (AND "b" "c"))`},
		{`a or b and c`, `(OR "a" (AND "b" "c"))`},
		{`NOT a`, `(NOT "a")`},
		{`-a b`, `(AND (NOT "a") "b")`},
		{`-(a OR b)`, `(NOT (OR "a" "b"))`},
		{`NOT NOT a`, `"a"`},
		{`"a b"`, `"a b"`},
		{`'it"s'`, `"it\"s"`},
		{`"say \"hi\"\n"`, `"say \"hi\"\n"`},
		{`err*time`, `glob("err","time")`},
		{`err*`, `"err"`},
		{`*err*`, `"err"`},
		{`a\*b`, `"a*b"`},
		{`a\ b`, `"a b"`},
		{`/fo+/`, `/fo+/`},
		{`/abc/`, `"abc"`},
		{`/a\/b/`, `"a/b"`},
		{`/(?i)abc/`, `/(?i)abc/`},
		{`template:12`, `template:12`},
		{`tenant:acme`, `tenant:"acme"`},
		{`source:"my app"`, `source:"my app"`},
		{`source:web*`, `source:glob("web","")`},
		{`source:~/^w/`, `source:~/^w/`},
		{`attrs.host:web1`, `attrs.host:"web1"`},
		{`ts:>2026-11-01`, `ts:[2026-11-01T00:00:00.000000001Z, )`},
		{`ts:>=2026-11-01T10:00:00Z`, `ts:[2026-11-01T10:00:00Z, )`},
		{`ts:<2026-11-02`, `ts:[, 2026-11-02T00:00:00Z)`},
		{`ts:<=2026-11-02T00:00`, `ts:[, 2026-11-02T00:00:00.000000001Z)`},
		{`ts:2026-11-01`, `ts:[2026-11-01T00:00:00Z, 2026-11-02T00:00:00Z)`},
		{`ts:2026-11-01T10:00:00.5Z`, `ts:[2026-11-01T10:00:00.5Z, 2026-11-01T10:00:00.6Z)`},
		{`ts:[2026-11-01T00:00:00Z, 2026-11-02)`, `ts:[2026-11-01T00:00:00Z, 2026-11-02T00:00:00Z)`},
		{`ts:(2026-11-01, 2026-11-02]`, `ts:[2026-11-01T00:00:00.000000001Z, 2026-11-02T00:00:00.000000001Z)`},
		{`since:1h`, `ts:[2026-11-05T11:00:00Z, )`},
		{`until:2026-11-01`, `ts:[, 2026-11-01T00:00:00Z)`},
		{`ts:>now-30m`, `ts:[2026-11-05T11:30:00.000000001Z, )`},
		{`param[3]>500`, `param[3]>num(500)`},
		{`params[0]=foo`, `param[0]="foo"`},
		{`param[0]:foo`, `param[0]="foo"`},
		{`status=404`, `status=num(404)`},
		{`status!=404`, `status!=num(404)`},
		{`status="404"`, `status="404"`},
		{`path=/api*`, `path=glob("/api","")`},
		{`path=~/^\/api/`, `path=~/^\/api/`},
		{`source:/var/log/syslog`, `source:"/var/log/syslog"`},
		{`source:~"^/var"`, `source:~/^\/var/`},
		{`status!=~/^2/`, `status!=~/^2/`},
		{`status>=5e2`, `status>=num(5e2)`},
		{`content-length<10`, `content-length<num(10)`},
		{`a | count`, `"a" | count`},
		{`a | count by template`, `"a" | count by template`},
		{`| count by 5m`, `* | count by 5m`},
		{`x | count by tenant, source`, `"x" | count by tenant, source`},
		{`| top 10 params[2]`, `* | top 10 param[2]`},
		{`| top param[2]`, `* | top 10 param[2]`},
		{`| limit 5`, `* | limit 5`},
		{`| count by status | limit 3`, `* | count by status | limit 3`},
		{`| top 3 attrs.host`, `* | top 3 attrs.host`},
		{`12:30`, `"12:30"`},
		{`"or"`, `"or"`},
		{`x AND (y OR z) -w`, `(AND "x" (OR "y" "z") (NOT "w"))`},
	} {
		q, err := CompileAt(tc.q, testNow)
		if err != nil {
			t.Errorf("%q: %v", tc.q, err)
			continue
		}
		if got := q.String(); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.q, got, tc.want)
		}
	}
}

// TestParseErrors pins the column and message of each kind of mistake.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		q   string
		col int
		msg string
	}{
		{`and`, 1, `expected a term, found the keyword AND (quote "and" to search for the word)`},
		{`(a`, 1, `unbalanced '(': no ')' closes it`},
		{`a)`, 2, `unbalanced ')': no '(' before it`},
		{`()`, 1, `empty parentheses`},
		{`a OR`, 5, `expected a term after OR, found end of query`},
		{`OR a`, 1, `expected a term, found the keyword OR (quote "or" to search for the word)`},
		{`NOT`, 4, `expected a term after NOT, found end of query`},
		{`/a(/`, 1, `bad regex: missing closing ): a(`},
		{`foo:bar`, 1, `unknown field "foo"`},
		{`http://x`, 1, `unknown field "http"`},
		{`template:abc`, 10, `bad number "abc": template takes a template id`},
		{`template:0`, 10, `bad number "0": template takes a template id`},
		{`| bogus`, 3, `unknown pipe "bogus"`},
		{`| top x param[1]`, 7, `bad number "x": top takes a count, then a key`},
		{`| limit 0`, 9, `bad number "0": limit takes a positive integer`},
		{`| limit`, 8, `limit takes a number of lines`},
		{`param[3]>abc`, 10, `bad number "abc": > compares numbers`},
		{`param[x]=1`, 7, `bad number: param[N] takes a parameter position 0..999999`},
		{`status<"4"`, 8, `bad number "4": < compares numbers`},
		{`tenant:`, 8, `expected a value after tenant:`},
		{`"abc`, 1, `unterminated phrase: missing closing "`},
		{`/abc`, 1, `unterminated regex: missing closing /`},
		{`"a"b`, 4, `expected a space after the phrase`},
		{`ts:garbage`, 4, `bad time "garbage"`},
		{`ts:[2026-11-02, 2026-11-01)`, 4, `empty time range`},
		{`ts:[2026-11-02]`, 4, `a time range needs two times: ts:[A, B)`},
		{`a -`, 3, `expected a term after '-' (quote "-" to search for it)`},
		{`| count by 5x`, 12, `bad duration "5x"`},
		// Past 100 years: 30501w wrapped around to 72h25m before the
		// bound was checked ahead of the product.
		{`| count by 30501w`, 12, `bad duration "30501w"`},
		{`ts:>=now-30501w`, 10, `bad duration "30501w"`},
		{`| count | count`, 11, `only one count or top per query`},
		{`| limit 3 | count`, 13, `count must come before limit`},
		{`| count by`, 11, `expected a key`},
		{`a | count by template extra`, 23, `unexpected word after the count pipe`},
		{`since:"1h"`, 7, `since takes a time or a duration`},
		{`template=5`, 9, `template takes ':'`},
		{`x[1]:y`, 1, `unknown field "x[1]": only param[N] takes a position`},
		{`"a\q"`, 3, `unknown escape \q in phrase`},
		{`a\`, 2, `backslash at the end of the query`},
		{`ts:now`, 4, `ts:now names an instant, not a span; use ts:>=now`},
	} {
		_, err := CompileAt(tc.q, testNow)
		pe, ok := err.(*ParseError)
		if !ok {
			t.Errorf("%q: got %v, want a *ParseError", tc.q, err)
			continue
		}
		if pe.Column != tc.col || !strings.Contains(pe.Msg, tc.msg) {
			t.Errorf("%q: got col %d %q, want col %d %q", tc.q, pe.Column, pe.Msg, tc.col, tc.msg)
		}
		if !strings.HasPrefix(pe.Error(), "col ") {
			t.Errorf("%q: Error() = %q", tc.q, pe.Error())
		}
	}
}

func TestCaret(t *testing.T) {
	_, err := Compile(`héllo | top x param[1]`)
	pe := err.(*ParseError)
	if pe.Error() != `col 14: bad number "x": top takes a count, then a key (top 10 param[2])` {
		t.Fatalf("Error() = %q", pe.Error())
	}
	want := "héllo | top x param[1]\n" + strings.Repeat(" ", 12) + "^"
	if got := pe.Caret(); got != want {
		t.Fatalf("Caret:\n%s\nwant\n%s", got, want)
	}
}

// TestCompileUsesNow: relative times follow the reference time.
func TestCompileUsesNow(t *testing.T) {
	q, err := CompileAt(`since:90m until:now-30m`, testNow)
	if err != nil {
		t.Fatal(err)
	}
	b := q.Bounds()
	if !b.Since.Equal(testNow.Add(-90*time.Minute)) || !b.Until.Equal(testNow.Add(-30*time.Minute)) {
		t.Fatalf("bounds %+v", b)
	}
}

func TestBounds(t *testing.T) {
	for _, tc := range []struct {
		q            string
		since, until string
		tenant       string
	}{
		{`error`, "", "", ""},
		{`tenant:acme ts:>=2026-11-01 ts:<2026-11-03 ts:2026-11-02`, "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z", "acme"},
		{`tenant:ac* ts:<2026-11-03`, "", "2026-11-03T00:00:00Z", ""},
		{`ts:>=2026-11-01 OR x`, "", "", ""}, // not every match obeys it
	} {
		q := MustCompile(tc.q)
		b := q.Bounds()
		f := func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format(time.RFC3339)
		}
		if f(b.Since) != tc.since || f(b.Until) != tc.until || b.Tenant != tc.tenant {
			t.Errorf("%q: bounds %s %s %q", tc.q, f(b.Since), f(b.Until), b.Tenant)
		}
	}
}

func TestParamName(t *testing.T) {
	for before, want := range map[string]string{
		"status: ":            "status",
		"GET /x status=":      "status",
		"status = ":           "status",
		`user="`:              "user",
		"user='":              "user",
		"a content-length: ":  "content-length",
		"req.id=":             "req.id",
		"_x=":                 "_x",
		"12:":                 "",
		"http://":             "",
		"=":                   "",
		"":                    "",
		"took ":               "",
		"2xx=":                "",
		"(status)=":           "",
		"status":              "",
		"key=value and code:": "code",
		// JSON keys, and JSON inside a JSON string
		`{"total":`:           "total",
		`{"ts":"`:             "ts",
		`,"user": "`:          "user",
		`, "level" : `:        "level",
		`{'k': '`:             "k",
		`{\"status\":`:        "status",
		`{\"user\":\"`:        "user",
		`"http.status_code":`: "http.status_code",
		`"status:`:            "status", // a quote before the key is not its own
		`status":`:            "",       // a quote closes it, none opens it
		`'status":`:           "",       // the quotes differ
		`"2xx":`:              "",
		`"":`:                 "",
		`"a b":`:              "",
	} {
		if got := ParamName(before); got != want {
			t.Errorf("ParamName(%q) = %q, want %q", before, got, want)
		}
	}
}

// TestDocExamples: every example in docs/query.md compiles.
func TestDocExamples(t *testing.T) {
	for _, q := range []string{
		`error -timeout source:web* ts:>=now-1h | count by 5m`,
		`"connection reset" (tenant:acme OR tenant:beta) | limit 100`,
		`status>=500 | top 10 path`,
		`timeout`, `"connection reset by peer"`, `GET*404`, `/status=5\d\d/`, `/(?i)error/`, `* | count by template`,
		`a\*b`, `a\ b`, `\-x`, `"or"`, `"-"`, `"-5"`, `"http://x"`, `12:30`,
		`template:42`, `tenant:acme`, `source:/var/log/syslog`, `source:web*`, `attrs.host:web1`, `-attrs.zone:*`,
		`source:~/^web[0-9]+$/`,
		`ts:2026-11-01`, `ts:[2026-11-01T00:00:00Z, 2026-11-02)`, `ts:>=now-15m`, `since:1h error`, `until:7d`,
		`ts:2026-11-01T10:00:00.250+01:00`, `ts:<=2026-11-01T10:00`,
		`param[3]>500`, `status=404`, `status="404"`, `path=/api/*`, `path=~/^\/api\/v[12]/`, `status!=~/^2/`, `-param[5]=x`,
		`error | count by template`, `template:42 | count by 5m`, `| count by 1h, template`, `status>=500 | top 5 path`,
		`| top 3 attrs.host | limit 2`,
	} {
		if _, err := Compile(q); err != nil {
			t.Errorf("%q: %v", q, err)
		}
	}
	_, err := Compile(`status=404 | top x path`)
	if err == nil || err.Error() != `col 18: bad number "x": top takes a count, then a key (top 10 param[2])` {
		t.Errorf("doc error example: %v", err)
	}
}
