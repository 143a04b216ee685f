package eventtime

import "strconv"

// LayoutID names the shape of a timestamp's text. The values are stored in
// the lake: never renumber, never reuse; add new layouts at the end.
type LayoutID uint8

// Layouts; see the table in the package doc.
const (
	LayoutNone       LayoutID = 0  // no timestamp
	LayoutISO8601    LayoutID = 1  // 2006-01-02T15:04:05Z (RFC 3339)
	LayoutISO8601Sp  LayoutID = 2  // 2006-01-02 15:04:05,000
	LayoutSyslog     LayoutID = 3  // Jan _2 15:04:05
	LayoutCtime      LayoutID = 4  // Mon Jan 02 15:04:05 2006
	LayoutYYMMDD     LayoutID = 5  // 060102 150405
	LayoutMMDD       LayoutID = 6  // 01-02 15:04:05.000
	LayoutYYYYMMDDms LayoutID = 7  // 20060102-15:04:05:000
	LayoutMMDotDD    LayoutID = 8  // 01.02 15:04:05
	LayoutCLF        LayoutID = 9  // 02/Jan/2006:15:04:05 -0700
	LayoutYYSlash    LayoutID = 10 // 06/01/02 15:04:05
	LayoutYYYYSlash  LayoutID = 11 // 2006/01/02 15:04:05
	LayoutEpochSec   LayoutID = 12 // 1117838570
	LayoutEpochMilli LayoutID = 13 // 1117838570123
	LayoutEpochMicro LayoutID = 14 // 1117838570123456
	LayoutEpochNano  LayoutID = 15 // 1117838570123456789
	LayoutDB2        LayoutID = 16 // 2006-01-02-15.04.05.000000
	LayoutDotDate    LayoutID = 17 // 2006.01.02 (a date alone; not in auto)
	LayoutKlog       LayoutID = 18 // 0102 15:04:05.000000 (glog/klog, after its severity letter)
	numLayouts                = 19 // one past the last id
)

var layoutNames = [numLayouts]string{
	"none", "iso8601", "iso8601-space", "syslog", "ctime", "yymmdd", "mmdd",
	"yyyymmdd-ms", "mm.dd", "clf", "yy/mm/dd", "yyyy/mm/dd",
	"epoch", "epoch-ms", "epoch-us", "epoch-ns", "db2", "yyyy.mm.dd", "klog",
}

// Valid reports whether l is a layout this package can render (not None).
func (l LayoutID) Valid() bool { return l > LayoutNone && l < numLayouts }

// String is the layout's name, the one Config.Mode accepts.
func (l LayoutID) String() string {
	if l < numLayouts {
		return layoutNames[l]
	}
	return "layout(" + strconv.Itoa(int(l)) + ")"
}

// variant is what a layout leaves open: the residue encodes the fields of a
// variant that differ from its layout's default.
type variant struct {
	off     int32 // seconds east of UTC of the wall clock the text shows
	negZero bool  // offset written as -00:00 / -0000
	zone    byte  // zone text: 0 none, 'Z', 'z', ':' ±hh:mm, '4' ±hhmm, '2' ±hh
	digits  uint8 // fraction digits, 0..9
	fsep    byte  // fraction separator: '.', ',' or ':'
	dsep    byte  // ISO date/time separator: 'T', 't' or ' '
	gap     uint8 // iso8601-space: blanks after the first one, 0..maxGap
	pad     byte  // day of month below 10: ' ' space-padded, '0' zero-padded, '-' one digit
	nanos   int16 // nanoseconds the stored time lacks below its microsecond (AppendNanos), 0..999
}

// defaults holds each layout's common case, which has an empty residue.
var defaults = [numLayouts]variant{
	LayoutISO8601:    {zone: 'Z', fsep: '.', dsep: 'T'},
	LayoutISO8601Sp:  {digits: 3, fsep: ',', dsep: ' '},
	LayoutSyslog:     {fsep: '.', pad: ' '},
	LayoutCtime:      {fsep: '.', pad: '0'},
	LayoutYYMMDD:     {fsep: '.'},
	LayoutMMDD:       {digits: 3, fsep: '.'},
	LayoutYYYYMMDDms: {digits: 3, fsep: ':'},
	LayoutMMDotDD:    {fsep: '.'},
	LayoutCLF:        {zone: '4', fsep: '.'},
	LayoutYYSlash:    {fsep: '.'},
	LayoutYYYYSlash:  {fsep: '.'},
	LayoutEpochSec:   {fsep: '.'},
	LayoutEpochMilli: {fsep: '.'},
	LayoutEpochMicro: {fsep: '.'},
	LayoutEpochNano:  {fsep: '.'},
	LayoutDB2:        {digits: 6, fsep: '.'},
	LayoutDotDate:    {fsep: '.'},
	LayoutKlog:       {digits: 6, fsep: '.'},
}

// Step is the resolution of a timestamp's text in layout l with residue,
// in nanoseconds: its last field (a day for a date alone, a second, or the
// fraction's last digit). Two instants in one step render the same text;
// 0 for an invalid layout.
func Step(l LayoutID, residue []byte) int64 {
	switch l {
	case LayoutDotDate:
		return 86400 * 1e9
	case LayoutEpochMilli:
		return 1e6
	case LayoutEpochMicro:
		return 1e3
	case LayoutEpochNano:
		return 1
	}
	if !l.Valid() {
		return 0
	}
	return int64(pow10[9-decodeResidue(l, residue).digits])
}

// Residue item tags. A residue is a sequence of items, each a tag byte and
// its value; an item is present only when its field differs from the
// layout's default.
const (
	tagOffset  = 'o' // zigzag varint: seconds east of UTC
	tagNegZero = 'n' // no value: a zero offset written with '-'
	tagZone    = 'z' // one byte: zone text style
	tagDigits  = 'f' // one byte '0'..'9': fraction digits
	tagFracSep = 's' // one byte: fraction separator
	tagDateSep = 'd' // one byte: date/time separator
	tagPad     = 'p' // one byte: day padding
	tagGap     = 'w' // one byte '1'..'7': more blanks between date and time
	tagNanos   = 'N' // three digits: nanoseconds below the microsecond (AppendNanos)
)

// AppendNanos appends to residue the nanoseconds ns (0..999) below the
// microsecond that a time stored in microseconds lacks, for Render to add
// them back: a text of nanoseconds ("...29.906963455Z") renders exactly
// from its instant truncated to the microsecond. Parse never writes it.
func AppendNanos(residue []byte, ns int) []byte {
	return append(residue, tagNanos, byte('0'+ns/100%10), byte('0'+ns/10%10), byte('0'+ns%10))
}

// maxGap is the most blanks after the first one between an iso8601-space
// date and its time.
const maxGap = 7

// appendResidue encodes v against the default of layout l.
func appendResidue(dst []byte, l LayoutID, v *variant) []byte {
	d := &defaults[l]
	if v.off != d.off {
		dst = append(dst, tagOffset)
		dst = appendVarint(dst, int64(v.off))
	}
	if v.negZero {
		dst = append(dst, tagNegZero)
	}
	if v.zone != d.zone {
		z := v.zone
		if z == 0 {
			z = '-'
		}
		dst = append(dst, tagZone, z)
	}
	if v.digits != d.digits {
		dst = append(dst, tagDigits, '0'+v.digits)
	}
	if v.digits > 0 && v.fsep != d.fsep {
		dst = append(dst, tagFracSep, v.fsep)
	}
	if v.dsep != d.dsep {
		dst = append(dst, tagDateSep, v.dsep)
	}
	if v.pad != d.pad {
		dst = append(dst, tagPad, v.pad)
	}
	if v.gap != 0 {
		dst = append(dst, tagGap, '0'+v.gap)
	}
	return dst
}

// decodeResidue applies a residue to the default of layout l. It stops at
// the first item it cannot read; Render then shows what it has.
func decodeResidue(l LayoutID, r []byte) variant {
	v := defaults[l]
	for i := 0; i < len(r); {
		tag := r[i]
		i++
		if tag == tagNegZero {
			v.negZero = true
			continue
		}
		if tag == tagNanos {
			if i+3 > len(r) || !isDigit(r[i]) || !isDigit(r[i+1]) || !isDigit(r[i+2]) {
				return v
			}
			v.nanos = int16(r[i]-'0')*100 + int16(r[i+1]-'0')*10 + int16(r[i+2]-'0')
			i += 3
			continue
		}
		if tag == tagOffset {
			x, n := readVarint(r[i:])
			if n <= 0 || x < -86400 || x > 86400 {
				return v
			}
			v.off = int32(x)
			i += n
			continue
		}
		if i >= len(r) {
			return v
		}
		b := r[i]
		i++
		switch tag {
		case tagZone:
			switch b {
			case '-':
				v.zone = 0
			case 'Z', 'z', ':', '4', '2':
				v.zone = b
			}
		case tagDigits:
			if b >= '0' && b <= '9' {
				v.digits = b - '0'
			}
		case tagFracSep:
			v.fsep = b
		case tagDateSep:
			v.dsep = b
		case tagPad:
			v.pad = b
		case tagGap:
			if b >= '1' && b <= '0'+maxGap {
				v.gap = b - '0'
			}
		default:
			return v
		}
	}
	return v
}

func appendVarint(dst []byte, x int64) []byte {
	u := uint64(x<<1) ^ uint64(x>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

func readVarint(b []byte) (int64, int) {
	var u uint64
	for i := 0; i < len(b) && i < 10; i++ {
		u |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	return 0, 0
}
