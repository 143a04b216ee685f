// Package eventtime finds the timestamp a log line starts with, turns it into
// an instant, and writes its text back byte for byte. It is a library, not a
// stage: it does no I/O, and a Parser is owned by one line source. A Stamper
// gives each line of a source its record time (its own timestamp, else the
// last line's that had one, else its read time): the producer's rule.
//
// # Where it looks
//
// Config.Mode auto tries every layout below; a layout name tries only that
// one (iso8601 also takes iso8601-space; epoch takes every epoch-*); none
// never finds a timestamp. A timestamp is taken only if
//
//   - it starts within the first Window (80) bytes of the line and within
//     its first MaxFields (5) fields, a field being a run of bytes other than
//     space and tab; so a short prefix such as "[", "<13>", a level, a pid
//     or a host may come before it;
//   - it starts at the line start or right after one of: space, tab, or
//     [ ( < > | " ' = , (so not inside a word or a dotted name); a klog
//     (glog) time starts after its severity letter I, W, E or F, which
//     starts a field ("I1207 23:10:53.845933    1488 server.go:123] ...");
//   - it is followed by the line end or a byte that is not an ASCII letter
//     or digit;
//   - its fields are in range (month 1-12, a day the month has, hour 0-23,
//     minute and second 0-59: no leap second, no 24:00), a ctime weekday
//     agrees with its date, and month and weekday names are in title case;
//   - for an epoch: the digits are a whole field (after the line start, a
//     blank or "["; before the line end, a blank or one of ] : , ; |), have
//     no leading zero, and fall in [2000-01-01, 2100-01-01) UTC. 9-10 digits
//     are seconds (with an optional "." fraction), 12-13 milliseconds, 15-16
//     microseconds and 18-19 nanoseconds.
//
// The leftmost candidate that passes wins. A line without one costs one pass
// over at most Window bytes; nothing allocates.
//
// # Layouts
//
// A Match names its layout with a LayoutID. The ids are stored in the lake:
// they are never renumbered or reused, new layouts are added at the end.
//
//	id  name           example                            zone      year
//	 0  none           (no timestamp)
//	 1  iso8601        2026-11-29T00:00:00.010Z           optional  yes
//	 2  iso8601-space  2015-10-18 18:01:47,978            optional  yes
//	 3  syslog         Jun 14 15:16:01                    Config    inferred
//	 4  ctime          Sun Dec 04 04:47:44 2005           Config    yes
//	 5  yymmdd         081109 203615                      Config    yes (yy)
//	 6  mmdd           03-17 16:13:38.811                 Config    inferred
//	 7  yyyymmdd-ms    20171223-22:15:29:606              Config    yes
//	 8  mm.dd          10.30 16:49:06                     Config    inferred
//	 9  clf            10/Oct/2000:13:55:36 -0700         in text   yes
//	10  yy/mm/dd       17/06/09 20:10:40                  Config    yes (yy)
//	11  yyyy/mm/dd     2017/06/09 20:10:40                Config    yes
//	12  epoch          1117838570                         UTC       yes
//	13  epoch-ms       1117838570123                      UTC       yes
//	14  epoch-us       1117838570123456                   UTC       yes
//	15  epoch-ns       1117838570123456789                UTC       yes
//	16  db2            2005-06-03-15.42.50.675872         Config    yes
//	17  yyyy.mm.dd     2005.06.03 (a date alone)          Config    yes
//	18  klog           1207 23:10:53.845933 (after I/W/E/F) Config  inferred
//
// auto tries every layout but yyyy.mm.dd: a date alone names a day, not a
// line's time, and looks like a calendar version number; name it to use
// it. db2 is IBM DB2's timestamp, BGL's RAS time. Parser.ParseItem reads a
// timestamp of any layout at the start of a text, for times of a line other
// than its first (records' kinds w and y); Step is the resolution of a
// layout's text.
//
// iso8601 is RFC 3339 and the ISO 8601 extended form: date, "T" or "t"
// (iso8601) or one to eight spaces (iso8601-space), hh:mm:ss, an optional fraction of
// 1-9 digits after "." or ",", and an optional zone: Z, z, ±hh:mm, ±hhmm or
// ±hh. The other layouts take an optional fraction of 1-9 digits too: after
// "." or "," for the slash layouts, after ":" for yyyymmdd-ms, after "." for
// the rest (db2: after "."; its default is 6 digits); yymmdd, clf and
// yyyy.mm.dd take none. syslog and ctime days below
// 10 may be written " 4", "04" or "4". A two-digit year yy is 19yy from 69
// on and 20yy below, as in package time. Brackets around a timestamp are
// not part of it: the caller's template keeps them.
//
// # Zone and year
//
// A layout without a zone is read in Config.Zone (UTC by default). Where the
// zone skips a wall clock (a spring-forward gap) or repeats one, the instant
// is taken at the offset time.Date picks; the offset is kept in the residue,
// so the text still renders back exactly.
//
// A layout without a year takes it from the previous match of the same
// Parser (the year that puts the time nearest to it, so a log rolls over
// at New Year), or, when there is none (first line, after Reset), from the
// reference time set by SetReference (the time the line was read; time.Now
// at New): the latest year that puts the time at most two days after the
// reference. A December line read in January is of last year; a January 1st
// line read on December 31st is of next year.
//
// # Residue and rendering
//
// Parse returns, besides the Match, a residue: what the instant and the
// layout id do not say about the text. It is empty in each layout's common
// case (the defaults below) and a few bytes otherwise. With it,
//
//	Render(dst, m.Time, m.Layout, residue)
//
// writes line[m.Start:m.End] back exactly, for every match (a fuzz target
// checks this). Render uses only the instant of its time, not its Location,
// so the time may be stored as UTC. A Renderer writes the same bytes for a
// stream of timestamps (the lines of a records file): the text of a second
// once per layout, then only each timestamp's fraction digits.
//
// A residue is a sequence of items, each a tag byte and a value, present
// only where the text differs from its layout's default:
//
//	tag  value                               default
//	o    zigzag varint: offset, s east UTC    0 (also for Config.Zone: UTC)
//	n    (none): a zero offset written "-"    absent
//	z    zone style: - none, Z, z,            Z for iso8601, ±hhmm for clf,
//	     ':' ±hh:mm, '4' ±hhmm, '2' ±hh       none for the others
//	f    '0'..'9': fraction digits            3 for iso8601-space, mmdd and
//	                                          yyyymmdd-ms; 6 for db2; 0 for
//	                                          the others
//	s    fraction separator                   "," for iso8601-space, ":" for
//	                                          yyyymmdd-ms, "." for the others
//	d    iso8601 date/time separator          T (iso8601), space (-space)
//	p    day padding: ' ', '0' or '-' (none)  ' ' syslog, '0' ctime
//	w    '1'..'7': blanks after the first     0 (iso8601-space: one blank)
//	     between date and time
//	N    '000'..'999': nanoseconds below the  absent; never written by Parse:
//	     microsecond, added before rendering  AppendNanos, for a caller that
//	                                          stores the time in microseconds
//
// The offset item holds the zone offset of the text for zoned layouts and
// the offset of Config.Zone at that time for the others, so a lake written
// with one zone setting renders correctly after the setting changes.
package eventtime
