package syslog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quarrylake/quarry/streams"
)

// Format is the syslog format a message was parsed as.
type Format uint8

const (
	// RFC3164 is the BSD format: <PRI>Mmm dd hh:mm:ss HOST TAG[PID]: MSG.
	RFC3164 Format = iota + 1
	// RFC5424 is <PRI>1 TIMESTAMP HOST APP PROCID MSGID SD [MSG].
	RFC5424
)

func (f Format) String() string {
	switch f {
	case RFC3164:
		return "rfc3164"
	case RFC5424:
		return "rfc5424"
	}
	return "unknown"
}

// Message is one parsed syslog message. Absent fields (NILVALUE "-" or
// not in the message) are empty; TS is zero when the message has no time.
type Message struct {
	Format   Format
	Facility int // 0-23
	Severity int // 0-7
	TS       time.Time
	Host     string
	App      string
	ProcID   string
	MsgID    string
	// SD holds the structured data params as "<sd-id>.<name>" = value, in
	// message order (RFC 5424 only).
	SD  []streams.Attr
	Msg string
}

// ErrMalformed wraps every parse error: the message is dead-lettered with
// the error as its reason.
var ErrMalformed = errors.New("malformed syslog message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

var severities = [8]string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}
var facilities = [24]string{"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
	"authpriv", "ftp", "ntp", "security", "console", "solaris-cron",
	"local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"}

// SeverityName is the keyword of a severity (0 emerg ... 7 debug).
func SeverityName(s int) string { return severities[s&7] }

// FacilityName is the keyword of a facility (0 kern ... 23 local7).
func FacilityName(f int) string {
	if f < 0 || f >= len(facilities) {
		return strconv.Itoa(f)
	}
	return facilities[f]
}

// Attrs are the record attributes of m: syslog.facility,
// syslog.severity, host, app, syslog.procid, syslog.msgid and the
// structured data as sd.<sd-id>.<name>.
func (m *Message) Attrs() []streams.Attr {
	return m.appendAttrs(make([]streams.Attr, 0, m.maxAttrs()))
}

// maxAttrs is the most attributes m has.
func (m *Message) maxAttrs() int { return 6 + len(m.SD) }

// appendAttrs appends Attrs to a.
func (m *Message) appendAttrs(a []streams.Attr) []streams.Attr {
	a = append(a,
		streams.Attr{Key: "syslog.facility", Value: FacilityName(m.Facility)},
		streams.Attr{Key: "syslog.severity", Value: SeverityName(m.Severity)})
	add := func(k, v string) {
		if v != "" {
			a = append(a, streams.Attr{Key: k, Value: v})
		}
	}
	add("host", m.Host)
	add("app", m.App)
	add("syslog.procid", m.ProcID)
	add("syslog.msgid", m.MsgID)
	for _, p := range m.SD {
		a = append(a, streams.Attr{Key: "sd." + p.Key, Value: p.Value})
	}
	return a
}

// Parse parses one syslog message (without its framing) as RFC 5424 when
// the version "1" follows the PRI, else as RFC 3164. now and loc place an
// RFC 3164 timestamp, which has no year and no zone: the year is the one
// that puts it closest to now, the zone loc. A trailing '\n' or "\r\n"
// is trimmed. Every error wraps ErrMalformed.
func Parse(b []byte, now time.Time, loc *time.Location) (Message, error) {
	s := string(b)
	s = strings.TrimSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\r")
	pri, rest, err := parsePRI(s)
	if err != nil {
		return Message{}, err
	}
	m := Message{Facility: pri >> 3, Severity: pri & 7}
	if strings.HasPrefix(rest, "1 ") {
		m.Format = RFC5424
		err = parse5424(&m, rest[2:])
	} else {
		m.Format = RFC3164
		parse3164(&m, rest, now, loc)
	}
	return m, err
}

func parsePRI(s string) (int, string, error) {
	if len(s) == 0 {
		return 0, "", malformed("empty message")
	}
	if s[0] != '<' {
		return 0, "", malformed("no <PRI> at the start")
	}
	end := strings.IndexByte(s[:min(len(s), 5)], '>')
	if end < 2 {
		return 0, "", malformed("<PRI> is not 1 to 3 digits closed by '>'")
	}
	digits := s[1:end]
	if len(digits) > 1 && digits[0] == '0' {
		return 0, "", malformed("<PRI> %q has a leading zero", digits)
	}
	pri := 0
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, "", malformed("<PRI> %q is not a number", digits)
		}
		pri = pri*10 + int(c-'0')
	}
	if pri > 191 {
		return 0, "", malformed("<PRI> %d above 191", pri)
	}
	return pri, s[end+1:], nil
}

// field cuts the next space-terminated header field of an RFC 5424
// message: printable US-ASCII, at most max bytes; "-" is empty.
func field(s, name string, maxLen int) (string, string, error) {
	i := strings.IndexByte(s, ' ')
	if i < 0 {
		return "", "", malformed("rfc5424: message ends before %s", name)
	}
	f := s[:i]
	if f == "" {
		return "", "", malformed("rfc5424: empty %s (two spaces)", name)
	}
	if len(f) > maxLen {
		return "", "", malformed("rfc5424: %s of %d bytes, at most %d", name, len(f), maxLen)
	}
	for j := 0; j < len(f); j++ {
		if f[j] < 33 || f[j] > 126 {
			return "", "", malformed("rfc5424: %s has byte %#x outside printable US-ASCII", name, f[j])
		}
	}
	if f == "-" {
		f = ""
	}
	return f, s[i+1:], nil
}

func parse5424(m *Message, s string) error {
	ts, s, err := field(s, "TIMESTAMP", 64)
	if err != nil {
		return err
	}
	if ts != "" {
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return malformed("rfc5424: TIMESTAMP %q is not RFC 3339", ts)
		}
		m.TS = t
	}
	if m.Host, s, err = field(s, "HOSTNAME", 255); err != nil {
		return err
	}
	if m.App, s, err = field(s, "APP-NAME", 48); err != nil {
		return err
	}
	if m.ProcID, s, err = field(s, "PROCID", 128); err != nil {
		return err
	}
	// MSGID may be the last field: "... MSGID -" has SD, so a space must follow.
	if m.MsgID, s, err = field(s, "MSGID", 32); err != nil {
		return err
	}
	if s, err = parseSD(m, s); err != nil {
		return err
	}
	if s != "" {
		if s[0] != ' ' {
			return malformed("rfc5424: no space between STRUCTURED-DATA and MSG")
		}
		s = strings.TrimPrefix(s[1:], "\ufeff")
	}
	m.Msg = s
	return nil
}

// parseSD parses STRUCTURED-DATA: "-" or one or more
// [SD-ID *(SP PARAM-NAME="PARAM-VALUE")].
func parseSD(m *Message, s string) (string, error) {
	if strings.HasPrefix(s, "-") {
		return s[1:], nil
	}
	if !strings.HasPrefix(s, "[") {
		return "", malformed("rfc5424: STRUCTURED-DATA is neither '-' nor '['")
	}
	for strings.HasPrefix(s, "[") {
		s = s[1:]
		id, rest, err := sdName(s, "SD-ID", 32)
		if err != nil {
			return "", err
		}
		s = rest
		for {
			if strings.HasPrefix(s, "]") {
				s = s[1:]
				break
			}
			if !strings.HasPrefix(s, " ") {
				return "", malformed("rfc5424: SD-ELEMENT %s: want ' ' or ']'", id)
			}
			name, rest, err := sdName(s[1:], "PARAM-NAME", 32)
			if err != nil {
				return "", err
			}
			if !strings.HasPrefix(rest, "=\"") {
				return "", malformed("rfc5424: SD-PARAM %s.%s: want =\"", id, name)
			}
			val, rest, err := sdValue(rest[2:])
			if err != nil {
				return "", malformed("rfc5424: SD-PARAM %s.%s: %s", id, name, err)
			}
			m.SD = append(m.SD, streams.Attr{Key: id + "." + name, Value: val})
			s = rest
		}
	}
	return s, nil
}

func sdName(s, what string, maxLen int) (string, string, error) {
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '=' || c == ' ' || c == ']' || c == '"' {
			break
		}
		if c < 33 || c > 126 {
			return "", "", malformed("rfc5424: %s has byte %#x", what, c)
		}
		i++
	}
	if i == 0 || i > maxLen {
		return "", "", malformed("rfc5424: %s must be 1 to %d bytes", what, maxLen)
	}
	if i == len(s) {
		return "", "", malformed("rfc5424: message ends inside STRUCTURED-DATA")
	}
	return s[:i], s[i:], nil
}

// sdValue reads a PARAM-VALUE up to its closing '"', undoing the escapes
// \" \\ \]; a backslash before anything else is kept.
func sdValue(s string) (string, string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			v := b.String()
			if !utf8.ValidString(v) {
				return "", "", errors.New("value is not UTF-8")
			}
			return v, s[i+1:], nil
		case '\\':
			if i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\' || s[i+1] == ']') {
				i++
				b.WriteByte(s[i])
			} else {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("no closing '\"'")
}

// parse3164 is lenient, as real senders are: the timestamp is "Mmm dd
// hh:mm:ss" (also "Mmm  d"), optionally with fractional seconds and a
// year, or RFC 3339 (rsyslog's forward format); HOST is the next word
// when a timestamp was found and the word is not the tag; TAG runs up to
// ':', '[' or a space. Whatever cannot be recognised stays in Msg: an RFC
// 3164 message with a valid PRI is never malformed.
func parse3164(m *Message, s string, now time.Time, loc *time.Location) {
	rest, ok := bsdTime(m, s, now, loc)
	if ok {
		s = rest
		// HOST: a word followed by a space, unless it already is the tag.
		if i := strings.IndexByte(s, ' '); i > 0 && !strings.ContainsAny(s[:i], ":[") {
			m.Host, s = s[:i], s[i+1:]
		}
	}
	// TAG[PID]: MSG
	i := 0
	for i < len(s) && i <= 48 && s[i] != ':' && s[i] != '[' && s[i] != ' ' {
		i++
	}
	if i > 0 && i < len(s) && i <= 48 {
		tag, after := s[:i], s[i:]
		pid := ""
		if after[0] == '[' {
			if j := strings.IndexByte(after, ']'); j > 0 {
				pid, after = after[1:j], after[j+1:]
			} else {
				after = ""
			}
		}
		if after != "" && after[0] == ':' {
			m.App, m.ProcID = tag, pid
			s = strings.TrimPrefix(after[1:], " ")
		}
	}
	m.Msg = s
}

var bsdLayouts = []string{"Jan _2 15:04:05", "Jan _2 15:04:05.000000", "Jan _2 15:04:05.000", "Jan _2 2006 15:04:05"}

func bsdTime(m *Message, s string, now time.Time, loc *time.Location) (string, bool) {
	// RFC 3339 (rsyslog RSYSLOG_ForwardFormat, syslog-ng's ISO dates).
	if len(s) > 19 && s[4] == '-' && s[10] == 'T' {
		if i := strings.IndexByte(s, ' '); i > 0 {
			if t, err := time.Parse(time.RFC3339Nano, s[:i]); err == nil {
				m.TS = t
				return s[i+1:], true
			}
		}
	}
	if len(s) < 16 {
		return s, false
	}
	for _, layout := range bsdLayouts {
		n := len(layout)
		if len(s) <= n || s[n] != ' ' {
			continue
		}
		t, err := time.ParseInLocation(layout, s[:n], loc)
		if err != nil {
			continue
		}
		if t.Year() == 0 {
			t = nearYear(t, now.In(loc))
		}
		m.TS = t
		return s[n+1:], true
	}
	return s, false
}

// nearYear gives t (year 0) the year that puts it closest to now: a
// December line read in January is last year's.
func nearYear(t, now time.Time) time.Time {
	best := t.AddDate(now.Year(), 0, 0)
	for _, y := range []int{now.Year() - 1, now.Year() + 1} {
		c := t.AddDate(y, 0, 0)
		if c.Sub(now).Abs() < best.Sub(now).Abs() {
			best = c
		}
	}
	return best
}
