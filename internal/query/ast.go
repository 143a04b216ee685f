package query

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

type opKind uint8

const (
	opAll      opKind = iota // matches every record
	opAnd                    // every kid
	opOr                     // some kid
	opNot                    // not kid
	opText                   // substring / glob / regex over the rendered line
	opTemplate               // template:N
	opTenant                 // tenant:V
	opSource                 // source:V
	opAttr                   // attrs.KEY:V
	opTS                     // lo <= ts < hi
	opParam                  // param[N] OP V, NAME OP V
)

type textKind uint8

const (
	textPhrase textKind = iota // segs[0] is a substring
	textGlob                   // segs occur in order, without overlap
	textRegex                  // re matches somewhere
)

type cmpOp uint8

const (
	cmpEq cmpOp = iota
	cmpNe
	cmpLt
	cmpLe
	cmpGt
	cmpGe
)

var cmpNames = [...]string{cmpEq: "=", cmpNe: "!=", cmpLt: "<", cmpLe: "<=", cmpGt: ">", cmpGe: ">="}

// node is one query expression; a single struct (not an interface) so that
// evaluation is a switch and its scratch state stays on the stack.
type node struct {
	op   opKind
	kids []*node

	// opText
	text   textKind
	segs   []string // non-empty pieces
	segsB  [][]byte
	form   *former // what settles segs false against a template (settleText), built once
	re     *regexp.Regexp
	assert bool // re has empty-width assertions (^ $ \b ...)

	// opTenant, opSource, opAttr, opParam
	key string // attribute key, parameter name
	idx int    // parameter position; -1 for a name
	cmp cmpOp
	val value

	id     uint64    // opTemplate
	lo, hi time.Time // opTS; zero means unbounded
}

type valKind uint8

const (
	valExact  valKind = iota // equal strings
	valGlob                  // '*' matches any run; the whole value must match
	valRegex                 // re matches somewhere in the value
	valNumber                // numerically equal when the other side is a number, else equal strings
)

// value is the right-hand side of a field or parameter filter.
type value struct {
	kind valKind
	s    string
	segs []string
	re   *regexp.Regexp
	num  float64
}

func (v *value) match(s string) bool {
	switch v.kind {
	case valGlob:
		return globFull(v.segs, s)
	case valRegex:
		return v.re.MatchString(s)
	case valNumber:
		if f, ok := parseNumber(s); ok {
			return f == v.num
		}
	}
	return s == v.s
}

// globFull reports whether s matches segs joined by '*' from end to end.
func globFull(segs []string, s string) bool {
	if len(segs) == 1 {
		return s == segs[0]
	}
	first, last := segs[0], segs[len(segs)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, m := range segs[1 : len(segs)-1] {
		i := strings.Index(s, m)
		if i < 0 {
			return false
		}
		s = s[i+len(m):]
	}
	return true
}

// parseNumber accepts decimal numbers only: [+-]digits[.digits][e[+-]digits]
// (no hex, no Inf or NaN, no underscores).
func parseNumber(s string) (float64, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		e := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			e++
		}
		if e == 0 {
			return 0, false
		}
	}
	if i != len(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false // out of range
	}
	return f, true
}

// String renders the expression in a canonical, fully parenthesised form
// (used by tests and by explain output).
func (n *node) String() string {
	var b strings.Builder
	n.write(&b)
	return b.String()
}

func (n *node) write(b *strings.Builder) {
	switch n.op {
	case opAll:
		b.WriteString("*")
	case opAnd, opOr:
		if n.op == opAnd {
			b.WriteString("(AND")
		} else {
			b.WriteString("(OR")
		}
		for _, k := range n.kids {
			b.WriteByte(' ')
			k.write(b)
		}
		b.WriteByte(')')
	case opNot:
		b.WriteString("(NOT ")
		n.kids[0].write(b)
		b.WriteByte(')')
	case opText:
		switch n.text {
		case textPhrase:
			b.WriteString(strconv.Quote(n.segs[0]))
		case textGlob:
			b.WriteString("glob(")
			for i, s := range n.segs {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.Quote(s))
			}
			b.WriteByte(')')
		case textRegex:
			b.WriteString("/" + strings.ReplaceAll(n.re.String(), "/", `\/`) + "/")
		}
	case opTemplate:
		b.WriteString("template:" + strconv.FormatUint(n.id, 10))
	case opTenant:
		b.WriteString("tenant:" + n.val.String())
	case opSource:
		b.WriteString("source:" + n.val.String())
	case opAttr:
		b.WriteString("attrs." + n.key + ":" + n.val.String())
	case opTS:
		b.WriteString("ts:[")
		if !n.lo.IsZero() {
			b.WriteString(n.lo.UTC().Format(time.RFC3339Nano))
		}
		b.WriteString(", ")
		if !n.hi.IsZero() {
			b.WriteString(n.hi.UTC().Format(time.RFC3339Nano))
		}
		b.WriteString(")")
	case opParam:
		if n.idx >= 0 {
			b.WriteString("param[" + strconv.Itoa(n.idx) + "]")
		} else {
			b.WriteString(n.key)
		}
		b.WriteString(cmpNames[n.cmp])
		b.WriteString(n.val.String())
	}
}

func (v *value) String() string {
	switch v.kind {
	case valGlob:
		q := make([]string, len(v.segs))
		for i, s := range v.segs {
			q[i] = strconv.Quote(s)
		}
		return "glob(" + strings.Join(q, ",") + ")"
	case valRegex:
		return "~/" + strings.ReplaceAll(v.re.String(), "/", `\/`) + "/"
	case valNumber:
		return "num(" + v.s + ")"
	}
	return strconv.Quote(v.s)
}
