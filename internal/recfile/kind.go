package recfile

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/quarrylake/quarry/internal/eventtime"
)

// Parameter kinds, one letter per parameter in the kinds column; see the
// package doc.
const (
	kindString  = 's' // UTF-8 text in p<j> (or more)
	kindBytes   = 'b' // not UTF-8: raw bytes in b<j> (or more)
	kindInt     = 'i' // canonical decimal integer in n<j>
	kindDecimal = 'f' // followed by '1'..'9', the fraction digits; n<j> = unscaled value
	kindIPv4    = 'a' // dotted IPv4 address in n<j> as its 32-bit value
	kindHex     = 'x' // lowercase hex, no leading zero, 1-16 digits, in n<j> (bit pattern)
	kindTime    = 't' // followed by 'A'+layout: the record's ts rendered with ts_residue
	kindCovered = 'c' // part of the timestamp the previous 't' (or 'w') began: nothing stored
	kindInner   = 'u' // followed by 'A'+layout and '0'+offset: p<k> with the record's ts rendered at offset
	kindRight   = 'r' // first, not an item (records v4): the row's p<k> are numbered from its last s or u
	kindDigits  = 'd' // followed by '1'..'9', the runs (records v5): p<j> with each run a marker, the runs in n<j>
	kindInnerD  = 'v' // u's 'A'+layout and '0'+offset, then d's '1'..'9' (records v5): u whose p<k> is split as d's
	kindShift   = 'w' // followed by 'A'+layout and a residue (records v6): another time of the line, in n<j> as steps from ts (shifted)
	kindInnerW  = 'y' // u's 'A'+layout and '0'+offset, then '1'..'9' times k and k of 'A'+layout '0'+offset and a residue (records v6): u with k w's inside
)

// maxShifts is the most other times a y item holds.
const maxShifts = 9

// maxResidue is the longest residue a w or y item's time carries: written
// '0'+length, then its bytes, each printable ASCII.
const maxResidue = 9

// otherTime is one other time inside a y item's text: its layout, residue
// and offset in the parameter's text.
type otherTime struct {
	layout  eventtime.LayoutID
	residue []byte
	offset  int
}

// layoutAt reads the 'A'+layout '0'+offset pair at kinds[i:].
func layoutAt(kinds string, i int) (eventtime.LayoutID, int, error) {
	l := eventtime.LayoutID(kinds[i] - 'A')
	if kinds[i] < 'A' || !l.Valid() {
		return 0, 0, fmt.Errorf("kinds %q: time at %d with layout %q", kinds, i, kinds[i])
	}
	o := kinds[i+1]
	if o < '0' || o > '0'+maxInner {
		return 0, 0, fmt.Errorf("kinds %q: time at %d with offset %q", kinds, i, o)
	}
	return l, int(o - '0'), nil
}

// residueAt reads the '0'+length and residue bytes at kinds[i:] and returns
// the residue and the index after it.
func residueAt(kinds string, i int) ([]byte, int, error) {
	if i >= len(kinds) || kinds[i] < '0' || kinds[i] > '0'+maxResidue {
		return nil, i, fmt.Errorf("kinds %q: time at %d without its residue's length", kinds, i)
	}
	n := int(kinds[i] - '0')
	if i+1+n > len(kinds) {
		return nil, i, fmt.Errorf("kinds %q: residue at %d cut short", kinds, i)
	}
	r := kinds[i+1 : i+1+n]
	if !printable(r) {
		return nil, i, fmt.Errorf("kinds %q: residue at %d not printable", kinds, i)
	}
	if n == 0 {
		return nil, i + 1, nil
	}
	return []byte(r), i + 1 + n, nil
}

// printable reports whether s is printable ASCII.
func printable[S ~string | ~[]byte](s S) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// shifted is the instant a kind w item of n steps renders, in a row whose
// ts is ts nanoseconds: n steps of layout l (with residue) after the step
// ts falls in.
func shifted(ts int64, l eventtime.LayoutID, residue []byte, n int64) time.Time {
	step := eventtime.Step(l, residue)
	x := (floorDiv(ts, step) + n) * step
	sec := floorDiv(x, 1e9)
	return time.Unix(sec, x-sec*1e9)
}

// runMarker stands for a split digit run in the text of a d item's
// parameter (its skeleton); a parameter that contains it is never split.
const runMarker = '\x11'

// maxRuns is the most digit runs a parameter is split at (d1 to d9).
const maxRuns = 9

// maxInner is the largest offset of a timestamp inside a parameter (kind
// u): '0'+maxInner is '~'.
const maxInner = '~' - '0'

// slot is one decoded item of a kinds string.
type slot struct {
	kind   byte
	digits uint8              // kindDecimal
	layout eventtime.LayoutID // kindTime, kindInner, kindInnerD, kindShift
	res    []byte             // kindShift: the residue
	offset int                // kindInner, kindInnerD
	col    int                // kindString, kindInner, kindDigits, kindInnerD: the p<col> column (MaxSlots and past: none)
	runs   int                // kindDigits, kindInnerD: how many runs, in n<nrun> to n<nrun+runs-1>
	nrun   int                // kindDigits, kindInnerD: the n column of its first run; kindInnerW: of its first time
	shifts []otherTime        // kindInnerW: the other times, by offset
}

// parseKinds decodes a kinds string into slots, appended to dst. It checks
// the grammar: every letter is known, a decimal has 1-9 digits, a time has
// a valid layout, a covered slot follows a time or covered slot.
func parseKinds(dst []slot, kinds string) ([]slot, error) {
	start, right := len(dst), false
	if len(kinds) > 0 && kinds[0] == kindRight {
		kinds, right = kinds[1:], true
	}
	dst, err := parseItems(dst, kinds)
	if err != nil {
		return dst, err
	}
	// Number the p columns: from the left, or from the right after 'r'.
	// The runs of d items take the n columns after the row's numeric
	// parameters, in order.
	ns, nn := 0, 0
	for i := start; i < len(dst); i++ {
		switch dst[i].kind {
		case kindString, kindInner, kindDigits, kindInnerD:
			dst[i].col = ns
			ns++
		case kindInnerW:
			dst[i].col = ns
			ns++
			dst[i].nrun = nn
			nn += len(dst[i].shifts)
		case kindInt, kindDecimal, kindIPv4, kindHex, kindShift:
			nn++
		}
	}
	for i := start; i < len(dst); i++ {
		if k := dst[i].kind; k == kindDigits || k == kindInnerD {
			dst[i].nrun = nn
			nn += dst[i].runs
		}
	}
	if nn > MaxSlots {
		return dst, fmt.Errorf("kinds %q: %d numeric columns", kinds, nn)
	}
	if right {
		if !rightAligned(int32(ns)) {
			return dst, fmt.Errorf("kinds %q: numbered from the right with %d string parameters", kinds, ns)
		}
		for i := start; i < len(dst); i++ {
			if k := dst[i].kind; k == kindString || k == kindInner || k == kindDigits || k == kindInnerD || k == kindInnerW {
				dst[i].col = ns - 1 - dst[i].col
			}
		}
	}
	return dst, nil
}

// parseItems decodes the items of a kinds string (after any 'r').
func parseItems(dst []slot, kinds string) ([]slot, error) {
	for i := 0; i < len(kinds); i++ {
		c := kinds[i]
		switch c {
		case kindString, kindBytes, kindInt, kindIPv4, kindHex:
			dst = append(dst, slot{kind: c})
		case kindDecimal:
			if i+1 >= len(kinds) || kinds[i+1] < '1' || kinds[i+1] > '9' {
				return dst, fmt.Errorf("kinds %q: decimal at %d without digit count", kinds, i)
			}
			i++
			dst = append(dst, slot{kind: c, digits: kinds[i] - '0'})
		case kindDigits:
			if i+1 >= len(kinds) || kinds[i+1] < '1' || kinds[i+1] > '0'+maxRuns {
				return dst, fmt.Errorf("kinds %q: digit runs at %d without a count", kinds, i)
			}
			i++
			dst = append(dst, slot{kind: c, runs: int(kinds[i] - '0')})
		case kindTime, kindShift:
			if i+1 >= len(kinds) {
				return dst, fmt.Errorf("kinds %q: time at %d without layout", kinds, i)
			}
			i++
			l := eventtime.LayoutID(kinds[i] - 'A')
			if kinds[i] < 'A' || !l.Valid() {
				return dst, fmt.Errorf("kinds %q: time at %d with layout %q", kinds, i, kinds[i])
			}
			sl := slot{kind: c, layout: l}
			if c == kindShift {
				var err error
				if sl.res, i, err = residueAt(kinds, i+1); err != nil {
					return dst, err
				}
				i--
			}
			dst = append(dst, sl)
		case kindInnerW:
			// 'A'+layout '0'+offset '0'+k, then k times 'A'+layout
			// '0'+offset and a residue.
			if i+3 >= len(kinds) || kinds[i+3] < '1' || kinds[i+3] > '0'+maxShifts {
				return dst, fmt.Errorf("kinds %q: inner times at %d without a count", kinds, i)
			}
			sl := slot{kind: c}
			var err error
			if sl.layout, sl.offset, err = layoutAt(kinds, i+1); err != nil {
				return dst, err
			}
			k := int(kinds[i+3] - '0')
			sl.shifts = make([]otherTime, k)
			at := i + 4
			for x := range k {
				a := &sl.shifts[x]
				if at+1 >= len(kinds) {
					return dst, fmt.Errorf("kinds %q: inner times at %d cut short", kinds, i)
				}
				if a.layout, a.offset, err = layoutAt(kinds, at); err != nil {
					return dst, err
				}
				if a.residue, at, err = residueAt(kinds, at+2); err != nil {
					return dst, err
				}
				if a.offset == sl.offset || x > 0 && a.offset <= sl.shifts[x-1].offset {
					return dst, fmt.Errorf("kinds %q: inner times at %d not in order", kinds, i)
				}
			}
			i = at - 1
			dst = append(dst, sl)
		case kindInner, kindInnerD:
			if i+2 >= len(kinds) {
				return dst, fmt.Errorf("kinds %q: inner time at %d without layout and offset", kinds, i)
			}
			l := eventtime.LayoutID(kinds[i+1] - 'A')
			if kinds[i+1] < 'A' || !l.Valid() {
				return dst, fmt.Errorf("kinds %q: inner time at %d with layout %q", kinds, i, kinds[i+1])
			}
			o := kinds[i+2]
			if o < '0' || o > '0'+maxInner {
				return dst, fmt.Errorf("kinds %q: inner time at %d with offset %q", kinds, i, o)
			}
			i += 2
			runs := 0
			if c == kindInnerD {
				if i+1 >= len(kinds) || kinds[i+1] < '1' || kinds[i+1] > '0'+maxRuns {
					return dst, fmt.Errorf("kinds %q: digit runs at %d without a count", kinds, i)
				}
				i++
				runs = int(kinds[i] - '0')
			}
			dst = append(dst, slot{kind: c, layout: l, offset: int(o - '0'), runs: runs})
		case kindCovered:
			if len(dst) == 0 || (dst[len(dst)-1].kind != kindTime && dst[len(dst)-1].kind != kindShift && dst[len(dst)-1].kind != kindCovered) {
				return dst, fmt.Errorf("kinds %q: covered slot at %d not after a time", kinds, i)
			}
			dst = append(dst, slot{kind: c})
		default:
			return dst, fmt.Errorf("kinds %q: unknown kind %q at %d", kinds, c, i)
		}
	}
	return dst, nil
}

// classify returns the kind of a parameter that is not part of a timestamp
// and, for the numeric kinds, its value. Only canonical text is numeric: the
// value renders back to exactly p.
//
// One pass over p sorts its bytes into classes; the numeric kinds take
// disjoint sets of bytes ([-]digits: i; [-]digits, one '.': f; digits,
// three '.': a; digits and a-f: x), so at most one parser runs, and ASCII
// text skips the UTF-8 check. classifyRef (tests) is the parser chain this
// replaced; FuzzClassifyRef holds the two equal.
func classify(p string) (kind byte, digits uint8, v int64) {
	// Every numeric kind starts with a digit, '-' or a lowercase hex
	// letter.
	if len(p) == 0 || len(p) > 20 || !numStart[p[0]] {
		return textKind(p), 0, 0
	}
	var seen uint8
	dots := 0
	for i := 0; i < len(p); i++ {
		c := byteClass[p[i]]
		seen |= c
		if c == bcDot {
			dots++
		}
	}
	if p[0] == '-' {
		// A '-' anywhere else is not numeric: count only the first.
		seen &^= bcMinus
		for i := 1; i < len(p); i++ {
			if p[i] == '-' {
				seen |= bcMinus
			}
		}
	}
	var ok bool
	switch {
	case seen&^(bcDigit|bcDot|bcHex) != 0:
		// other bytes: text
	case seen == bcDigit:
		if v, ok = canonicalInt(p); ok {
			return kindInt, 0, v
		}
	case seen == bcDigit|bcDot && dots == 1:
		if v, digits, ok = canonicalDecimal(p); ok {
			return kindDecimal, digits, v
		}
	case seen == bcDigit|bcDot && dots == 3 && p[0] != '-':
		if v, ok = canonicalIPv4(p); ok {
			return kindIPv4, 0, v
		}
	case seen == bcDigit|bcHex && p[0] != '-':
		if v, ok = canonicalHex(p); ok {
			return kindHex, 0, v
		}
	}
	if seen&bcHigh == 0 {
		return kindString, 0, 0
	}
	return textKind(p), 0, 0
}

// textKind is the kind of a parameter that is not numeric.
func textKind(p string) byte {
	if !utf8.ValidString(p) {
		return kindBytes
	}
	return kindString
}

// Byte classes for classify.
const (
	bcDigit = 1 << iota
	bcDot
	bcHex   // a-f
	bcMinus // '-' past the first byte (see classify)
	bcOther // any other ASCII byte
	bcHigh  // >= 0x80
)

var byteClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= '0' && c <= '9':
			t[c] = bcDigit
		case c == '.':
			t[c] = bcDot
		case c >= 'a' && c <= 'f':
			t[c] = bcHex
		case c == '-':
			t[c] = bcMinus
		case c >= 0x80:
			t[c] = bcHigh
		default:
			t[c] = bcOther
		}
	}
	return t
}()

// numStart marks the bytes a numeric parameter (i, f, a, x) may start with.
var numStart = func() (t [256]bool) {
	for _, c := range []byte("-0123456789abcdef") {
		t[c] = true
	}
	return t
}()

// canonicalInt parses "0" or an optional "-" and digits without a leading
// zero that fit an int64 ("-0", "+5", "007" are not canonical).
func canonicalInt(p string) (int64, bool) {
	s := p
	if s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 19 || (s[0] == '0' && (len(s) > 1 || len(p) > 1)) {
		return 0, false
	}
	// 19 digits fit a uint64, so the sum cannot wrap.
	var u uint64
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		u = u*10 + uint64(d)
	}
	if len(s) != len(p) {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// canonicalDecimal parses [-]I.F where I is a canonical unsigned integer,
// F has 1-9 digits and the unscaled value fits an int64 and is not a
// negative zero.
func canonicalDecimal(p string) (int64, uint8, bool) {
	dot := -1
	for i := 0; i < len(p); i++ {
		if p[i] == '.' {
			dot = i
			break
		}
	}
	if dot <= 0 || dot == len(p)-1 || len(p)-dot-1 > 9 {
		return 0, 0, false
	}
	ip, fp := p[:dot], p[dot+1:]
	neg := ip[0] == '-'
	if neg {
		ip = ip[1:]
	}
	if len(ip) == 0 || (ip[0] == '0' && len(ip) > 1) || len(ip)+len(fp) > 18 {
		return 0, 0, false
	}
	var n int64
	for _, s := range [2]string{ip, fp} {
		for i := 0; i < len(s); i++ {
			d := s[i] - '0'
			if d > 9 {
				return 0, 0, false
			}
			n = n*10 + int64(d)
		}
	}
	if neg {
		if n == 0 {
			return 0, 0, false
		}
		n = -n
	}
	return n, uint8(len(fp)), true
}

// canonicalIPv4 parses a dotted quad of canonical octets 0-255.
func canonicalIPv4(p string) (int64, bool) {
	if len(p) < 7 || len(p) > 15 {
		return 0, false
	}
	var v uint32
	i := 0
	for oct := 0; oct < 4; oct++ {
		if oct > 0 {
			if i >= len(p) || p[i] != '.' {
				return 0, false
			}
			i++
		}
		start, n := i, 0
		for i < len(p) && p[i]-'0' <= 9 && i-start < 3 {
			n = n*10 + int(p[i]-'0')
			i++
		}
		if i == start || n > 255 || (p[start] == '0' && i-start > 1) {
			return 0, false
		}
		v = v<<8 | uint32(n)
	}
	return int64(v), i == len(p)
}

// canonicalHex parses 1-16 lowercase hex digits without a leading zero that
// contain at least one letter and one digit (all-digit text is an integer or
// a string, all-letter text such as "add" a word).
func canonicalHex(p string) (int64, bool) {
	if len(p) > 16 || p[0] == '0' {
		return 0, false
	}
	var v uint64
	letter, digit := false, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c-'0' <= 9:
			v = v<<4 | uint64(c-'0')
			digit = true
		case c-'a' < 6:
			v = v<<4 | uint64(c-'a'+10)
			letter = true
		default:
			return 0, false
		}
	}
	return int64(v), letter && digit
}

// appendValue renders a numeric slot's value back to its text.
func appendValue(dst []byte, s slot, v int64) []byte {
	switch s.kind {
	case kindInt:
		return strconv.AppendInt(dst, v, 10)
	case kindHex:
		return strconv.AppendUint(dst, uint64(v), 16)
	case kindIPv4:
		u := uint32(v)
		dst = strconv.AppendUint(dst, uint64(u>>24), 10)
		dst = append(dst, '.')
		dst = strconv.AppendUint(dst, uint64(u>>16&0xff), 10)
		dst = append(dst, '.')
		dst = strconv.AppendUint(dst, uint64(u>>8&0xff), 10)
		dst = append(dst, '.')
		return strconv.AppendUint(dst, uint64(u&0xff), 10)
	case kindDecimal:
		u := uint64(v)
		if v < 0 {
			dst = append(dst, '-')
			u = uint64(-v)
		}
		p := pow10[s.digits]
		dst = strconv.AppendUint(dst, u/p, 10)
		dst = append(dst, '.')
		f := u % p
		start := len(dst)
		dst = strconv.AppendUint(dst, f, 10)
		if pad := int(s.digits) - (len(dst) - start); pad > 0 {
			dst = append(dst, "000000000"[:pad]...)
			copy(dst[start+pad:], dst[start:len(dst)-pad])
			for i := start; i < start+pad; i++ {
				dst[i] = '0'
			}
		}
		return dst
	}
	return dst
}

var pow10 = [10]uint64{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000}

// splitRuns cuts p, UTF-8 text, at its digit runs that are canonical
// integers ("0", or [1-9][0-9]* fitting int64), at most most of them: it
// appends p with each such run replaced by runMarker to skel and the runs'
// values to runs, and returns how many it split. A run with a leading zero
// or too large stays in the text; p with runMarker in it, or without such
// a run, is not split (0, and skel as it was).
func splitRuns(skel []byte, runs []int64, p string, most int) ([]byte, []int64, int) {
	if most <= 0 {
		return skel, runs, 0
	}
	start, n := len(skel), 0
	last := 0 // p[last:] is not in skel yet
	for i := 0; i < len(p); {
		c := p[i]
		if c == runMarker {
			return skel[:start], runs[:len(runs)-n], 0
		}
		if c-'0' > 9 {
			i++
			continue
		}
		j := i + 1
		for j < len(p) && p[j]-'0' <= 9 {
			j++
		}
		if n < most && (j-i == 1 || (c != '0' && j-i <= 19)) {
			if v, ok := canonicalInt(p[i:j]); ok {
				if n == 0 {
					skel = slices.Grow(skel, len(p))
				}
				skel = append(skel, p[last:i]...)
				skel = append(skel, runMarker)
				runs = append(runs, v)
				last = j
				n++
			}
		}
		i = j
	}
	if n == 0 {
		return skel, runs, 0
	}
	return append(skel, p[last:]...), runs, n
}

// appendRuns renders a d item's skeleton with its runs in place of the
// markers; false when the markers are not exactly len(runs).
func appendRuns(dst, skel []byte, runs []int64) ([]byte, bool) {
	r := 0
	for {
		i := bytes.IndexByte(skel, runMarker)
		if i < 0 {
			break
		}
		if r == len(runs) {
			return dst, false
		}
		dst = append(dst, skel[:i]...)
		dst = strconv.AppendInt(dst, runs[r], 10)
		r++
		skel = skel[i+1:]
	}
	return append(dst, skel...), r == len(runs)
}
