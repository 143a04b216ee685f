package eventtime

import (
	"fmt"
	"time"
)

// Where auto (or a named layout) looks for a timestamp; see the package doc.
const (
	// Window is how far into the line a timestamp may start, in bytes.
	Window = 80
	// MaxFields is how many blank-separated fields a timestamp may start in.
	MaxFields = 5
	// yearSlack is how far past the reference a year-less time may lie
	// before it is taken to be of the year before (clock skew, zones).
	yearSlack = 2 * 24 * 3600
	// halfYear bounds the distance to the previous line's time.
	halfYear = 183 * 24 * 3600
)

// Plausible epoch range: [2000-01-01, 2100-01-01) UTC.
const (
	epochMin = 946684800
	epochMax = 4102444800
)

// Match is a timestamp found in a line.
type Match struct {
	// Time is the instant. Its Location is Config.Zone for layouts without
	// a zone, the zone written in the text otherwise (UTC for epochs).
	Time time.Time
	// Start and End delimit the timestamp's bytes: line[Start:End].
	Start, End int
	// Layout is the timestamp's shape; with Time and the residue it
	// renders the text back exactly (Render).
	Layout LayoutID
	// YearInferred is set when the text carries no year and the year came
	// from the previous line's time or the reference time.
	YearInferred bool
}

// Parser finds timestamps in lines. It keeps the previous match's time for
// year inference and a scratch buffer for the residue, so it is not safe for
// concurrent use: use one per line source.
type Parser struct {
	allow   uint32
	loc     *time.Location
	utc     bool
	refSec  int64
	prevSec int64
	hasPrev bool
	res     [24]byte
	zones   [4]fixedZone
	nzone   int
}

type fixedZone struct {
	off int32
	loc *time.Location
}

// New makes a Parser for cfg. The reference time for year inference is
// time.Now until SetReference changes it.
func New(cfg Config) (*Parser, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("event time: %w", err)
	}
	mask, _ := modeMask(cfg.Mode)
	loc, _ := loadZone(cfg.Zone)
	p := &Parser{allow: mask, loc: loc, utc: loc == time.UTC}
	p.SetReference(time.Now())
	return p, nil
}

// SetReference sets the time a line without a year is placed near when no
// previous line had a timestamp, typically the time the line was read.
func (p *Parser) SetReference(t time.Time) { p.refSec = t.Unix() }

// Reset forgets the previous line's time, e.g. at the start of a new file.
func (p *Parser) Reset() { p.hasPrev = false }

// fields is what a scanner read.
type fields struct {
	layout                 LayoutID
	year, month, day       int
	hour, min, sec, nsec   int
	noYear, zoned, isEpoch bool
	epoch                  int64 // seconds, when isEpoch
	v                      variant
}

// class of a byte: what may come before a timestamp and what it may start with.
const (
	clsBlank = 1 << iota // space, tab
	clsDelim             // a byte after which a timestamp may start
	clsDigit
	clsUpper
	clsAlnum
)

var class [256]uint8

func init() {
	class[' '] = clsBlank | clsDelim
	class['\t'] = clsBlank | clsDelim
	for _, c := range []byte("[(<>|\"'=,") {
		class[c] = clsDelim
	}
	for c := '0'; c <= '9'; c++ {
		class[c] = clsDigit | clsAlnum
	}
	for c := 'A'; c <= 'Z'; c++ {
		class[c] = clsUpper | clsAlnum
	}
	for c := 'a'; c <= 'z'; c++ {
		class[c] = clsAlnum
	}
}

// Parse finds the first timestamp that starts within Window bytes and
// MaxFields fields of line and is preceded by the line start, a blank or one
// of [(<>|"'=, and followed by the line end or a byte that is not a letter
// or digit. It returns the match and the residue Render needs to write the
// text back; the residue is empty in each layout's common case and is valid
// until the next call. ok is false when there is no timestamp.
func (p *Parser) Parse(line []byte) (m Match, residue []byte, ok bool) {
	if p.allow == 0 {
		return Match{}, nil, false
	}
	n := min(len(line), Window)
	var f fields
	i := 0
	for field := 0; field < MaxFields; field++ {
		for i < n && class[line[i]]&clsBlank != 0 {
			i++
		}
		start := i
		cand := true // at the field's start or after a delimiter
		for ; i < n; i++ {
			c := class[line[i]]
			if c&clsBlank != 0 {
				break
			}
			if !cand || c&(clsDigit|clsUpper) == 0 {
				// skip to the next blank or delimiter
				for c&(clsBlank|clsDelim) == 0 && i+1 < n {
					i++
					c = class[line[i]]
				}
				if c&clsBlank != 0 {
					break
				}
				cand = c&clsDelim != 0
				continue
			}
			cand = false
			f.noYear, f.zoned, f.isEpoch, f.nsec = false, false, false, 0
			var end int
			at := i // where the timestamp's text starts
			switch {
			case c&clsDigit != 0:
				end = p.scanDigits(line, i, i == start || line[i-1] == '[', &f)
			case i == start && isKlogSeverity(line[i]) && i+1 < n && isDigit(line[i+1]):
				// glog/klog: the severity letter, then mmdd hh:mm:ss.uuuuuu
				end, at = scanKlog(line, i+1, &f), i+1
			default:
				end = p.scanName(line, i, &f)
			}
			if end < 0 || end < len(line) && class[line[end]]&clsAlnum != 0 || p.allow&(1<<f.layout) == 0 {
				continue
			}
			t, ok := p.instant(&f)
			if !ok {
				continue
			}
			p.prevSec, p.hasPrev = t.Unix(), true
			r := appendResidue(p.res[:0], f.layout, &f.v)
			return Match{Time: t, Start: at, End: end, Layout: f.layout, YearInferred: f.noYear}, r, true
		}
		if i >= n {
			break
		}
	}
	return Match{}, nil, false
}

func isDigit(c byte) bool { return c-'0' < 10 }

// num2 reads two digits at b[i:].
func num2(b []byte, i int) (int, bool) {
	if i+2 > len(b) || !isDigit(b[i]) || !isDigit(b[i+1]) {
		return 0, false
	}
	return int(b[i]-'0')*10 + int(b[i+1]-'0'), true
}

func num4(b []byte, i int) (int, bool) {
	h, ok1 := num2(b, i)
	l, ok2 := num2(b, i+2)
	return h*100 + l, ok1 && ok2
}

// clock reads hh:mm:ss at b[i:] and returns the index after it, or -1.
func clock(b []byte, i int, f *fields) int { return clockSep(b, i, ':', f) }

// clockSep reads hh, mm and ss separated by sep at b[i:].
func clockSep(b []byte, i int, sep byte, f *fields) int {
	if i+8 > len(b) || b[i+2] != sep || b[i+5] != sep {
		return -1
	}
	h, ok1 := num2(b, i)
	m, ok2 := num2(b, i+3)
	s, ok3 := num2(b, i+6)
	if !ok1 || !ok2 || !ok3 {
		return -1
	}
	f.hour, f.min, f.sec = h, m, s
	return i + 8
}

// frac reads an optional fraction of a second: sep1 or sep2 then 1..9
// digits. It returns the index after it, or -1 for more than 9 digits.
func frac(b []byte, i int, sep1, sep2 byte, f *fields) int {
	if i+1 >= len(b) || (b[i] != sep1 && b[i] != sep2) || !isDigit(b[i+1]) {
		return i
	}
	f.v.fsep = b[i]
	j := i + 1
	ns := 0
	for j < len(b) && isDigit(b[j]) {
		if j-i > 9 {
			return -1
		}
		ns = ns*10 + int(b[j]-'0')
		j++
	}
	d := j - i - 1
	f.v.digits = uint8(d)
	f.nsec = ns * pow10[9-d]
	return j
}

// day reads a day of month at b[i:] written as "dd", " d" or "d" (followed
// by a blank) and records the padding.
func day(b []byte, i int, f *fields, deflt byte) int {
	if i+2 > len(b) {
		return -1
	}
	switch {
	case b[i] == ' ' && isDigit(b[i+1]):
		f.day, f.v.pad = int(b[i+1]-'0'), ' '
	case isDigit(b[i]) && isDigit(b[i+1]):
		f.day, f.v.pad = int(b[i]-'0')*10+int(b[i+1]-'0'), deflt
		if b[i] == '0' {
			f.v.pad = '0'
		}
	case isDigit(b[i]) && b[i+1] == ' ':
		f.day, f.v.pad = int(b[i]-'0'), '-'
		return i + 1
	default:
		return -1
	}
	return i + 2
}

// scanDigits tries the layouts that start with a digit. wholeField is set
// when the digits start a field (after the line start, a blank or '['), the
// only place an epoch is taken.
func (p *Parser) scanDigits(b []byte, i int, wholeField bool, f *fields) int {
	j := i
	for j < len(b) && isDigit(b[j]) {
		j++
	}
	nd := j - i
	var next byte
	if j < len(b) {
		next = b[j]
	}
	f.v = variant{fsep: '.'}
	switch {
	case nd == 4 && next == '-': // 2006-01-02[T ]15:04:05
		return p.scanISO(b, i, f)
	case nd == 4 && next == '.': // 2006.01.02
		f.layout = LayoutDotDate
		f.year, _ = num4(b, i)
		var ok1, ok2 bool
		f.month, ok1 = num2(b, j+1)
		f.day, ok2 = num2(b, j+4)
		if !ok1 || !ok2 || b[j+3] != '.' {
			return -1
		}
		f.hour, f.min, f.sec = 0, 0, 0
		return j + 6
	case nd == 4 && next == '/': // 2006/01/02 15:04:05
		f.layout = LayoutYYYYSlash
		f.year, _ = num4(b, i)
		return slashDate(b, j, f)
	case nd == 8 && next == '-': // 20060102-15:04:05:000
		f.layout = LayoutYYYYMMDDms
		f.year, _ = num4(b, i)
		f.month, _ = num2(b, i+4)
		f.day, _ = num2(b, i+6)
		k := clock(b, j+1, f)
		if k < 0 {
			return -1
		}
		f.v.fsep, f.v.digits = ':', 0
		return frac(b, k, ':', ':', f)
	case nd == 6 && next == ' ': // 060102 150405
		f.layout = LayoutYYMMDD
		yy, _ := num2(b, i)
		f.year = century(yy)
		f.month, _ = num2(b, i+2)
		f.day, _ = num2(b, i+4)
		if j+7 > len(b) {
			return -1
		}
		var ok1, ok2, ok3 bool
		f.hour, ok1 = num2(b, j+1)
		f.min, ok2 = num2(b, j+3)
		f.sec, ok3 = num2(b, j+5)
		if !ok1 || !ok2 || !ok3 {
			return -1
		}
		return j + 7
	case nd == 2 && (next == '-' || next == '.'): // 01-02 15:04:05.000, 01.02 15:04:05
		f.layout = LayoutMMDotDD
		if next == '-' {
			f.layout = LayoutMMDD
		}
		f.noYear = true
		f.month, _ = num2(b, i)
		var ok bool
		if f.day, ok = num2(b, j+1); !ok || j+3 >= len(b) || b[j+3] != ' ' {
			return -1
		}
		k := clock(b, j+4, f)
		if k < 0 {
			return -1
		}
		return frac(b, k, '.', '.', f)
	case nd == 2 && next == '/':
		if j+1 < len(b) && isDigit(b[j+1]) { // 06/01/02 15:04:05
			f.layout = LayoutYYSlash
			yy, _ := num2(b, i)
			f.year = century(yy)
			return slashDate(b, j, f)
		}
		return scanCLF(b, i, f) // 02/Jan/2006:15:04:05 -0700
	case nd >= 9 && nd <= 19 && wholeField:
		return scanEpoch(b, i, j, f)
	}
	return -1
}

// isKlogSeverity reports whether c is a glog/klog severity letter: Info,
// Warning, Error, Fatal.
func isKlogSeverity(c byte) bool { return c == 'I' || c == 'W' || c == 'E' || c == 'F' }

// scanKlog reads glog/klog's mmdd hh:mm:ss[.uuuuuu] at b[i:], after the
// severity letter ("I1207 23:10:53.845933    1488 server.go:123] ..."):
// four digits and a space, the first field of a line (the letter starts it).
func scanKlog(b []byte, i int, f *fields) int {
	if i+5 > len(b) || b[i+4] != ' ' {
		return -1
	}
	var ok1, ok2 bool
	f.month, ok1 = num2(b, i)
	f.day, ok2 = num2(b, i+2)
	if !ok1 || !ok2 {
		return -1
	}
	f.layout, f.noYear, f.v = LayoutKlog, true, variant{fsep: '.'}
	k := clock(b, i+5, f)
	if k < 0 {
		return -1
	}
	return frac(b, k, '.', '.', f)
}

// century maps a two-digit year as Go's time package does.
func century(yy int) int {
	if yy < 69 {
		return 2000 + yy
	}
	return 1900 + yy
}

// slashDate reads /01/02 15:04:05[.000] at b[j:].
func slashDate(b []byte, j int, f *fields) int {
	var ok1, ok2 bool
	if j+7 > len(b) || b[j+3] != '/' || b[j+6] != ' ' {
		return -1
	}
	f.month, ok1 = num2(b, j+1)
	f.day, ok2 = num2(b, j+4)
	if !ok1 || !ok2 {
		return -1
	}
	k := clock(b, j+7, f)
	if k < 0 {
		return -1
	}
	return frac(b, k, '.', ',', f)
}

func (p *Parser) scanISO(b []byte, i int, f *fields) int {
	if i+19 > len(b) || b[i+7] != '-' {
		return -1
	}
	f.year, _ = num4(b, i)
	var ok1, ok2 bool
	f.month, ok1 = num2(b, i+5)
	f.day, ok2 = num2(b, i+8)
	if !ok1 || !ok2 {
		return -1
	}
	switch b[i+10] {
	case 'T', 't':
		f.layout = LayoutISO8601
	case ' ':
		f.layout = LayoutISO8601Sp
	case '-': // 2006-01-02-15.04.05.000000
		f.layout = LayoutDB2
		k := clockSep(b, i+11, '.', f)
		if k < 0 {
			return -1
		}
		f.v.digits = 0
		return frac(b, k, '.', '.', f)
	default:
		return -1
	}
	f.v.dsep = b[i+10]
	c := i + 11
	f.v.gap = 0
	if f.layout == LayoutISO8601Sp {
		// More blanks may pad the time (apt's "Start-Date: 2025-06-24  14:36:25").
		for c < len(b) && b[c] == ' ' && f.v.gap < maxGap {
			f.v.gap++
			c++
		}
	}
	k := clock(b, c, f)
	if k < 0 {
		return -1
	}
	f.v.fsep = defaults[f.layout].fsep
	if k = frac(b, k, '.', ',', f); k < 0 {
		return -1
	}
	f.v.zone = 0
	if k >= len(b) {
		return k
	}
	switch c := b[k]; c {
	case 'Z', 'z':
		f.zoned, f.v.zone = true, c
		return k + 1
	case '+', '-':
		h, ok := num2(b, k+1)
		if !ok || h > 23 {
			return k // not a zone: let the boundary check decide
		}
		off, e, style := h*3600, k+3, byte('2')
		if e < len(b) && b[e] == ':' {
			m, ok := num2(b, e+1)
			if !ok || m > 59 {
				return -1
			}
			off, e, style = off+m*60, e+3, ':'
		} else if m, ok := num2(b, e); ok {
			if m > 59 {
				return -1
			}
			off, e, style = off+m*60, e+2, '4'
		}
		if c == '-' {
			off = -off
			f.v.negZero = off == 0
		}
		f.zoned, f.v.zone, f.v.off = true, style, int32(off)
		return e
	}
	return k
}

// scanCLF reads 02/Jan/2006:15:04:05 -0700 at b[i:].
func scanCLF(b []byte, i int, f *fields) int {
	if i+26 > len(b) || b[i+6] != '/' || b[i+11] != ':' || b[i+20] != ' ' {
		return -1
	}
	f.layout = LayoutCLF
	f.day, _ = num2(b, i)
	f.month = monthAt(b, i+3)
	var ok bool
	if f.year, ok = num4(b, i+7); !ok || f.month == 0 {
		return -1
	}
	if clock(b, i+12, f) < 0 {
		return -1
	}
	c := b[i+21]
	h, ok1 := num2(b, i+22)
	m, ok2 := num2(b, i+24)
	if c != '+' && c != '-' || !ok1 || !ok2 || h > 23 || m > 59 {
		return -1
	}
	off := h*3600 + m*60
	if c == '-' {
		off = -off
		f.v.negZero = off == 0
	}
	f.zoned, f.v.zone, f.v.off = true, '4', int32(off)
	return i + 26
}

// scanEpoch reads a whole-field epoch count b[i:j] in the plausible range,
// with an optional fraction for seconds.
func scanEpoch(b []byte, i, j int, f *fields) int {
	var x int64
	if b[i] == '0' {
		return -1
	}
	for k := i; k < j; k++ {
		x = x*10 + int64(b[k]-'0')
	}
	nd := j - i
	f.isEpoch, f.zoned = true, true
	switch {
	case nd <= 10:
		f.layout = LayoutEpochSec
		f.epoch = x
		if j = frac(b, j, '.', '.', f); j < 0 {
			return -1
		}
	case nd >= 12 && nd <= 13:
		f.layout = LayoutEpochMilli
		f.epoch, f.nsec = x/1e3, int(x%1e3)*1e6
	case nd >= 15 && nd <= 16:
		f.layout = LayoutEpochMicro
		f.epoch, f.nsec = x/1e6, int(x%1e6)*1e3
	case nd >= 18:
		f.layout = LayoutEpochNano
		f.epoch, f.nsec = x/1e9, int(x%1e9)
	default:
		return -1
	}
	if f.epoch < epochMin || f.epoch >= epochMax {
		return -1
	}
	if j < len(b) {
		switch b[j] {
		case ' ', '\t', ']', ':', ',', ';', '|':
		default:
			return -1
		}
	}
	return j
}

// scanName tries the layouts that start with a month or weekday name.
func (p *Parser) scanName(b []byte, i int, f *fields) int {
	if i+4 > len(b) || b[i+3] != ' ' {
		return -1
	}
	f.v = variant{fsep: '.'}
	if mo := monthAt(b, i); mo != 0 { // Jan _2 15:04:05
		if i >= 4 && b[i-1] == ' ' && weekdayAt(b, i-4) != 0 {
			return -1 // the tail of a ctime time that did not parse
		}
		f.layout, f.month, f.noYear = LayoutSyslog, mo, true
		k := day(b, i+4, f, ' ')
		if k < 0 || k >= len(b) || b[k] != ' ' {
			return -1
		}
		if k = clock(b, k+1, f); k < 0 {
			return -1
		}
		return frac(b, k, '.', '.', f)
	}
	wd := weekdayAt(b, i) // Mon Jan 02 15:04:05 2006
	if wd == 0 {
		return -1
	}
	f.layout = LayoutCtime
	if f.month = monthAt(b, i+4); f.month == 0 || i+8 > len(b) || b[i+7] != ' ' {
		return -1
	}
	k := day(b, i+8, f, '0')
	if k < 0 || k >= len(b) || b[k] != ' ' {
		return -1
	}
	if k = clock(b, k+1, f); k < 0 {
		return -1
	}
	if k = frac(b, k, '.', '.', f); k < 0 || k+5 > len(b) || b[k] != ' ' {
		return -1
	}
	var ok bool
	if f.year, ok = num4(b, k+1); !ok {
		return -1
	}
	if f.month < 1 || f.month > 12 || f.day < 1 || f.day > daysIn(f.year, f.month) {
		return -1
	}
	if int((daysFromCivil(f.year, f.month, f.day)%7+11)%7) != wd-1 {
		return -1 // the weekday contradicts the date
	}
	return k + 5
}

// instant checks the fields and turns them into a time, inferring the year.
func (p *Parser) instant(f *fields) (time.Time, bool) {
	if f.isEpoch {
		return time.Unix(f.epoch, int64(f.nsec)).UTC(), true
	}
	if f.month < 1 || f.month > 12 || f.day < 1 || f.hour > 23 || f.min > 59 || f.sec > 59 {
		return time.Time{}, false
	}
	if f.noYear {
		p.inferYear(f)
	}
	if f.day > daysIn(f.year, f.month) {
		return time.Time{}, false
	}
	wall := p.wall(f, f.year)
	if f.zoned {
		return time.Unix(wall-int64(f.v.off), int64(f.nsec)).In(p.fixed(f.v.off)), true
	}
	off := p.offset(f, f.year)
	f.v.off = int32(off)
	return time.Unix(wall-off, int64(f.nsec)).In(p.loc), true
}

// wall is the wall clock of f in year y as seconds since the epoch.
func (p *Parser) wall(f *fields, y int) int64 {
	d := f.day
	if dm := daysIn(y, f.month); d > dm {
		d = dm // only to compare candidate years
	}
	return daysFromCivil(y, f.month, d)*86400 + int64(f.hour*3600+f.min*60+f.sec)
}

// offset is Config.Zone's offset at the wall clock of f in year y.
func (p *Parser) offset(f *fields, y int) int64 {
	if p.utc {
		return 0
	}
	_, off := time.Date(y, time.Month(f.month), f.day, f.hour, f.min, f.sec, 0, p.loc).Zone()
	return int64(off)
}

// inferYear picks the year of a year-less time: the one nearest the
// previous line's time, or else the latest one not more than yearSlack
// after the reference time (a December line read in January is of last year).
func (p *Parser) inferYear(f *fields) {
	at := func(y int) int64 {
		if f.zoned {
			return p.wall(f, y) - int64(f.v.off)
		}
		return p.wall(f, y) - p.offset(f, y)
	}
	if p.hasPrev {
		y, _, _ := civilFromDays(floorDiv(p.prevSec, 86400))
		d := at(y) - p.prevSec
		switch {
		case d > halfYear:
			y--
		case d < -halfYear:
			y++
		}
		f.year = y
		return
	}
	y, _, _ := civilFromDays(floorDiv(p.refSec, 86400))
	switch {
	case at(y+1) <= p.refSec+yearSlack:
		y++
	case at(y) > p.refSec+yearSlack:
		y--
	}
	f.year = y
}

// fixed is a zone of a fixed offset, cached so that parsing does not allocate.
func (p *Parser) fixed(off int32) *time.Location {
	if off == 0 {
		return time.UTC
	}
	for i := range p.zones {
		if p.zones[i].loc != nil && p.zones[i].off == off {
			return p.zones[i].loc
		}
	}
	z := &p.zones[p.nzone%len(p.zones)]
	p.nzone++
	z.off, z.loc = off, time.FixedZone("", int(off))
	return z.loc
}

// ParseItem reads a timestamp at the start of text and returns it, its
// layout, the residue Render needs (valid until the next call) and where it
// ends: in any layout, a date alone (yyyy.mm.dd) too, or in layout only
// when that is valid. As for Parse, it must be followed by the end of text
// or a byte that is not a letter or digit. A text without a year takes the
// year that puts it nearest near (Unix seconds). It is for a timestamp that
// is a part of a line other than its start, such as a second copy of the
// line's time (records' kinds w and y); it changes the year inference of
// the lines Parse reads after it, so use a Parser of its own.
func (p *Parser) ParseItem(text []byte, near int64, only LayoutID) (t time.Time, layout LayoutID, residue []byte, end int, ok bool) {
	allow := p.allow
	p.allow = allLayouts
	if only.Valid() {
		p.allow = 1 << only
	}
	p.prevSec, p.hasPrev = near, true
	m, res, ok := p.Parse(text)
	p.allow = allow
	if !ok || m.Start != 0 {
		return time.Time{}, LayoutNone, nil, 0, false
	}
	return m.Time, m.Layout, res, m.End, true
}
