package httpin

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

// flatEntry is Entry's fast path for what shippers send most: one flat
// JSON object whose values are strings, numbers, booleans or null, with a
// message field named exactly as in msgFields and no key twice. It reads
// the document in place instead of building a map through encoding/json
// (most of the JSON-lines receiver's CPU). Anything else, valid or not,
// returns ok false and Entry decodes it in full, so both paths give the
// same entry (TestFlatEntryAgrees, FuzzFlatEntry). Its strings are doc's
// substrings where no escape needs reading: a receiver converts a request
// body to a string once, and its lines' texts, keys and values share it.
func flatEntry(doc string, msgFields []string) (e producer.Entry, ok bool) {
	type field struct {
		key, val string
		str      bool // val is a string's text; else a number's or literal's
		null     bool
	}
	var fs [16]field
	fields := fs[:0]
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return e, false
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		i++
	} else {
		for {
			key, j, ok := flatString(doc, i)
			if !ok {
				return e, false
			}
			j = skipSpace(doc, j)
			if j >= len(doc) || doc[j] != ':' {
				return e, false
			}
			j = skipSpace(doc, j+1)
			if j >= len(doc) {
				return e, false
			}
			var f field
			f.key = key
			switch c := doc[j]; {
			case c == '"':
				f.val, j, ok = flatString(doc, j)
				f.str = true
			case c == 't' && hasAt(doc, j, "true"), c == 'f' && hasAt(doc, j, "false"):
				n := 4
				if c == 'f' {
					n = 5
				}
				f.val, j, ok = doc[j:j+n], j+n, true
			case c == 'n' && hasAt(doc, j, "null"):
				f.null, j, ok = true, j+4, true
			case c == '-' || c >= '0' && c <= '9':
				f.val, j, ok = flatNumber(doc, j)
			default:
				return e, false // an object, an array or not JSON
			}
			if !ok {
				return e, false
			}
			fields = append(fields, f)
			j = skipSpace(doc, j)
			if j >= len(doc) {
				return e, false
			}
			if doc[j] == '}' {
				i = j + 1
				break
			}
			if doc[j] != ',' {
				return e, false
			}
			i = skipSpace(doc, j+1)
		}
	}
	if skipSpace(doc, i) != len(doc) {
		return e, false // another value after the object
	}
	for a := range fields {
		for b := range a {
			if fields[a].key == fields[b].key {
				return e, false // encoding/json keeps the last: the slow path decides
			}
		}
	}
	msg := -1
	for _, m := range msgFields {
		for k := range fields {
			if fields[k].key == m && !fields[k].null {
				msg = k
				break
			}
		}
		if msg >= 0 {
			break
		}
	}
	if msg < 0 {
		return e, false // no message or one matched ignoring case
	}
	e.Text = fields[msg].val
	used := msg
	ts := -1
	for _, tf := range timeFields {
		for k := range fields {
			if k == msg || fields[k].key != tf || fields[k].null {
				continue
			}
			var v any = json.Number(fields[k].val)
			if fields[k].str {
				v = fields[k].val
			}
			if t, ok := parseTime(v); ok {
				e.TS, ts = t, k
			}
			break
		}
		if ts >= 0 {
			break
		}
	}
	for k := range fields {
		if k == used || k == ts || fields[k].null {
			continue
		}
		e.Attrs = append(e.Attrs, streams.Attr{Key: fields[k].key, Value: fields[k].val})
	}
	slices.SortFunc(e.Attrs, func(a, b streams.Attr) int { return strings.Compare(a.Key, b.Key) })
	return e, true
}

func skipSpace(b string, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func hasAt(b string, i int, lit string) bool {
	return len(b)-i >= len(lit) && b[i:i+len(lit)] == lit
}

// flatString reads the JSON string starting at b[i] ('"') and returns its
// text (b's substring when it has no escape) and the index after it. A
// string with an escape is unquoted as encoding/json unquotes it; one with
// invalid UTF-8 (which encoding/json replaces) or a control character is
// refused.
func flatString(b string, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	escaped := false
	ascii := true
	j := i + 1
	for ; j < len(b); j++ {
		c := b[j]
		if c == '"' {
			break
		}
		if c < 0x20 {
			return "", i, false
		}
		if c >= 0x80 {
			ascii = false
		}
		if c == '\\' {
			escaped = true
			j++ // the escaped byte cannot end the string
		}
	}
	if j >= len(b) {
		return "", i, false
	}
	raw := b[i+1 : j]
	if !ascii && !utf8.ValidString(raw) {
		return "", i, false
	}
	if !escaped {
		return raw, j + 1, true
	}
	s, ok := unquote(raw)
	if !ok {
		return "", i, false
	}
	return s, j + 1, true
}

// unquote returns the text of raw, a JSON string's contents between its
// quotes (valid UTF-8, no control byte), with its escapes read as
// encoding/json reads them: a \u escape of a surrogate that does not pair
// with the next escape reads as U+FFFD. ok is false for an escape JSON
// does not have. Unquoting through json.Unmarshal cost the JSON-lines
// receiver more than the rest of the fast path: log lines often quote.
func unquote(raw string) (string, bool) {
	var sb strings.Builder
	sb.Grow(len(raw))
	for len(raw) > 0 {
		k := strings.IndexByte(raw, '\\')
		if k < 0 {
			sb.WriteString(raw)
			break
		}
		sb.WriteString(raw[:k])
		raw = raw[k:]
		if len(raw) < 2 {
			return "", false
		}
		switch c := raw[1]; c {
		case '"', '\\', '/':
			sb.WriteByte(c)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r := hex4(raw)
			if r < 0 {
				return "", false
			}
			raw = raw[6:]
			if utf16.IsSurrogate(r) {
				if d := utf16.DecodeRune(r, hex4(raw)); d != utf8.RuneError {
					sb.WriteRune(d)
					raw = raw[6:]
					continue
				}
			}
			sb.WriteRune(r) // a lone surrogate is written as U+FFFD
			continue
		default:
			return "", false
		}
		raw = raw[2:]
	}
	return sb.String(), true
}

// hex4 is the code unit of the \uXXXX escape b starts with, -1 when b does
// not start with one.
func hex4(b string) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for k := 2; k < 6; k++ {
		c := b[k]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// flatNumber reads a number in JSON's grammar starting at b[i] and returns
// its literal text.
func flatNumber(b string, i int) (string, int, bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	digits := func() int {
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j - k
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case digits() == 0:
		return "", i, false
	}
	if j < len(b) && b[j] == '.' {
		j++
		if digits() == 0 {
			return "", i, false
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return "", i, false
		}
	}
	return b[i:j], j, true
}
