package query

import (
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"
)

// Query is a compiled query: a filter expression and its pipes. It is
// immutable and safe for concurrent use.
type Query struct {
	src   string
	root  *node
	agg   *aggSpec // nil: the query returns lines
	limit int      // 0: no limit
}

// Compile parses q, taking relative times (now, now-1h, since:1h) from the
// wall clock. An error is a *ParseError.
func Compile(q string) (*Query, error) { return CompileAt(q, time.Now()) }

// CompileAt is Compile with now as the reference for relative times.
func CompileAt(q string, now time.Time) (qq *Query, err error) {
	p := &parser{lx: lexer{src: q}, now: now}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(*ParseError)
			if !ok {
				panic(r)
			}
			qq, err = nil, pe
		}
	}()
	return p.parse(), nil
}

// MustCompile is Compile for queries known to be valid; it panics on error.
func MustCompile(q string) *Query {
	qq, err := Compile(q)
	if err != nil {
		panic(err)
	}
	return qq
}

// String is the query's canonical form: the filter fully parenthesised,
// then its pipes.
func (q *Query) String() string {
	s := q.root.String()
	if q.agg != nil {
		s += " | " + q.agg.String()
	}
	if q.limit > 0 {
		s += " | limit " + strconv.Itoa(q.limit)
	}
	return s
}

// Source is the text the query was compiled from.
func (q *Query) Source() string { return q.src }

// Limit is the most lines (or, after count or top, rows) the query returns;
// 0 means no limit.
func (q *Query) Limit() int { return q.limit }

// Aggregates reports whether the query ends in count or top, so that it
// returns rows rather than lines.
func (q *Query) Aggregates() bool { return q.agg != nil }

type parser struct {
	lx  lexer
	now time.Time
	q   *Query
}

func (p *parser) errorf(pos int, format string, args ...any) { p.lx.errorf(pos, format, args...) }

func (p *parser) parse() *Query {
	p.q = &Query{src: p.lx.src}
	switch p.lx.peek().kind {
	case tEOF, tPipe:
		p.q.root = &node{op: opAll}
	default:
		p.q.root = p.parseOr()
	}
	for {
		t := p.lx.next()
		switch t.kind {
		case tEOF:
			return p.q
		case tPipe:
			p.lx.pipe = true
			p.parsePipe(t)
		case tRParen:
			p.errorf(t.pos, "unbalanced ')': no '(' before it")
		default:
			p.errorf(t.pos, "unexpected %s", tokNames[t.kind])
		}
	}
}

func (p *parser) parseOr() *node {
	n := p.parseAnd("")
	for p.lx.peek().kind == tOr {
		p.lx.next()
		m := p.parseAnd("OR")
		if n.op == opOr {
			n.kids = append(n.kids, m)
		} else {
			n = &node{op: opOr, kids: []*node{n, m}}
		}
	}
	return n
}

func startsTerm(k tokKind) bool {
	switch k {
	case tWord, tPhrase, tRegex, tLParen, tNot, tField:
		return true
	}
	return false
}

func (p *parser) parseAnd(after string) *node {
	n := p.parseUnary(after)
	for {
		t := p.lx.peek()
		after := ""
		if t.kind == tAnd {
			p.lx.next()
			after = "AND"
		} else if !startsTerm(t.kind) {
			return n
		}
		m := p.parseUnary(after)
		if n.op == opAnd {
			n.kids = append(n.kids, m)
		} else {
			n = &node{op: opAnd, kids: []*node{n, m}}
		}
	}
}

// parseUnary parses [NOT|-]* primary; after names the keyword before it,
// for the error when the term is missing.
func (p *parser) parseUnary(after string) *node {
	t := p.lx.peek()
	if t.kind == tNot {
		p.lx.next()
		k := p.parseUnary("NOT")
		if k.op == opNot { // NOT NOT x is x
			return k.kids[0]
		}
		return &node{op: opNot, kids: []*node{k}}
	}
	return p.parsePrimary(after)
}

func (p *parser) parsePrimary(after string) *node {
	t := p.lx.next()
	switch t.kind {
	case tLParen:
		if p.lx.peek().kind == tRParen {
			p.errorf(t.pos, "empty parentheses")
		}
		n := p.parseOr()
		c := p.lx.next()
		if c.kind != tRParen {
			if c.kind == tEOF || c.kind == tPipe {
				p.errorf(t.pos, "unbalanced '(': no ')' closes it")
			}
			p.errorf(c.pos, "expected ')', found %s", tokNames[c.kind])
		}
		return n
	case tWord:
		return p.textNode(t)
	case tPhrase:
		return newPhrase(t.text)
	case tRegex:
		return p.regexNode(t)
	case tField:
		return p.fieldNode(t)
	}
	switch {
	case t.kind == tAnd || t.kind == tOr || t.kind == tNot:
		p.errorf(t.pos, "expected a term, found the keyword %s (quote \"%s\" to search for the word)", tokNames[t.kind], strings.ToLower(tokNames[t.kind]))
	case after != "":
		p.errorf(t.pos, "expected a term after %s, found %s", after, tokNames[t.kind])
	case t.kind == tRParen:
		p.errorf(t.pos, "unbalanced ')': no '(' before it")
	}
	p.errorf(t.pos, "expected a term, found %s", tokNames[t.kind])
	return nil
}

func newPhrase(s string) *node {
	if s == "" {
		return &node{op: opAll}
	}
	return &node{op: opText, text: textPhrase, segs: []string{s}, segsB: [][]byte{[]byte(s)}, form: newFormer([]string{s})}
}

// textNode turns a bare word into a phrase, or a glob when it has '*'.
func (p *parser) textNode(t token) *node {
	if !t.star {
		return newPhrase(t.text)
	}
	n := &node{op: opText, text: textGlob}
	for _, s := range t.segs {
		if s != "" {
			n.segs = append(n.segs, s)
			n.segsB = append(n.segsB, []byte(s))
		}
	}
	switch len(n.segs) {
	case 0:
		return &node{op: opAll}
	case 1: // leading or trailing '*' adds nothing to a substring
		n.text = textPhrase
	}
	n.form = newFormer(n.segs)
	return n
}

// regexNode compiles /re/ once. A regex that is plain literal text becomes a
// phrase, which templates can settle more often.
func (p *parser) regexNode(t token) *node {
	re, err := regexp.Compile(t.text)
	if err != nil {
		msg := err.Error()
		if e, ok := err.(*syntax.Error); ok {
			msg = e.Code.String() + ": " + e.Expr
		}
		p.errorf(t.pos, "bad regex: %s", msg)
	}
	sx, err := syntax.Parse(t.text, syntax.Perl)
	if err == nil {
		sx = sx.Simplify()
		if sx.Op == syntax.OpLiteral && sx.Flags&syntax.FoldCase == 0 {
			return newPhrase(string(sx.Rune))
		}
		if sx.Op == syntax.OpEmptyMatch {
			return &node{op: opAll}
		}
	}
	return &node{op: opText, text: textRegex, re: re, assert: err != nil || hasAssertion(sx)}
}

// hasAssertion reports whether re contains an empty-width assertion, whose
// truth depends on the text around a match.
func hasAssertion(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	for _, s := range re.Sub {
		if hasAssertion(s) {
			return true
		}
	}
	return false
}

// builtin lists the fields that take ':'.
func builtin(name string) bool {
	switch name {
	case "template", "tenant", "source", "ts", "since", "until":
		return true
	}
	return strings.HasPrefix(name, "attrs.")
}

const fieldHelp = "fields: template, tenant, source, ts, since, until, attrs.KEY; " +
	"parameters: param[N]=V or NAME=V; quote text that contains ':'"

func (p *parser) fieldNode(f token) *node {
	isParam := f.name == "param" || f.name == "params"
	if f.idx >= 0 && !isParam {
		p.errorf(f.pos, "unknown field %q: only param[N] takes a position", f.display())
	}
	if !isParam && f.op != ":" && builtin(f.name) {
		p.errorf(f.pos+len(f.name), "%s takes ':' (%s:VALUE)", f.name, f.name)
	}
	if isParam && f.idx < 0 {
		isParam = false // a parameter named "param"
	}
	if f.op == ":" && !isParam && !builtin(f.name) {
		p.errorf(f.pos, "unknown field %q (%s)", f.name, fieldHelp)
	}
	v := p.lx.next() // value mode: a word, phrase, regex or range
	if v.kind == tRange && f.name != "ts" {
		p.errorf(v.pos, "a range needs ts:")
	}
	switch {
	case f.name == "template":
		if v.kind != tWord || v.star {
			p.errorf(v.pos, "bad number %q: template takes a template id", v.text)
		}
		id, err := strconv.ParseUint(v.text, 10, 64)
		if err != nil || id == 0 {
			p.errorf(v.pos, "bad number %q: template takes a template id", v.text)
		}
		return &node{op: opTemplate, id: id}
	case f.name == "tenant":
		return &node{op: opTenant, val: p.fieldValue(v)}
	case f.name == "source":
		return &node{op: opSource, val: p.fieldValue(v)}
	case strings.HasPrefix(f.name, "attrs."):
		key := f.name[len("attrs."):]
		if key == "" {
			p.errorf(f.pos, "attrs. needs a key (attrs.host:web1)")
		}
		return &node{op: opAttr, key: key, val: p.fieldValue(v)}
	case f.name == "ts":
		return p.tsNode(v)
	case f.name == "since", f.name == "until":
		if v.kind != tWord {
			p.errorf(v.pos, "%s takes a time or a duration (%s:1h, %s:2026-11-01)", f.name, f.name, f.name)
		}
		t := p.timeOrAgo(v)
		if f.name == "since" {
			return &node{op: opTS, lo: t}
		}
		return &node{op: opTS, hi: t}
	}
	// a parameter, by position or by name
	n := &node{op: opParam, idx: f.idx, key: f.name}
	switch f.op {
	case ":", "=":
		n.cmp = cmpEq
	case "!=":
		n.cmp = cmpNe
	case "<":
		n.cmp = cmpLt
	case "<=":
		n.cmp = cmpLe
	case ">":
		n.cmp = cmpGt
	case ">=":
		n.cmp = cmpGe
	}
	if n.cmp >= cmpLt {
		f, ok := parseNumber(v.text)
		if v.kind != tWord || v.star || !ok {
			p.errorf(v.pos, "bad number %q: %s compares numbers", v.text, cmpNames[n.cmp])
		}
		n.val = value{kind: valNumber, s: v.text, num: f}
		return n
	}
	n.val = p.fieldValue(v)
	if n.val.kind == valExact && v.kind == tWord {
		if f, ok := parseNumber(v.text); ok {
			n.val = value{kind: valNumber, s: v.text, num: f}
		}
	}
	return n
}

// fieldValue is an exact value, a glob when a bare word has '*', or a regex.
func (p *parser) fieldValue(v token) value {
	switch v.kind {
	case tRegex:
		re, err := regexp.Compile(v.text)
		if err != nil {
			msg := err.Error()
			if e, ok := err.(*syntax.Error); ok {
				msg = e.Code.String() + ": " + e.Expr
			}
			p.errorf(v.pos, "bad regex: %s", msg)
		}
		return value{kind: valRegex, re: re}
	case tWord:
		if v.star {
			return value{kind: valGlob, segs: v.segs, s: v.text}
		}
	}
	return value{kind: valExact, s: v.text}
}

// tsNode parses ts:>T, ts:>=T, ts:<T, ts:<=T, ts:T (the span T names) and
// ts:[A, B) with [ or ( and ] or ).
func (p *parser) tsNode(v token) *node {
	n := &node{op: opTS}
	switch v.kind {
	case tRange:
		a, b, ok := strings.Cut(v.text, ",")
		if !ok {
			p.errorf(v.pos, "a time range needs two times: ts:[A, B)")
		}
		aPos := v.pos + 1 + len(a) - len(strings.TrimLeft(a, " \t"))
		bPos := v.pos + 2 + len(a) + len(b) - len(strings.TrimLeft(b, " \t"))
		lo, _ := p.time(strings.TrimSpace(a), aPos)
		hi, _ := p.time(strings.TrimSpace(b), bPos)
		if v.open == '(' {
			lo = lo.Add(time.Nanosecond)
		}
		if v.close == ']' {
			hi = hi.Add(time.Nanosecond)
		}
		n.lo, n.hi = lo, hi
	case tWord:
		s := v.text
		switch {
		case strings.HasPrefix(s, ">="):
			n.lo, _ = p.time(s[2:], v.pos+2)
		case strings.HasPrefix(s, "<="):
			t, _ := p.time(s[2:], v.pos+2)
			n.hi = t.Add(time.Nanosecond)
		case strings.HasPrefix(s, ">"):
			t, _ := p.time(s[1:], v.pos+1)
			n.lo = t.Add(time.Nanosecond)
		case strings.HasPrefix(s, "<"):
			n.hi, _ = p.time(s[1:], v.pos+1)
		default:
			t, span := p.time(s, v.pos)
			if span == 0 {
				p.errorf(v.pos, "ts:%s names an instant, not a span; use ts:>=%s", s, s)
			}
			n.lo, n.hi = t, t.Add(span)
		}
	default:
		p.errorf(v.pos, "ts takes a time: ts:>=2026-11-01, ts:2026-11-01, ts:[2026-11-01, 2026-11-02)")
	}
	if !n.lo.IsZero() && !n.hi.IsZero() && !n.lo.Before(n.hi) {
		p.errorf(v.pos, "empty time range")
	}
	return n
}

// timeOrAgo is a time, or a duration meaning that long before now.
func (p *parser) timeOrAgo(v token) time.Time {
	if d, ok := parseDuration(v.text); ok {
		return p.now.Add(-d)
	}
	t, _ := p.time(v.text, v.pos)
	return t
}

// time parses an absolute or relative time and the span its precision
// names: a date is a day, a minute a minute, seconds with k fraction digits
// 10^-k s, now and now-DUR an instant (span 0). Times without a zone are UTC.
func (p *parser) time(s string, pos int) (time.Time, time.Duration) {
	if s == "now" {
		return p.now, 0
	}
	if rest, ok := strings.CutPrefix(s, "now-"); ok {
		d, ok := parseDuration(rest)
		if !ok {
			p.errorf(pos+4, "bad duration %q (want 15m, 1h, 2d, 1h30m)", rest)
		}
		return p.now.Add(-d), 0
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, 24 * time.Hour
	}
	for _, l := range []string{"2006-01-02T15:04Z07:00", "2006-01-02T15:04"} {
		if t, err := time.Parse(l, s); err == nil {
			return t, time.Minute
		}
	}
	for _, l := range []string{"2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(l, s); err == nil {
			span := time.Second
			if len(s) > 19 && s[19] == '.' {
				for i := 20; i < len(s) && s[i] >= '0' && s[i] <= '9' && span > 1; i++ {
					span /= 10
				}
			}
			return t, span
		}
	}
	p.errorf(pos, "bad time %q (want 2026-11-01, 2026-11-01T10:00:00Z, now or now-1h)", s)
	return time.Time{}, 0
}

// parseDuration reads a sum of number+unit with units ms, s, m, h, d (24h),
// w (7d): 90s, 1h30m, 2d. It must be positive.
func parseDuration(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || i > 9 {
			return 0, false
		}
		n, _ := strconv.Atoi(s[:i])
		s = s[i:]
		var unit time.Duration
		switch {
		case strings.HasPrefix(s, "ms"):
			unit, s = time.Millisecond, s[2:]
		case strings.HasPrefix(s, "s"):
			unit, s = time.Second, s[1:]
		case strings.HasPrefix(s, "m"):
			unit, s = time.Minute, s[1:]
		case strings.HasPrefix(s, "h"):
			unit, s = time.Hour, s[1:]
		case strings.HasPrefix(s, "d"):
			unit, s = 24*time.Hour, s[1:]
		case strings.HasPrefix(s, "w"):
			unit, s = 7*24*time.Hour, s[1:]
		default:
			return 0, false
		}
		// At most 100 years, checked before the product: 9 digits of
		// weeks would wrap around to any duration.
		const most = 100 * 365 * 24 * time.Hour
		if time.Duration(n) > (most-total)/unit {
			return 0, false
		}
		total += time.Duration(n) * unit
	}
	return total, total > 0
}
