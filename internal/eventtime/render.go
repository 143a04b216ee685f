package eventtime

import (
	"strconv"
	"time"

	"github.com/quarrylake/quarry/internal/byteset"
)

var pow10 = [10]int{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000}

// Render appends to dst the text of the timestamp t written in layout with
// residue, as Parser.Parse returned them. Only t's instant matters, not its
// Location: the wall clock shown is t's UTC time plus the offset the residue
// holds (zero when the residue is empty), so a caller may store t as UTC.
// For every match m and residue r of Parse(line),
// Render(nil, m.Time, m.Layout, r) equals line[m.Start:m.End] byte for byte.
// Render appends nothing for LayoutNone or an unknown layout.
func Render(dst []byte, t time.Time, layout LayoutID, residue []byte) []byte {
	if !layout.Valid() {
		return dst
	}
	v := decodeResidue(layout, residue)
	if v.nanos != 0 {
		t = t.Add(time.Duration(v.nanos))
	}
	switch layout {
	case LayoutEpochSec:
		dst = strconv.AppendInt(dst, t.Unix(), 10)
		return appendFrac(dst, t.Nanosecond(), &v)
	case LayoutEpochMilli:
		return strconv.AppendInt(dst, t.UnixMilli(), 10)
	case LayoutEpochMicro:
		return strconv.AppendInt(dst, t.UnixMicro(), 10)
	case LayoutEpochNano:
		return strconv.AppendInt(dst, t.UnixNano(), 10)
	}
	sec := t.Unix() + int64(v.off)
	days := floorDiv(sec, 86400)
	rem := int(sec - days*86400)
	y, mo, d := civilFromDays(days)
	hh, mi, ss := rem/3600, rem/60%60, rem%60
	ns := t.Nanosecond()
	switch layout {
	case LayoutISO8601, LayoutISO8601Sp:
		dst = appendDate(dst, y, mo, d, '-')
		dst = append(dst, v.dsep)
		for range v.gap {
			dst = append(dst, ' ')
		}
		dst = appendClock(dst, hh, mi, ss)
		dst = appendFrac(dst, ns, &v)
		dst = appendZone(dst, &v)
	case LayoutSyslog:
		dst = append(dst, monthNames[mo]...)
		dst = append(dst, ' ')
		dst = appendDay(dst, d, v.pad)
		dst = append(dst, ' ')
		dst = appendClock(dst, hh, mi, ss)
		dst = appendFrac(dst, ns, &v)
	case LayoutCtime:
		dst = append(dst, dayNames[(days%7+11)%7]...)
		dst = append(dst, ' ')
		dst = append(dst, monthNames[mo]...)
		dst = append(dst, ' ')
		dst = appendDay(dst, d, v.pad)
		dst = append(dst, ' ')
		dst = appendClock(dst, hh, mi, ss)
		dst = appendFrac(dst, ns, &v)
		dst = append(dst, ' ')
		dst = append4(dst, y)
	case LayoutYYMMDD:
		dst = append2(dst, mod100(y))
		dst = append2(dst, mo)
		dst = append2(dst, d)
		dst = append(dst, ' ')
		dst = append2(dst, hh)
		dst = append2(dst, mi)
		dst = append2(dst, ss)
	case LayoutMMDD, LayoutMMDotDD:
		dst = append2(dst, mo)
		if layout == LayoutMMDD {
			dst = append(dst, '-')
		} else {
			dst = append(dst, '.')
		}
		dst = append2(dst, d)
		dst = append(dst, ' ')
		dst = appendClock(dst, hh, mi, ss)
		dst = appendFrac(dst, ns, &v)
	case LayoutKlog:
		dst = append2(dst, mo)
		dst = append2(dst, d)
		dst = append(dst, ' ')
		dst = appendClock(dst, hh, mi, ss)
		dst = appendFrac(dst, ns, &v)
	case LayoutYYYYMMDDms:
		dst = append4(dst, y)
		dst = append2(dst, mo)
		dst = append2(dst, d)
		dst = append(dst, '-')
		dst = appendClock(dst, hh, mi, ss)
		dst = appendFrac(dst, ns, &v)
	case LayoutCLF:
		dst = append2(dst, d)
		dst = append(dst, '/')
		dst = append(dst, monthNames[mo]...)
		dst = append(dst, '/')
		dst = append4(dst, y)
		dst = append(dst, ':')
		dst = appendClock(dst, hh, mi, ss)
		dst = append(dst, ' ')
		dst = appendZone(dst, &v)
	case LayoutDB2:
		dst = appendDate(dst, y, mo, d, '-')
		dst = append(dst, '-')
		dst = appendClockSep(dst, hh, mi, ss, '.')
		dst = appendFrac(dst, ns, &v)
	case LayoutDotDate:
		dst = appendDate(dst, y, mo, d, '.')
	case LayoutYYSlash, LayoutYYYYSlash:
		if layout == LayoutYYSlash {
			dst = append2(dst, mod100(y))
			dst = append(dst, '/')
			dst = append2(dst, mo)
			dst = append(dst, '/')
			dst = append2(dst, d)
		} else {
			dst = appendDate(dst, y, mo, d, '/')
		}
		dst = append(dst, ' ')
		dst = appendClock(dst, hh, mi, ss)
		dst = appendFrac(dst, ns, &v)
	}
	return dst
}

func mod100(y int) int {
	y %= 100
	if y < 0 {
		y += 100
	}
	return y
}

func append2(dst []byte, n int) []byte {
	return append(dst, byte('0'+n/10%10), byte('0'+n%10))
}

func append4(dst []byte, n int) []byte {
	if n < 0 || n > 9999 {
		return strconv.AppendInt(dst, int64(n), 10)
	}
	return append(dst, byte('0'+n/1000), byte('0'+n/100%10), byte('0'+n/10%10), byte('0'+n%10))
}

func appendDay(dst []byte, d int, pad byte) []byte {
	if d >= 10 {
		return append2(dst, d)
	}
	switch pad {
	case ' ', '0':
		dst = append(dst, pad)
	}
	return append(dst, byte('0'+d))
}

// appendDate appends yyyy, mm and dd separated by sep.
func appendDate(dst []byte, y, mo, d int, sep byte) []byte {
	dst = append4(dst, y)
	dst = append(dst, sep)
	dst = append2(dst, mo)
	dst = append(dst, sep)
	return append2(dst, d)
}

func appendClock(dst []byte, hh, mi, ss int) []byte { return appendClockSep(dst, hh, mi, ss, ':') }

// appendClockSep appends hh, mm and ss separated by sep.
func appendClockSep(dst []byte, hh, mi, ss int, sep byte) []byte {
	dst = append2(dst, hh)
	dst = append(dst, sep)
	dst = append2(dst, mi)
	dst = append(dst, sep)
	return append2(dst, ss)
}

func appendFrac(dst []byte, ns int, v *variant) []byte {
	if v.digits == 0 || v.digits > 9 {
		return dst
	}
	dst = append(dst, v.fsep)
	f := ns / pow10[9-v.digits]
	for i := int(v.digits) - 1; i >= 0; i-- {
		dst = append(dst, byte('0'+f/pow10[i]%10))
	}
	return dst
}

func appendZone(dst []byte, v *variant) []byte {
	switch v.zone {
	case 'Z', 'z':
		return append(dst, v.zone)
	case ':', '4', '2':
	default:
		return dst
	}
	off := int(v.off)
	if off < 0 || v.negZero {
		dst = append(dst, '-')
	} else {
		dst = append(dst, '+')
	}
	if off < 0 {
		off = -off
	}
	dst = append2(dst, off/3600)
	switch v.zone {
	case ':':
		dst = append(dst, ':')
		dst = append2(dst, off/60%60)
	case '4':
		dst = append2(dst, off/60%60)
	}
	return dst
}

// renderBase holds every byte Render writes in a layout without names,
// whatever the residue says: digits, the layouts' separators, the zones'
// signs and letters; renderNames adds the letters of the month and day
// names, for the layouts that write them.
var renderBase, renderNames = func() (byteset.Set, byteset.Set) {
	var s byteset.Set
	for _, c := range []byte("0123456789 -+:/.,TZz") {
		s.Add(c)
	}
	n := s
	for _, names := range [][]string{monthNames[:], dayNames[:]} {
		for _, name := range names {
			for i := 0; i < len(name); i++ {
				n.Add(name[i])
			}
		}
	}
	return s, n
}()

// MaxLetters is the longest run of ASCII letters Render writes: a month
// or day name (the separators, zone letters and any a residue gives stand
// between digits, spaces or slashes).
const MaxLetters = 3

// Bytes is a set that holds every byte Render(dst, t, layout, residue)
// writes, for any instant t of a year from 0 to 9999: the bytes of the
// layout, and the separators and padding the residue may give (a search
// rules a timestamp out for a term with a byte it lacks, without rendering
// it).
func Bytes(layout LayoutID, residue []byte) byteset.Set {
	s := renderBase
	switch layout {
	case LayoutSyslog, LayoutCtime, LayoutCLF:
		s = renderNames
	}
	if !layout.Valid() {
		return s
	}
	v := decodeResidue(layout, residue)
	s.Add(v.fsep)
	s.Add(v.dsep)
	s.Add(v.pad)
	return s
}

// minLens is, by layout, the fewest bytes Render writes for an instant of
// a year from 0 to 9999, whatever the residue (no fraction, no zone, a
// day of one digit, no gap); an epoch may be one digit.
var minLens = [numLayouts]int{
	LayoutISO8601: 19, LayoutISO8601Sp: 19, LayoutSyslog: 14, LayoutCtime: 23, LayoutYYMMDD: 13,
	LayoutMMDD: 14, LayoutYYYYMMDDms: 17, LayoutMMDotDD: 14, LayoutCLF: 21, LayoutYYSlash: 17,
	LayoutYYYYSlash: 19, LayoutEpochSec: 1, LayoutEpochMilli: 1, LayoutEpochMicro: 1, LayoutEpochNano: 1,
	LayoutDB2: 19, LayoutDotDate: 10, LayoutKlog: 13,
}

// MinLen is the fewest bytes Render writes in layout for an instant of a
// year from 0 to 9999, whatever the residue (0 for a layout it does not
// render): a term shorter than it cannot hold a whole timestamp.
func MinLen(layout LayoutID) int {
	if !layout.Valid() {
		return 0
	}
	return minLens[layout]
}
