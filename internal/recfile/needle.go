package recfile

import (
	"bytes"
	"time"

	"github.com/quarrylake/quarry/internal/eventtime"
)

// A Needle is a byte string a search knows can only occur inside one
// parameter of a line (query.TemplatePlan.Needle): Lines.MayHold rules a
// row out by its parameters' values, without rendering its line. A Needle
// is one goroutine's (it remembers its last answer).
type Needle struct {
	b   []byte
	set eventtime.ByteSet
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
		var s eventtime.ByteSet
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
	slots, err := slotsIn(g, i, l.d.kinds)
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
