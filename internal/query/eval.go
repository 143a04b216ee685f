package query

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// Wildcard marks a parameter in a template's text.
const Wildcard = "<*>"

// Record is one log record as the reader hands it to Match. Only the fields
// the query needs must be set (Plan.Columns says which).
type Record struct {
	Tenant          string
	Source          string
	TS              time.Time
	TemplateID      uint64
	TemplateVersion uint32
	// Template is the text of the record's template version. Query.Match
	// needs it for parameter names and, without Line, to render the line;
	// a Plan knows its templates and ignores it.
	Template string
	Params   []string
	Attrs    map[string]string
	// Line is the rendered line. When nil it is rendered from the template
	// and Params, and only if a text term needs it.
	Line []byte
}

// Column is a set of record fields, so that a reader can skip the columns a
// query does not need. Tenant is a partition and always known.
type Column uint8

const (
	ColTemplate Column = 1 << iota // template_id (and version)
	ColTS                          // ts
	ColSource                      // source
	ColAttrs                       // attrs
	ColParams                      // params
	// ColLine is everything needed to render and print a line.
	ColLine = ColTemplate | ColTS | ColSource | ColAttrs | ColParams
)

func (c Column) String() string {
	var s []string
	for i, n := range []string{"template", "ts", "source", "attrs", "params"} {
		if c&(1<<i) != 0 {
			s = append(s, n)
		}
	}
	return "{" + strings.Join(s, ",") + "}"
}

// Match evaluates the whole query on rec without a plan: the reference the
// template-aware Plan.Match must agree with, and the path for a record whose
// template is unknown. Parameter names come from rec.Template.
func (q *Query) Match(rec *Record) bool {
	var t *tplInfo
	if rec.Template != "" || rec.Line == nil {
		t = newTplInfo(Template{ID: rec.TemplateID, Version: rec.TemplateVersion, Text: rec.Template})
	}
	c := evalCtx{rec: rec, t: t}
	ok := eval(q.root, &c)
	c.release()
	return ok
}

// evalCtx is one record's evaluation state; the line is rendered at most
// once, into a pooled buffer.
type evalCtx struct {
	rec      *Record
	t        *tplInfo
	line     []byte
	rendered bool
	buf      *[]byte
}

var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// release returns the render buffer to the pool.
func (c *evalCtx) release() {
	if c.buf != nil {
		if cap(c.line) > 64<<10 {
			c.line = make([]byte, 0, 512) // do not keep a huge line's buffer
		}
		*c.buf = c.line[:0]
		lineBufs.Put(c.buf)
		c.buf = nil
	}
}

func (c *evalCtx) getLine() []byte {
	if c.rendered {
		return c.line
	}
	c.rendered = true
	if c.rec.Line != nil || c.t == nil {
		c.line = c.rec.Line
		return c.line
	}
	c.buf = lineBufs.Get().(*[]byte)
	c.line = c.t.render((*c.buf)[:0], c.rec.Params)
	return c.line
}

func eval(n *node, c *evalCtx) bool {
	switch n.op {
	case opAll:
		return true
	case opAnd:
		for _, k := range n.kids {
			if !eval(k, c) {
				return false
			}
		}
		return true
	case opOr:
		for _, k := range n.kids {
			if eval(k, c) {
				return true
			}
		}
		return false
	case opNot:
		return !eval(n.kids[0], c)
	case opText:
		return n.matchText(c.getLine())
	case opTemplate:
		return c.rec.TemplateID == n.id || c.t != nil && c.t.t.Canonical == n.id && c.t.t.Canonical != 0
	case opTenant:
		return n.val.match(c.rec.Tenant)
	case opSource:
		return n.val.match(c.rec.Source)
	case opAttr:
		v, ok := c.rec.Attrs[n.key]
		return ok && n.val.match(v)
	case opTS:
		ts := c.rec.TS
		return (n.lo.IsZero() || !ts.Before(n.lo)) && (n.hi.IsZero() || ts.Before(n.hi))
	case opParam:
		ps := c.rec.Params
		if n.idx >= 0 {
			return n.idx < len(ps) && n.matchParam(ps[n.idx])
		}
		if c.t == nil {
			return false
		}
		for _, r := range c.t.names[n.key] {
			if r.param < 0 && n.matchParam(r.lit) || r.param >= 0 && r.param < len(ps) && n.matchParam(ps[r.param]) {
				return true
			}
		}
		return false
	}
	return false
}

func (n *node) matchText(line []byte) bool {
	switch n.text {
	case textPhrase:
		return bytes.Contains(line, n.segsB[0])
	case textGlob:
		for _, s := range n.segsB {
			i := bytes.Index(line, s)
			if i < 0 {
				return false
			}
			line = line[i+len(s):]
		}
		return true
	default:
		return n.re.Match(line)
	}
}

// matchParam applies a parameter filter to one parameter value. Ordering
// comparisons need a number on both sides; = and != compare numbers
// numerically when both sides are numbers.
func (n *node) matchParam(s string) bool {
	switch n.cmp {
	case cmpEq:
		return n.val.match(s)
	case cmpNe:
		return !n.val.match(s)
	}
	f, ok := parseNumber(s)
	if !ok {
		return false
	}
	switch n.cmp {
	case cmpLt:
		return f < n.val.num
	case cmpLe:
		return f <= n.val.num
	case cmpGt:
		return f > n.val.num
	default:
		return f >= n.val.num
	}
}
