package query

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestWithinParams(t *testing.T) {
	for _, tc := range []struct {
		term, tpl string
		want      bool
	}{
		{"fc9d3e55.css", `<*> - <*> [<*>] "PUT /static/js/<*> HTTP/1.1" <*>`, true},
		{"js/fc9", `"PUT /static/js/<*> HTTP"`, false}, // starts in the piece
		{"css HT", `"GET /<*> HTTP"`, false},           // ends in the piece
		{"a=1 b", `a=<*> b=<*>`, false},                // spans " b="... the piece " b=" inside? no: "1 b" crosses
		{"1 b=2", `a=<*> b=<*>`, false},                // a piece inside the term
		{"bob", `user <*> logged <*> from <*>`, true},  //
		{"10.0.0", `user <*> from <*>`, true},          //
		{"ab", `<*><*>`, false},                        // two parameters adjoin
		{"ab", `<*>:<*>`, true},                        //
		{"ab", `x`, false},                             // no parameter
		{"GET", `GET <*> status=<*>`, false},           // inside a piece (a part of a glob)
		{"b:", `<*>:<*>`, false},                       //
		{":a", `<*>:<*>`, false},                       //
		{"=4", `id=<*>`, false},
		{"d=4", `id=<*>`, false},     //
		{"42", `id=<*>`, true},       //
		{"x", `<*>`, true},           //
		{"x o", `<*> ok`, false},     // into the last piece
		{"zz", `<*> ok <*>`, true},   //
		{"k z", `<*> ok <*>`, false}, //
	} {
		pieces := strings.Split(tc.tpl, Wildcard)
		if got := withinParams(tc.term, pieces); got != tc.want {
			t.Errorf("withinParams(%q, %q) = %v, want %v", tc.term, tc.tpl, got, tc.want)
		}
	}
}

// TestWithinParamsRendered checks withinParams against renderings: for
// random templates over a small alphabet and random parameters, a term it
// calls within parameters never occurs in a rendering except inside one
// parameter.
func TestWithinParamsRendered(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "ab:="[r.IntN(4)]
		}
		return string(b)
	}
	checked := 0
	for range 20000 {
		n := 1 + r.IntN(3)
		pieces := make([]string, n+1)
		for i := range pieces {
			pieces[i] = word(r.IntN(3))
		}
		term := word(1 + r.IntN(4))
		if !withinParams(term, pieces) {
			continue
		}
		checked++
		params := make([]string, n)
		for i := range params {
			params[i] = word(r.IntN(5))
		}
		var line strings.Builder
		var starts []int // where each parameter starts, then its end
		var ends []int
		for i, p := range params {
			line.WriteString(pieces[i])
			starts = append(starts, line.Len())
			line.WriteString(p)
			ends = append(ends, line.Len())
		}
		line.WriteString(pieces[n])
		s := line.String()
		for at := 0; at+len(term) <= len(s); at++ {
			if s[at:at+len(term)] != term {
				continue
			}
			inside := false
			for i := range params {
				inside = inside || at >= starts[i] && at+len(term) <= ends[i]
			}
			if !inside {
				t.Fatalf("term %q in %q at %d (pieces %q, params %q) is not inside a parameter", term, s, at, pieces, params)
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d cases within parameters", checked)
	}
}

func TestNeedle(t *testing.T) {
	tpls := []Template{
		{ID: 1, Version: 1, Text: `user <*> logged <*> from <*>`},
		{ID: 2, Version: 1, Text: `GET /static/<*> HTTP/1.1`},
	}
	for _, tc := range []struct {
		q    string
		id   uint64
		want string
	}{
		{"bob", 1, "bob"},
		{"bob 10.0.0.2", 1, "10.0.0.2"},   // the longest of an AND
		{"bob OR alice", 1, ""},           // an OR requires neither
		{"-bob", 1, ""},                   //
		{"logged", 1, ""},                 // settled by the text: All
		{`"d ou"`, 1, ""},                 // crosses a piece
		{"static/x.css", 2, ""},           // starts in a piece
		{"x.css", 2, "x.css"},             //
		{"x.css param[0]!=y", 2, "x.css"}, // a parameter filter beside it
		{`"x.css" /x\.css/`, 2, "x.css"},  // a regex is not a needle
		{"x*css", 2, "css"},               // the longest part of a glob
		{"static/x*css", 2, "css"},
		{"GET*css", 2, "css"}, // a part inside a piece is no needle
	} {
		p := MustCompile(tc.q).PlanTemplates("", tpls)
		tp := p.Template(tc.id, 1)
		if got := string(tp.Needle()); got != tc.want {
			t.Errorf("%q on template %d (%s): needle %q, want %q", tc.q, tc.id, tp.Decision, got, tc.want)
		}
	}
}
