package query

import (
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/byteset"
)

// Decision is what a plan decided for a template.
type Decision uint8

const (
	// Scan: some records of the template may match; evaluate the residual
	// on each (TemplatePlan.Match), reading TemplatePlan.Columns.
	Scan Decision = iota
	// All: every record of the template matches; no column is read to
	// decide.
	All
	// None: no record of the template matches; skip it.
	None
)

func (d Decision) String() string {
	return [...]string{Scan: "scan", All: "all", None: "none"}[d]
}

// Plan is a query planned over one tenant's templates.
type Plan struct {
	q         *Query
	templates []TemplatePlan
	byKey     map[tplKey]int
	// Columns is what the reader must read for the records it does not
	// skip: the residuals' columns, the aggregation's keys, and ColLine
	// when the query returns lines.
	Columns Column
}

type tplKey struct {
	id      uint64
	version uint32
}

// TemplatePlan is the decision for one template version.
type TemplatePlan struct {
	Template Template
	Decision Decision
	// Columns are what the residual reads (Scan only); a Scan whose
	// Columns lack ColParams is decided without the parameters, e.g. a
	// time range on a template whose text settles every term.
	Columns  Column
	info     *tplInfo
	residual *node
}

// ReadsParams reports whether the residual filters on parameters
// (param[N] or a parameter name), so that a reader that hands Match the
// rendered Line need not split it into Params for text terms alone.
func (tp *TemplatePlan) ReadsParams() bool { return tp.Decision == Scan && hasOp(tp.residual, opParam) }

func hasOp(n *node, op opKind) bool {
	if n == nil {
		return false
	}
	if n.op == op {
		return true
	}
	for _, k := range n.kids {
		if hasOp(k, op) {
			return true
		}
	}
	return false
}

// Residual renders what is left to evaluate per record ("*" for All,
// "NOT *" for None), for explain output and tests.
func (tp *TemplatePlan) Residual() string {
	switch tp.Decision {
	case All:
		return "*"
	case None:
		return "NOT *"
	}
	return tp.residual.String()
}

// Match evaluates the template's residual on rec, a record of this
// template; rec.Template is not needed.
func (tp *TemplatePlan) Match(rec *Record) bool {
	switch tp.Decision {
	case All:
		return true
	case None:
		return false
	}
	c := evalCtx{rec: rec, t: tp.info}
	ok := eval(tp.residual, &c)
	c.release()
	return ok
}

// PlanTemplates settles the query against the literal text of a tenant's
// templates (every version the records may carry). tenant settles
// tenant:NAME terms; pass "" when the templates are not one tenant's.
func (q *Query) PlanTemplates(tenant string, tpls []Template) *Plan {
	p := &Plan{q: q, templates: make([]TemplatePlan, len(tpls)), byKey: make(map[tplKey]int, len(tpls))}
	for i, t := range tpls {
		info := newTplInfo(t)
		tp := TemplatePlan{Template: t, info: info}
		switch r, res := settle(q.root, info, tenant); r {
		case settledTrue:
			tp.Decision = All
		case settledFalse:
			tp.Decision = None
		default:
			tp.Decision, tp.residual = Scan, res
			tp.Columns = columns(res)
			p.Columns |= tp.Columns
		}
		p.templates[i] = tp
		p.byKey[tplKey{t.ID, t.Version}] = i
	}
	if a := q.NewAggregator(); a != nil {
		p.Columns |= a.Columns()
	} else {
		p.Columns |= ColLine
	}
	return p
}

// WithParamBytes is p planned again with each template's ParamBytes and
// ParamPairs taken from pb (a records file's summary; nil: unknown, as in
// p), the same plan PlanTemplates gives over p's templates with those, for less:
// only the Scan templates are settled again, from their text already cut
// at its wildcards. A template settled All or None stays so: ParamBytes
// only turns a text term that was open into false (settleText), and a
// settled answer of the three-valued evaluation does not change when an
// open operand settles. tenant is PlanTemplates' tenant.
func (p *Plan) WithParamBytes(tenant string, pb func(id uint64, version uint32) (*byteset.Set, PairSet)) *Plan {
	np := &Plan{q: p.q, templates: slices.Clone(p.templates), byKey: p.byKey}
	for i := range np.templates {
		tp := &np.templates[i]
		if tp.Decision != Scan {
			continue
		}
		if cs, pairs := pb(tp.Template.ID, tp.Template.Version); cs != nil {
			info := *tp.info
			info.t.ParamBytes, info.t.ParamPairs = cs, pairs
			tp.Template.ParamBytes, tp.Template.ParamPairs = cs, pairs
			tp.info = &info
			switch r, res := settle(p.q.root, tp.info, tenant); r {
			case settledTrue:
				tp.Decision, tp.residual, tp.Columns = All, nil, 0
			case settledFalse:
				tp.Decision, tp.residual, tp.Columns = None, nil, 0
			default:
				tp.residual = res
				tp.Columns = columns(res)
			}
		}
		if tp.Decision == Scan {
			np.Columns |= tp.Columns
		}
	}
	if a := p.q.NewAggregator(); a != nil {
		np.Columns |= a.Columns()
	} else {
		np.Columns |= ColLine
	}
	return np
}

// Templates are the per-template decisions, in the order given.
func (p *Plan) Templates() []TemplatePlan { return p.templates }

// Template is the decision for one template version, or nil when the plan
// does not know it.
func (p *Plan) Template(id uint64, version uint32) *TemplatePlan {
	i, ok := p.byKey[tplKey{id, version}]
	if !ok {
		return nil
	}
	return &p.templates[i]
}

// IDs are the template ids with a version that may match (decision All or
// Scan), sorted: what a reader prunes row groups and files with.
func (p *Plan) IDs() []uint64 {
	var ids []uint64
	for _, tp := range p.templates {
		if tp.Decision != None {
			ids = append(ids, tp.Template.ID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Match decides rec through its template's plan; a record whose template
// version the plan does not know falls back to Query.Match (which needs
// rec.Template or rec.Line).
func (p *Plan) Match(rec *Record) bool {
	if tp := p.Template(rec.TemplateID, rec.TemplateVersion); tp != nil {
		return tp.Match(rec)
	}
	return p.q.Match(rec)
}

type tri uint8

const (
	unsettled tri = iota
	settledTrue
	settledFalse
)

func settledBy(b bool) tri {
	if b {
		return settledTrue
	}
	return settledFalse
}

// settle partially evaluates n against a template: settled when the
// template's literal text decides it for every record, otherwise the
// residual expression that still needs each record.
func settle(n *node, t *tplInfo, tenant string) (tri, *node) {
	switch n.op {
	case opAll:
		return settledTrue, nil
	case opAnd, opOr:
		short, skip := settledFalse, settledTrue // AND
		if n.op == opOr {
			short, skip = settledTrue, settledFalse
		}
		var rest []*node
		for _, k := range n.kids {
			r, res := settle(k, t, tenant)
			switch r {
			case short:
				return short, nil
			case skip:
			default:
				rest = append(rest, res)
			}
		}
		switch len(rest) {
		case 0:
			return skip, nil
		case 1:
			return unsettled, rest[0]
		}
		return unsettled, &node{op: n.op, kids: rest}
	case opNot:
		r, res := settle(n.kids[0], t, tenant)
		switch r {
		case settledTrue:
			return settledFalse, nil
		case settledFalse:
			return settledTrue, nil
		}
		return unsettled, &node{op: opNot, kids: []*node{res}}
	case opText:
		return settleText(n, t), n
	case opTemplate:
		return settledBy(t.t.ID == n.id || t.t.Canonical != 0 && t.t.Canonical == n.id), nil
	case opTenant:
		if tenant != "" {
			return settledBy(n.val.match(tenant)), nil
		}
	case opParam:
		if n.idx >= 0 && n.idx >= t.params() {
			return settledFalse, nil
		}
		if n.idx < 0 {
			// a value in the template's text is in every line
			for _, r := range t.names[n.key] {
				if r.param < 0 && n.matchParam(r.lit) {
					return settledTrue, nil
				}
			}
			if !t.hasParamNamed(n.key) {
				return settledFalse, nil
			}
		}
	}
	return unsettled, n
}

// settleText decides a text term from a template's literal pieces.
//
// A template without parameters is its only line, so the term is evaluated
// on it. Otherwise:
//
//   - true when the term occurs in the literal text of every rendering: a
//     phrase inside one piece; a glob whose segments occur in order, each
//     inside one piece (the '*' between them may cover parameters); a regex
//     without empty-width assertions (^ $ \A \z \b \B) that matches inside
//     one piece, since such a match survives any surrounding text;
//   - false when no rendering can contain it: a phrase or glob that cannot
//     be spelt by the pieces and parameters made of the template's
//     ParamBytes (decided exactly, see former.canForm; for a term of more
//     than maxFormState bytes, its first maxFormState). With ParamBytes unknown
//     any byte may come from a parameter, so a template with a parameter
//     never settles false on text;
//   - otherwise the term is evaluated per record (a term may span a piece
//     and a parameter: "id=4" on "id=<*>" with parameter "42").
func settleText(n *node, t *tplInfo) tri {
	if t.params() == 0 {
		return settledBy(n.matchText([]byte(t.pieces[0])))
	}
	if n.text == textRegex {
		if !n.assert {
			for _, p := range t.pieces {
				if n.re.MatchString(p) {
					return settledTrue
				}
			}
		}
		return unsettled
	}
	if inPieces(n.segs, t.pieces) {
		return settledTrue
	}
	if t.t.ParamBytes != nil && n.form != nil && !n.form.canForm(t.pieces, t.t.ParamBytes, t.t.ParamPairs) {
		return settledFalse
	}
	return unsettled
}

// inPieces reports whether segs occur in order, without overlap, each
// within one piece.
func inPieces(segs, pieces []string) bool {
	pi, off := 0, 0
	for _, s := range segs {
		for {
			if pi >= len(pieces) {
				return false
			}
			if k := strings.Index(pieces[pi][off:], s); k >= 0 {
				off += k + len(s)
				break
			}
			pi, off = pi+1, 0
		}
	}
	return true
}

// former decides whether a term can be formed by a template's renderings
// (canForm), built once when the query is parsed: a search settles the
// term against every template of every file it opens (through quarry
// serve, 13% of a term query's CPU went to building a KMP automaton again
// for each and stepping it a byte at a time). The automaton's transitions
// are a table and a set of its states a bit set.
type former struct {
	final int
	next  [][256]uint8 // next[s][c]: the state after c from state s
	in    byteset.Set  // the bytes the segments hold
}

// maxFormState is the most bytes of a term a former holds: its states
// 0..final fit a uint64.
const maxFormState = 63

// newFormer is the former of segs. Of a term of more than maxFormState
// bytes it holds the first maxFormState (whole segments, the last one cut
// short): a rendering that cannot contain those cannot contain the term, so
// a false answer stays exact and a true one is "maybe", as an unsettled
// term is.
func newFormer(segs []string) *former {
	var head []string
	n := 0
	for _, s := range segs {
		if n+len(s) > maxFormState {
			if r := maxFormState - n; r > 0 {
				head = append(head, s[:r])
			}
			break
		}
		head = append(head, s)
		n += len(s)
	}
	m := newSeqMatcher(head)
	f := &former{final: m.final, next: make([][256]uint8, m.final+1)}
	for st := range f.next {
		for c := range 256 {
			f.next[st][c] = uint8(m.step(st, byte(c)))
		}
	}
	for _, s := range head {
		f.in.AddString(s)
	}
	return f
}

// canForm reports whether some rendering P0 x1 P1 ... xn Pn of pieces,
// with every parameter xi a string over chars (possibly empty) whose
// adjacent bytes are pairs of pairs (nil: any pair), contains f's segments
// in order without overlap. The pieces advance every state
// deterministically; a parameter closes the state set under chars' bytes
// (closePairs with pairs).
func (f *former) canForm(pieces []string, chars *byteset.Set, pairs PairSet) bool {
	// The closure's alphabet: chars' bytes the segments hold, and one
	// other if chars has any. Every byte no segment holds steps every
	// state alike (back to its segment's start), so one stands for all: a
	// closure over a parameter of 70 distinct bytes and a term of 10 tries
	// 11 instead of 70 per state.
	var alpha [256]byte
	n := 0
	for w := range chars {
		both := chars[w] & f.in[w]
		for ; both != 0; both &= both - 1 {
			alpha[n] = byte(w<<6 | bits.TrailingZeros64(both))
			n++
		}
	}
	for w := range chars {
		if rest := chars[w] &^ f.in[w]; rest != 0 {
			alpha[n] = byte(w<<6 | bits.TrailingZeros64(rest))
			n++
			break
		}
	}
	// ok[k] bit c: alpha[c] may follow alpha[k] in a parameter. Only pairs
	// of the segments' bytes are asked: the representative stands for
	// bytes no segment holds, each of which steps every state alike,
	// so a pair with it is taken as possible (which can only keep the
	// answer true, never make a true one false).
	var ok [64]uint64
	if pairs != nil {
		for k := range n {
			for c := range n {
				if !f.in.Has(alpha[k]) || !f.in.Has(alpha[c]) || pairs.HasPair(alpha[k], alpha[c]) {
					ok[k] |= 1 << c
				}
			}
		}
	}
	final := uint64(1) << f.final
	cur := uint64(1) // state 0
	for i, piece := range pieces {
		for j := 0; j < len(piece); j++ {
			c := piece[j]
			var nx uint64
			for set := cur; set != 0; set &= set - 1 {
				nx |= 1 << f.next[bits.TrailingZeros64(set)][c]
			}
			cur = nx
		}
		if cur&final != 0 {
			return true
		}
		if i == len(pieces)-1 {
			break
		}
		if pairs != nil {
			cur = f.closePairs(cur, alpha[:n], &ok)
			if cur&final != 0 {
				return true
			}
			continue
		}
		// closure under the parameter's bytes
		for todo := cur; todo != 0; {
			st := bits.TrailingZeros64(todo)
			todo &= todo - 1
			for _, b := range alpha[:n] {
				if u := uint64(1) << f.next[st][b]; cur&u == 0 {
					cur |= u
					todo |= u
				}
			}
		}
		if cur&final != 0 {
			return true
		}
	}
	return cur&final != 0
}

// closePairs is canForm's closure of the state set cur under a parameter
// whose adjacent bytes are pairs ok allows (ok[k] bit c: alpha[c] may
// follow alpha[k]): the states after the empty parameter (cur itself) and
// after every string over alpha that ok allows. It walks (last byte,
// state) pairs: last[k] holds the states reached by a parameter ending in
// alpha[k]. alpha holds at most 64 bytes (the segments' bytes, at most
// maxFormState, and a representative).
func (f *former) closePairs(cur uint64, alpha []byte, ok *[64]uint64) uint64 {
	var last [64]uint64
	type item struct{ k, st uint8 }
	var todo []item
	var buf [128]item
	todo = buf[:0]
	for set := cur; set != 0; set &= set - 1 {
		st := bits.TrailingZeros64(set)
		for k, b := range alpha {
			if u := f.next[st][b]; last[k]&(1<<u) == 0 {
				last[k] |= 1 << u
				todo = append(todo, item{uint8(k), u})
			}
		}
	}
	for len(todo) > 0 {
		it := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for c := ok[it.k]; c != 0; c &= c - 1 {
			k := bits.TrailingZeros64(c)
			if u := f.next[it.st][alpha[k]]; last[k]&(1<<u) == 0 {
				last[k] |= 1 << u
				todo = append(todo, item{uint8(k), u})
			}
		}
	}
	for k := range alpha {
		cur |= last[k]
	}
	return cur
}

// seqMatcher is a deterministic automaton for "segs in order": state
// off[j]+k means segment j is matched up to k bytes; final is all matched.
type seqMatcher struct {
	segs  []string
	fail  [][]int
	off   []int
	final int
}

func newSeqMatcher(segs []string) *seqMatcher {
	m := &seqMatcher{segs: segs}
	for _, s := range segs {
		m.off = append(m.off, m.final)
		m.final += len(s)
		f := make([]int, len(s))
		for i, k := 1, 0; i < len(s); i++ {
			for k > 0 && s[i] != s[k] {
				k = f[k-1]
			}
			if s[i] == s[k] {
				k++
			}
			f[i] = k
		}
		m.fail = append(m.fail, f)
	}
	return m
}

func (m *seqMatcher) step(state int, c byte) int {
	if state == m.final {
		return state
	}
	j := len(m.off) - 1
	for m.off[j] > state {
		j--
	}
	s, k := m.segs[j], state-m.off[j]
	for k > 0 && s[k] != c {
		k = m.fail[j][k-1]
	}
	if s[k] == c {
		k++
	}
	if k == len(s) {
		return m.off[j] + len(s) // the next segment's state 0, or final
	}
	return m.off[j] + k
}

// columns are the record fields a residual reads.
func columns(n *node) Column {
	var c Column
	switch n.op {
	case opAnd, opOr, opNot:
		for _, k := range n.kids {
			c |= columns(k)
		}
	case opText, opParam:
		c |= ColParams
	case opTemplate:
		c |= ColTemplate
	case opSource:
		c |= ColSource
	case opAttr:
		c |= ColAttrs
	case opTS:
		c |= ColTS
	}
	return c
}

// Bounds are limits every matching record obeys, for pruning files and
// partitions before planning.
type Bounds struct {
	// Since (inclusive) and Until (exclusive) bound ts; zero is unbounded.
	Since, Until time.Time
	// Tenant is set when the query names exactly one tenant.
	Tenant string
}

// Bounds collects the time range and tenant from the terms every match
// must satisfy (the top-level AND).
func (q *Query) Bounds() Bounds {
	var b Bounds
	terms := []*node{q.root}
	if q.root.op == opAnd {
		terms = q.root.kids
	}
	for _, n := range terms {
		switch n.op {
		case opTS:
			if !n.lo.IsZero() && (b.Since.IsZero() || n.lo.After(b.Since)) {
				b.Since = n.lo
			}
			if !n.hi.IsZero() && (b.Until.IsZero() || n.hi.Before(b.Until)) {
				b.Until = n.hi
			}
		case opTenant:
			if n.val.kind == valExact && b.Tenant == "" {
				b.Tenant = n.val.s
			}
		}
	}
	return b
}
