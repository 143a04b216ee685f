package query

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"time"
)

type keyKind uint8

const (
	keyTemplate keyKind = iota
	keyTenant
	keySource
	keyParam  // param[N]
	keyName   // a parameter by name
	keyAttr   // attrs.KEY
	keyBucket // a time bucket
)

type aggKey struct {
	kind  keyKind
	idx   int
	name  string
	step  time.Duration
	label string // as written, for headers
}

// aggSpec is a count or top pipe.
type aggSpec struct {
	top  int // 0: count
	keys []aggKey
}

func (a *aggSpec) String() string {
	var ks []string
	for _, k := range a.keys {
		ks = append(ks, k.label)
	}
	if a.top > 0 {
		return "top " + strconv.Itoa(a.top) + " " + strings.Join(ks, ", ")
	}
	if len(ks) == 0 {
		return "count"
	}
	return "count by " + strings.Join(ks, ", ")
}

// parsePipe parses one pipe after '|': count [by KEY, ...], top [N] KEY,
// limit N.
func (p *parser) parsePipe(bar token) {
	t := p.lx.next()
	if t.kind != tWord {
		p.errorf(t.pos, "expected a pipe after '|' (count, top, limit), found %s", tokNames[t.kind])
	}
	switch strings.ToLower(t.text) {
	case "count":
		p.noAgg(t)
		spec := &aggSpec{}
		if w := p.lx.peek(); w.kind == tWord && strings.EqualFold(w.text, "by") {
			p.lx.next()
			for {
				spec.keys = append(spec.keys, p.parseKey())
				if p.lx.peek().kind != tComma {
					break
				}
				p.lx.next()
			}
		}
		p.q.agg = spec
	case "top":
		p.noAgg(t)
		spec := &aggSpec{top: 10}
		w := p.lx.peek()
		if w.kind == tWord && w.text != "" && w.text[0] >= '0' && w.text[0] <= '9' {
			p.lx.next()
			spec.top = p.count(w, "top")
		}
		spec.keys = []aggKey{p.parseKey()}
		if spec.top == 10 && p.lx.peek().kind == tWord {
			p.errorf(w.pos, "bad number %q: top takes a count, then a key (top 10 param[2])", w.text)
		}
		p.q.agg = spec
	case "limit":
		w := p.lx.next()
		if w.kind != tWord {
			p.errorf(w.pos, "limit takes a number of lines (| limit 100)")
		}
		n := p.count(w, "limit")
		if p.q.limit == 0 || n < p.q.limit {
			p.q.limit = n
		}
	default:
		p.errorf(t.pos, "unknown pipe %q (pipes: count, top, limit)", t.text)
	}
	if k := p.lx.peek().kind; k != tPipe && k != tEOF {
		p.errorf(p.lx.peek().pos, "unexpected %s after the %s pipe", tokNames[k], strings.ToLower(t.text))
	}
}

// noAgg rejects a second count or top and a count after a limit.
func (p *parser) noAgg(t token) {
	if p.q.agg != nil {
		p.errorf(t.pos, "only one count or top per query")
	}
	if p.q.limit > 0 {
		p.errorf(t.pos, "%s must come before limit", strings.ToLower(t.text))
	}
}

func (p *parser) count(w token, what string) int {
	n, err := strconv.Atoi(w.text)
	if err != nil || n <= 0 || n > 1e9 {
		p.errorf(w.pos, "bad number %q: %s takes a positive integer", w.text, what)
	}
	return n
}

// parseKey reads a grouping key: template, tenant, source, param[N] (or
// params[N]), attrs.KEY, a duration (time buckets) or a parameter name.
func (p *parser) parseKey() aggKey {
	w := p.lx.next()
	if w.kind != tWord || w.text == "" {
		p.errorf(w.pos, "expected a key (template, tenant, source, param[N], attrs.KEY, NAME or a duration like 5m), found %s", tokNames[w.kind])
	}
	s := w.text
	k := aggKey{label: s}
	switch lower := strings.ToLower(s); {
	case lower == "template":
		k.kind = keyTemplate
	case lower == "tenant":
		k.kind = keyTenant
	case lower == "source":
		k.kind = keySource
	case strings.HasPrefix(s, "param[") || strings.HasPrefix(s, "params["):
		open := strings.IndexByte(s, '[')
		n, err := strconv.Atoi(strings.TrimSuffix(s[open+1:], "]"))
		if !strings.HasSuffix(s, "]") || err != nil || n < 0 || n > 999999 {
			p.errorf(w.pos+open+1, "bad number: param[N] takes a parameter position 0..999999")
		}
		k.kind, k.idx, k.label = keyParam, n, "param["+strconv.Itoa(n)+"]"
	case strings.HasPrefix(s, "attrs."):
		if len(s) == len("attrs.") {
			p.errorf(w.pos, "attrs. needs a key (attrs.host)")
		}
		k.kind, k.name = keyAttr, s[len("attrs."):]
	default:
		if d, ok := parseDuration(s); ok {
			k.kind, k.step = keyBucket, d
			break
		}
		if s[0] >= '0' && s[0] <= '9' {
			p.errorf(w.pos, "bad duration %q (want 30s, 5m, 1h, 1d)", s)
		}
		for i := 0; i < len(s); i++ {
			if !isIdent(s[i]) || i == 0 && !isIdentStart(s[i]) {
				p.errorf(w.pos+i, "bad key %q (template, tenant, source, param[N], attrs.KEY, NAME or a duration like 5m)", s)
			}
		}
		k.kind, k.name = keyName, s
	}
	return k
}

// Row is one result row of count or top: the key values in the order the
// query names them, and the number of matching records.
type Row struct {
	Keys  []string
	Count int64
}

// Aggregator counts matching records for a query's count or top pipe. It is
// not safe for concurrent use; give each goroutine its own and Merge them.
type Aggregator struct {
	spec   *aggSpec
	limit  int
	groups map[string]*group
	key    []byte
	part   []byte
	tpls   map[string]*tplInfo // by template text, for keys by name
}

type group struct {
	row  Row
	nums []int64 // numeric sort keys for template and bucket keys
}

// NewAggregator returns an aggregator for q's count or top pipe, or nil when
// q returns lines.
func (q *Query) NewAggregator() *Aggregator {
	if q.agg == nil {
		return nil
	}
	return &Aggregator{spec: q.agg, limit: q.limit, groups: map[string]*group{}, tpls: map[string]*tplInfo{}}
}

// Columns are the record fields the aggregator reads (besides tenant, which
// is free): a count by template reads only template_id, by 5m only ts.
func (a *Aggregator) Columns() Column {
	var c Column
	for _, k := range a.spec.keys {
		switch k.kind {
		case keyTemplate:
			c |= ColTemplate
		case keySource:
			c |= ColSource
		case keyParam, keyName:
			c |= ColParams | ColTemplate
		case keyAttr:
			c |= ColAttrs
		case keyBucket:
			c |= ColTS
		}
	}
	return c
}

// Header names the columns of Rows: the keys as written, then "count".
func (a *Aggregator) Header() []string {
	var h []string
	for _, k := range a.spec.keys {
		h = append(h, k.label)
	}
	return append(h, "count")
}

// Add counts one matching record. Only the fields the keys need must be
// set (see Columns); a key by parameter name needs rec.Template.
func (a *Aggregator) Add(rec *Record) { a.AddN(rec, 1) }

// AddN counts n matching records that share rec's key fields, e.g. a whole
// template settled true by the plan when counting by template.
func (a *Aggregator) AddN(rec *Record, n int64) {
	a.key = a.key[:0]
	for _, k := range a.spec.keys {
		a.part = a.part[:0]
		switch k.kind {
		case keyTemplate:
			a.part = strconv.AppendUint(a.part, rec.TemplateID, 10)
		case keyTenant:
			a.part = append(a.part, rec.Tenant...)
		case keySource:
			a.part = append(a.part, rec.Source...)
		case keyAttr:
			a.part = append(a.part, rec.Attrs[k.name]...)
		case keyParam:
			if k.idx < len(rec.Params) {
				a.part = append(a.part, rec.Params[k.idx]...)
			}
		case keyName:
			a.part = append(a.part, a.named(rec, k.name)...)
		case keyBucket:
			a.part = strconv.AppendInt(a.part, bucket(rec.TS, k.step), 10)
		}
		a.key = binary.AppendUvarint(a.key, uint64(len(a.part)))
		a.key = append(a.key, a.part...)
	}
	if g, ok := a.groups[string(a.key)]; ok {
		g.row.Count += n
		return
	}
	g := &group{row: Row{Count: n}}
	rest := a.key
	for _, k := range a.spec.keys {
		l, w := binary.Uvarint(rest)
		part := string(rest[w : w+int(l)])
		rest = rest[w+int(l):]
		switch k.kind {
		case keyTemplate:
			g.nums = append(g.nums, int64(rec.TemplateID))
		case keyBucket:
			b, _ := strconv.ParseInt(part, 10, 64)
			g.nums = append(g.nums, b)
			part = time.Unix(0, b).UTC().Format(time.RFC3339Nano)
		default:
			g.nums = append(g.nums, 0)
		}
		g.row.Keys = append(g.row.Keys, part)
	}
	a.groups[string(a.key)] = g
}

// named is the first value rec's template gives name, a parameter's or
// one in its text, or "".
func (a *Aggregator) named(rec *Record, name string) string {
	t, ok := a.tpls[rec.Template]
	if !ok {
		t = newTplInfo(Template{Text: rec.Template})
		a.tpls[rec.Template] = t
	}
	for _, r := range t.names[name] {
		if r.param < 0 {
			return r.lit
		}
		if r.param < len(rec.Params) {
			return rec.Params[r.param]
		}
	}
	return ""
}

// bucket is the start of ts's bucket of width step, in Unix nanoseconds;
// buckets are aligned to the Unix epoch (UTC).
func bucket(ts time.Time, step time.Duration) int64 {
	n := ts.UnixNano()
	r := n % int64(step)
	if r < 0 {
		r += int64(step)
	}
	return n - r
}

// Merge adds b's counts to a; both must come from the same query.
func (a *Aggregator) Merge(b *Aggregator) {
	for k, g := range b.groups {
		if h, ok := a.groups[k]; ok {
			h.row.Count += g.row.Count
			continue
		}
		c := *g
		a.groups[k] = &c
	}
}

// Rows returns the result. Order: a count whose first key is a time bucket
// is a series, sorted by its keys ascending (buckets chronologically,
// template ids numerically, other values bytewise); every other count and
// top is sorted by count descending, then keys ascending. top N keeps the
// first N rows and limit M the first M.
func (a *Aggregator) Rows() []Row {
	gs := make([]*group, 0, len(a.groups))
	for _, g := range a.groups {
		gs = append(gs, g)
	}
	byKeys := func(x, y *group) int {
		for i, k := range a.spec.keys {
			var c int
			if k.kind == keyTemplate || k.kind == keyBucket {
				c = cmp.Compare(x.nums[i], y.nums[i])
			} else {
				c = strings.Compare(x.row.Keys[i], y.row.Keys[i])
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}
	series := a.spec.top == 0 && len(a.spec.keys) > 0 && a.spec.keys[0].kind == keyBucket
	slices.SortFunc(gs, func(x, y *group) int {
		if !series {
			if c := cmp.Compare(y.row.Count, x.row.Count); c != 0 {
				return c
			}
		}
		return byKeys(x, y)
	})
	n := len(gs)
	if a.spec.top > 0 && a.spec.top < n {
		n = a.spec.top
	}
	if a.limit > 0 && a.limit < n {
		n = a.limit
	}
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = gs[i].row
	}
	return rows
}
