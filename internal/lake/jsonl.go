package lake

import (
	"encoding/base64"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// A record's JSON form, written by hand: WriteJSONL (quarry query --format
// jsonl) and the search API's hits (internal/web) both write it, and
// encoding/json's reflection cost 2.8 us a record, most of a JSONL query's
// CPU after the render. The bytes are exactly what json.Marshal writes for
// jsonlRecord (TestRecordJSONMatchesMarshal, FuzzJSONString): the same
// members in the same order, strings escaped as encoding/json escapes them
// (HTML-safe, U+2028 and U+2029 escaped, each byte that is not UTF-8
// written as U+FFFD), ts as time.Time's MarshalJSON writes it.

// jsonSafe marks the ASCII bytes a JSON string holds as they are.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it: ", \ and control bytes, <, > and & as \u00XX, U+2028 and
// U+2029, and each byte that is not UTF-8 as \ufffd.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += n
			continue
		}
		i += n
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendJSONMembers appends r's JSON members without the braces, as
// WriteJSONL writes them: wal_seq, index, tenant, ts, template_id,
// template_version, params ([] when none), attrs (only when there are
// any, keys sorted), source, line, and line_base64 (the exact line,
// standard base64) only when the line is not valid UTF-8.
func AppendJSONMembers(dst []byte, r *Record) []byte {
	dst = append(dst, `"wal_seq":`...)
	dst = strconv.AppendUint(dst, r.WALSeq, 10)
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendUint(dst, uint64(r.Index), 10)
	dst = append(dst, `,"tenant":`...)
	dst = AppendJSONString(dst, r.Tenant)
	dst = append(dst, `,"ts":"`...)
	dst = r.TS.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","template_id":`...)
	dst = strconv.AppendUint(dst, r.TemplateID, 10)
	dst = append(dst, `,"template_version":`...)
	dst = strconv.AppendUint(dst, uint64(r.TemplateVersion), 10)
	dst = append(dst, `,"params":[`...)
	for i, p := range r.Params {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, p)
	}
	dst = append(dst, ']')
	if len(r.Attrs) > 0 {
		dst = append(dst, `,"attrs":{`...)
		keys := make([]string, 0, len(r.Attrs))
		for k := range r.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSONString(dst, k)
			dst = append(dst, ':')
			dst = AppendJSONString(dst, r.Attrs[k])
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"source":`...)
	dst = AppendJSONString(dst, r.Source)
	dst = append(dst, `,"line":`...)
	dst = AppendJSONString(dst, r.Line)
	if !utf8.ValidString(r.Line) {
		dst = append(dst, `,"line_base64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, []byte(r.Line))
		dst = append(dst, '"')
	}
	return dst
}
