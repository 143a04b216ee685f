package httpin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

// timeFields are the fields that become the record's time, in order.
var timeFields = []string{"@timestamp", "timestamp"}

// Entry turns one JSON document into a line: the first of msgFields
// present (matched exactly, else ignoring case) is the text (a string as is, any other value as its JSON), the
// first of @timestamp and timestamp that parses is the event time, and
// every other field is an attribute, nested objects flattened to "a.b",
// arrays kept as their JSON, null skipped. A document without a message
// field is mined whole: its text is the document as received. A document
// that is not a JSON object is an error.
func Entry(doc []byte, msgFields []string) (producer.Entry, error) {
	return entryOf(string(doc), msgFields)
}

// entryOf is Entry of a document held as a string: the receivers' path,
// whose entries' strings are substrings of the request's body where they
// can be (flatEntry).
func entryOf(doc string, msgFields []string) (producer.Entry, error) {
	if e, ok := flatEntry(doc, msgFields); ok {
		return e, nil
	}
	return decodeEntry([]byte(doc), msgFields)
}

// decodeEntry is Entry through encoding/json, for every document.
func decodeEntry(doc []byte, msgFields []string) (producer.Entry, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return producer.Entry{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if m == nil {
		return producer.Entry{}, errors.New("not a JSON object: null")
	}
	if d.More() {
		return producer.Entry{}, errors.New("more than one JSON value on the line")
	}
	var e producer.Entry
	key, found := messageKey(m, msgFields)
	if found {
		e.Text = scalar(m[key])
		delete(m, key)
	}
	if !found {
		e.Text = string(bytes.TrimSpace(doc))
		m = nil // the whole document is the text
	}
	for _, f := range timeFields {
		v, ok := m[f]
		if !ok {
			continue
		}
		if t, ok := parseTime(v); ok {
			e.TS = t
			delete(m, f)
			break
		}
	}
	if len(m) > 0 {
		e.Attrs = flatten(nil, "", m)
		sort.Slice(e.Attrs, func(i, j int) bool { return e.Attrs[i].Key < e.Attrs[j].Key })
	}
	return e, nil
}

// messageKey is the first of fields present in m with a non-null value,
// matched exactly, else ignoring case (syslog-ng writes MESSAGE).
func messageKey(m map[string]any, fields []string) (string, bool) {
	for _, f := range fields {
		if v, ok := m[f]; ok && v != nil {
			return f, true
		}
	}
	for _, f := range fields {
		for k, v := range m {
			if v != nil && strings.EqualFold(k, f) {
				return k, true
			}
		}
	}
	return "", false
}

func flatten(out []streams.Attr, prefix string, m map[string]any) []streams.Attr {
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		switch v := v.(type) {
		case nil:
		case map[string]any:
			out = flatten(out, key, v)
		default:
			out = append(out, streams.Attr{Key: key, Value: scalar(v)})
		}
	}
	return out
}

// scalar is a JSON value as attribute text: strings as they are, numbers
// as written, booleans true/false, objects and arrays as JSON.
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"}

// parseTime reads an RFC 3339 string (a zone-less one is UTC) or a Unix
// time as a number: seconds, milliseconds, microseconds or nanoseconds by
// magnitude.
func parseTime(v any) (time.Time, bool) {
	switch v := v.(type) {
	case string:
		for _, l := range timeLayouts {
			if t, err := time.Parse(l, v); err == nil {
				return t, true
			}
		}
		if n, err := strconv.ParseFloat(v, 64); err == nil && strings.TrimSpace(v) != "" {
			return unixTime(n)
		}
	case json.Number:
		if n, err := v.Float64(); err == nil {
			return unixTime(n)
		}
	}
	return time.Time{}, false
}

func unixTime(n float64) (time.Time, bool) {
	if n <= 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return time.Time{}, false
	}
	switch {
	case n < 1e11: // seconds until year 5138
		sec, frac := math.Modf(n)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
	case n < 1e14:
		return time.UnixMilli(int64(n)).UTC(), true
	case n < 1e17:
		return time.UnixMicro(int64(n)).UTC(), true
	case n < 9.2e18:
		return time.Unix(0, int64(n)).UTC(), true
	}
	return time.Time{}, false
}
