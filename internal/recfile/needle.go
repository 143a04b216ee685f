package recfile

import (
	"bytes"
	"sort"
	"time"

	"github.com/quarrylake/quarry/internal/byteset"
	"github.com/quarrylake/quarry/internal/eventtime"
)

// A Needle is a byte string a search knows can only occur inside one
// parameter of a line (query.TemplatePlan.Needle): Lines.MayHold rules a
// row out by its parameters' values, without rendering its line. A Needle
// is one goroutine's (it remembers its last answer).
type Needle struct {
	b   []byte
	set byteset.Set
	// noTime: b has a run of letters longer than any timestamp writes.
	noTime bool
	// timeNoRes[l]: a timestamp of layout l with an empty residue (the
	// common case) may hold b.
	timeNoRes [256]bool
	// The last layout and residue inTime looked at with one, and its
	// answer: a file's rows mostly share theirs (a zone's offset).
	lastL   eventtime.LayoutID
	lastRes []byte
	lastIn  bool
	// skipNum[k]: a number of kind k cannot hold b (b has a byte the
	// kind never renders).
	skipNum [256]bool
	// The row groups of the Lines last asked (lines), each searched once
	// on first use (groupNeedle).
	lines  *Lines
	groups []*groupNeedle
}

// groupNeedle is a row group searched for a needle all at once: its text
// columns' bytes (every p and b column, more's text or items) searched with
// bytes.Index, a few GB/s, instead of each row's parameters looked at one
// by one. A row whose kinds hold only slots such a search settles (text,
// bytes, numbers and timestamps that cannot write the needle's bytes) and
// whose values hold no occurrence cannot hold it.
type groupNeedle struct {
	ok      bool     // false: every row is looked at on its own (a plain kinds column)
	hit     []uint64 // bit i: a text value of row i holds the needle, or may (an occurrence across two values)
	rowWise []bool   // by kinds entry: a slot a search of the text columns does not settle
}

// group is the groupNeedle of row group gi of l, searched on first use.
func (n *Needle) group(l *Lines, gi int) *groupNeedle {
	if n.lines != l {
		n.lines, n.groups = l, make([]*groupNeedle, len(l.groups))
	}
	if gn := n.groups[gi]; gn != nil {
		return gn
	}
	gn := l.groups[gi].needleSearch(n)
	n.groups[gi] = gn
	return gn
}

// needleSearch is n's search of g (Needle.search), made once per group:
// the decoder's (needleRows) is the one MayHold takes.
func (g *group) needleSearch(n *Needle) *groupNeedle {
	if gn := g.needles[n]; gn != nil {
		return gn
	}
	if g.needles == nil {
		g.needles = map[*Needle]*groupNeedle{}
	}
	gn := n.search(g)
	g.needles[n] = gn
	return gn
}

// mayHold is false when gn settles that row i of g holds no occurrence of
// its needle: a row whose kinds hold only slots the search of the text
// columns settles, none of whose values holds it.
func (gn *groupNeedle) mayHold(g *group, i int) bool {
	if !gn.ok {
		return true
	}
	e, ok := g.kindsEntry(i)
	return !ok || int(e) >= len(gn.rowWise) || gn.rowWise[e] || gn.hit[i>>6]&(1<<(i&63)) != 0
}

// search searches row group g (groupNeedle).
func (n *Needle) search(g *group) *groupNeedle {
	gn := &groupNeedle{}
	if g.kinds == nil {
		return gn
	}
	gn.ok = true
	gn.hit = make([]uint64, (g.nrows+63)/64)
	if mc := g.base[cMore]; mc != nil && mc.read {
		// more as lists: the items of each row that has some.
		for j, items := range mc.lists {
			for _, it := range items {
				if bytes.Contains(it, n.b) {
					if r := mc.rowOf(j); r >= 0 && r>>6 < len(gn.hit) {
						gn.hit[r>>6] |= 1 << (r & 63)
					}
					break
				}
			}
		}
	}
	cols := []*colVals{g.base[cMoreText]}
	cols = append(cols, g.slots[0][:]...)
	cols = append(cols, g.slots[2][:]...)
	for _, cv := range cols {
		if cv != nil && cv.read {
			n.searchColumn(cv, gn.hit)
		}
	}
	times := map[eventtime.LayoutID]*byteset.Set{} // the bytes a timestamp of the layout writes with g's residues
	timeSet := func(l eventtime.LayoutID) *byteset.Set {
		ts := times[l]
		if ts == nil {
			ts = groupTimeBytes(g, l)
			times[l] = ts
		}
		return ts
	}
	digits := bytes.ContainsAny(n.b, "0123456789")
	gn.rowWise = make([]bool, len(g.kinds))
	for e, slots := range g.kinds {
		if g.kindsErr != nil && g.kindsErr[e] != nil {
			gn.rowWise[e] = true
			continue
		}
		for _, sl := range slots {
			var row bool
			switch sl.kind {
			case kindCovered, kindString, kindBytes:
			case kindTime:
				row = !n.noTime && timeSet(sl.layout).Covers(&n.set)
			case kindShift:
				row = n.inTime(sl.layout, sl.res)
			case kindInt, kindHex, kindIPv4, kindDecimal:
				row = !n.skipNum[sl.kind]
			case kindDigits:
				// Outside its runs, the text is the skeleton's, which the
				// search saw; a needle without a digit lies there.
				row = digits
			case kindInner, kindInnerD:
				// The text around the timestamp is in p<col> (or more),
				// which the search saw; the needle overlaps the
				// timestamp only if it lies inside it, ends in it (its
				// last byte is one a timestamp writes), starts in it (its
				// first), or holds it whole (it is not shorter).
				ts := timeSet(sl.layout)
				row = !n.noTime && ts.Covers(&n.set) || ts.Has(n.b[len(n.b)-1]) || ts.Has(n.b[0]) ||
					len(n.b) >= eventtime.MinLen(sl.layout) || sl.kind == kindInnerD && digits
			default: // other times inside a text, or a kind unknown here
				row = true
			}
			if row {
				gn.rowWise[e] = true
				break
			}
		}
	}
	return gn
}

// searchColumn sets in hit the rows of byte array column cv whose value
// holds n (or may: an occurrence that runs into the next value marks the
// first).
func (n *Needle) searchColumn(cv *colVals, hit []uint64) {
	mark := func(j int) {
		if r := cv.rowOf(j); r >= 0 && r>>6 < len(hit) {
			hit[r>>6] |= 1 << (r & 63)
		}
	}
	if cv.dict != nil {
		var in []bool
		for e, v := range cv.dict {
			if bytes.Contains(v, n.b) {
				if in == nil {
					in = make([]bool, len(cv.dict))
				}
				in[e] = true
			}
		}
		if in == nil {
			return
		}
		for j, e := range cv.idx {
			if in[e] {
				mark(j)
			}
		}
		return
	}
	if len(cv.offs) < 2 {
		return
	}
	data := cv.data[:cv.offs[len(cv.offs)-1]]
	for at := 0; ; {
		k := bytes.Index(data[at:], n.b)
		if k < 0 {
			return
		}
		o := uint32(at + k)
		// The value o falls in: the last j with offs[j] <= o.
		j := sort.Search(len(cv.offs)-1, func(j int) bool { return cv.offs[j+1] > o })
		mark(j)
		at += k + 1
	}
}

// groupTimeBytes is the set of bytes a timestamp of layout l writes with
// any residue of g's rows, or none.
func groupTimeBytes(g *group, l eventtime.LayoutID) *byteset.Set {
	s := eventtime.Bytes(l, nil)
	rc := g.base[cResidue]
	if rc == nil || !rc.read {
		return &s
	}
	add := func(res []byte) {
		if len(res) > 0 {
			b := eventtime.Bytes(l, res)
			s.Union(&b)
		}
	}
	if rc.dict != nil {
		for _, res := range rc.dict {
			add(res)
		}
		return &s
	}
	var last []byte
	for j := range rc.count() {
		if res := rc.str(j); j == 0 || !bytes.Equal(res, last) {
			add(res)
			last = res
		}
	}
	return &s
}

// numBytes are the bytes each numeric kind renders (appendValue).
var numBytes = map[byte]string{
	kindInt:     "0123456789-",
	kindHex:     "0123456789abcdef",
	kindIPv4:    "0123456789.",
	kindDecimal: "0123456789-.",
}

// NewNeedle is the Needle of b, which must not be empty.
func NewNeedle(b []byte) *Needle {
	n := &Needle{b: b}
	run := 0
	for _, c := range b {
		n.set.Add(c)
		if c|0x20 >= 'a' && c|0x20 <= 'z' {
			if run++; run > eventtime.MaxLetters {
				n.noTime = true
			}
		} else {
			run = 0
		}
	}
	for l := range n.timeNoRes {
		ts := eventtime.Bytes(eventtime.LayoutID(l), nil)
		n.timeNoRes[l] = ts.Covers(&n.set)
	}
	for k, alpha := range numBytes {
		var s byteset.Set
		for i := 0; i < len(alpha); i++ {
			s.Add(alpha[i])
		}
		n.skipNum[k] = !s.Covers(&n.set)
	}
	return n
}

// inTime reports whether a timestamp of layout l with residue res may
// hold n.
func (n *Needle) inTime(l eventtime.LayoutID, res []byte) bool {
	if n.noTime {
		return false
	}
	if len(res) == 0 {
		return n.timeNoRes[l]
	}
	if l == n.lastL && bytes.Equal(res, n.lastRes) {
		return n.lastIn
	}
	ts := eventtime.Bytes(l, res)
	n.lastL, n.lastRes, n.lastIn = l, append(n.lastRes[:0], res...), ts.Covers(&n.set)
	return n.lastIn
}

// MayHold reports whether a parameter of row x's line may hold n: false
// only when no parameter's text holds it, decided from the columns as
// AppendLine reads them (a parameter's text, a number rendered, a
// timestamp's possible bytes) without rendering the line. A parameter
// whose text a timestamp is inserted into (kinds u, v and y) and a row
// AppendLine would report as corrupt are taken as maybe, so that
// rendering the line decides (and reports). It uses l's decoder's caches
// as AppendLine does.
func (l *Lines) MayHold(x int, n *Needle, scratch []byte) (bool, []byte) {
	r := l.refs[x]
	if r.tpl < 0 {
		return true, scratch // no template index: decoded without the projection's Lines
	}
	g := l.groups[r.g]
	i := int(r.row)
	if !n.group(l, int(r.g)).mayHold(g, i) {
		return false, scratch
	}
	slots, err := slotsIn(g, i, l.d.kinds, len(l.d.pieces[r.tpl])-1)
	if err != nil || len(slots) != len(l.d.pieces[r.tpl])-1 {
		return true, scratch
	}
	more := g.moreOf(i)
	var kn, kb int // the n and b columns taken so far (group.slotValue)
	var runs []int64
	for _, s := range slots {
		if s.kind == kindCovered {
			continue
		}
		var cv *colVals
		v := -1
		switch s.kind {
		case kindTime:
			if res := g.residue(i); n.inTime(s.layout, res) {
				scratch = l.d.times.Render(scratch[:0], time.UnixMicro(g.ts(i)/1000), s.layout, res)
				if bytes.Contains(scratch, n.b) {
					return true, scratch
				}
			}
			continue
		case kindDigits, kindInnerD:
			var ok bool
			var err error
			if scratch, ok, err = g.appendDigits(scratch[:0], s, i, &runs); err != nil {
				return true, scratch // AppendLine reports it
			}
			if ok {
				if s.kind == kindInnerD {
					var hold bool
					if hold, scratch = l.aroundTime(n, scratch, s, g, i); hold {
						return true, scratch
					}
				} else if bytes.Contains(scratch, n.b) {
					return true, scratch
				}
				continue
			}
		default:
			cv, v = g.slotValue(s, i, &kn, &kb)
		}
		var text []byte
		switch {
		case v >= 0 && cv.c.kind == cN && s.kind == kindShift:
			if n.inTime(s.layout, s.res) {
				scratch = l.d.times.Render(scratch[:0], shifted(g.ts(i), s.layout, s.res, cv.int(v)), s.layout, s.res)
				if bytes.Contains(scratch, n.b) {
					return true, scratch
				}
			}
			continue
		case v >= 0 && cv.c.kind == cN:
			if n.skipNum[s.kind] {
				continue
			}
			if scratch = appendValue(scratch[:0], s, cv.int(v)); bytes.Contains(scratch, n.b) {
				return true, scratch
			}
			continue
		case v >= 0:
			text = cv.str(v)
		case more.left():
			text = more.next()
		default:
			return true, scratch // no value: AppendLine reports it
		}
		switch s.kind {
		case kindInner, kindInnerD:
			var hold bool
			if hold, scratch = l.aroundTime(n, append(scratch[:0], text...), s, g, i); hold {
				return true, scratch
			}
		case kindInnerW:
			// Times inside the text at their offsets: rendered, as
			// AppendLine renders them.
			var err error
			ts := time.UnixMicro(g.ts(i) / 1000)
			if scratch, err = appendInnerTimes(scratch[:0], text, s, g, i, ts, &l.d.times); err != nil || bytes.Contains(scratch, n.b) {
				return true, scratch
			}
		default:
			if bytes.Contains(text, n.b) {
				return true, scratch
			}
		}
	}
	return more.left(), scratch // items left: AppendLine reports it
}

// aroundTime reports whether the parameter text+T may hold n, T row i's
// timestamp put at s.offset into text (kinds u and v), text in
// scratch[:len]: n is inside text's two parts, or it overlaps T, and then
// it is inside T (its bytes are all a timestamp's), or it starts before T
// (a proper prefix of n ends the first part), or it ends after T (a proper
// suffix of n starts the second). When it may overlap T, the parameter is
// rendered to decide.
func (l *Lines) aroundTime(n *Needle, scratch []byte, s slot, g *group, i int) (bool, []byte) {
	if s.offset > len(scratch) {
		return true, scratch // AppendLine reports it
	}
	a, b := scratch[:s.offset], scratch[s.offset:]
	if bytes.Contains(a, n.b) || bytes.Contains(b, n.b) {
		return true, scratch
	}
	res := g.residue(i)
	over := n.inTime(s.layout, res)
	for k := 1; k < len(n.b) && !over; k++ {
		over = bytes.HasSuffix(a, n.b[:k]) || bytes.HasPrefix(b, n.b[k:])
	}
	if !over {
		return false, scratch
	}
	// a, T, b rendered after the text, then checked.
	end := len(scratch)
	scratch = append(scratch, a...)
	scratch = l.d.times.Render(scratch, time.UnixMicro(g.ts(i)/1000), s.layout, res)
	scratch = append(scratch, b...)
	return bytes.Contains(scratch[end:], n.b), scratch
}
