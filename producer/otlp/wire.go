package otlp

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

// wireEntries is proto.Unmarshal of a protobuf ExportLogsServiceRequest
// followed by entries, read straight from the wire: protobuf's generic
// decoding (five allocations a record) was most of the OTLP receiver's
// own CPU. It reads what SDKs and collectors send: string bodies and
// string, bool, int and double attributes. Anything else (another body
// or attribute type, a field it does not know, a singular field twice,
// invalid UTF-8, a malformed message, an entry check makes Bad, whose
// dead letter needs the decoded record) returns ok false, and the caller
// decodes in full, so both paths give the same entries
// (FuzzWireEntriesAgrees). Its strings share b (its text as s), which
// nothing may write afterwards.
func wireEntries(b []byte, check func(*producer.Entry)) (out []producer.Entry, ok bool) {
	s := unsafe.String(unsafe.SliceData(b), len(b))
	d := wireDec{s: s, b: b}
	var slab []streams.Attr
	for pos := 0; pos < len(b); {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return nil, false
		}
		pos += n
		rl, n := d.sub(pos)
		if n < 0 {
			return nil, false
		}
		pos += n
		if out, ok = d.resourceLogs(rl, out, &slab, check); !ok {
			return nil, false
		}
	}
	return out, true
}

// wireDec reads the message fields of one request: s and b are the same
// bytes, offsets index both.
type wireDec struct {
	s string
	b []byte
}

// span is a field's value: s[off:off+n].
type span struct{ off, n int }

func (d *wireDec) bytes(p span) []byte { return d.b[p.off : p.off+p.n] }
func (d *wireDec) str(p span) string   { return d.s[p.off : p.off+p.n] }

// sub reads the length-delimited value at pos: its span and the bytes it
// took with its length, n < 0 when malformed.
func (d *wireDec) sub(pos int) (span, int) {
	v, n := protowire.ConsumeVarint(d.b[pos:])
	if n < 0 || v > uint64(len(d.b)-pos-n) {
		return span{}, -1
	}
	return span{pos + n, int(v)}, n + int(v)
}

// fields calls f with every field of the message at p, its number, wire
// type and, after the tag, its offset; f returns the bytes the value took
// (n < 0: refuse). fields is false when the message is malformed or f
// refused.
func (d *wireDec) fields(p span, f func(num protowire.Number, typ protowire.Type, pos int) int) bool {
	end := p.off + p.n
	for pos := p.off; pos < end; {
		num, typ, n := protowire.ConsumeTag(d.b[pos:end])
		if n < 0 {
			return false
		}
		pos += n
		if pos > end {
			return false
		}
		m := f(num, typ, pos)
		if m < 0 || pos+m > end {
			return false
		}
		pos += m
	}
	return true
}

// lenField is the span of a length-delimited field at pos that must end
// by end, n < 0 when malformed.
func (d *wireDec) lenField(typ protowire.Type, pos int) (span, int) {
	if typ != protowire.BytesType {
		return span{}, -1
	}
	return d.sub(pos)
}

// text is a string field's text, !ok when it is not valid UTF-8 (which
// proto.Unmarshal refuses).
func (d *wireDec) text(p span) (string, bool) {
	t := d.str(p)
	return t, utf8.ValidString(t)
}

// container reads a ResourceLogs or a ScopeLogs, which share a shape: field
// 1 the one Resource or InstrumentationScope (has when present), field 2
// the repeated ScopeLogs or LogRecords (items), field 3 the schema URL.
func (d *wireDec) container(p span) (one span, has bool, items []span, ok bool) {
	hasURL := false
	ok = d.fields(p, func(num protowire.Number, typ protowire.Type, pos int) int {
		v, n := d.lenField(typ, pos)
		if n < 0 {
			return -1
		}
		switch num {
		case 1:
			if has {
				return -1
			}
			one, has = v, true
		case 2:
			items = append(items, v)
		case 3:
			if _, ok := d.text(v); !ok || hasURL {
				return -1
			}
			hasURL = true
		default:
			return -1
		}
		return n
	})
	return one, has, items, ok
}

func (d *wireDec) resourceLogs(p span, out []producer.Entry, slab *[]streams.Attr, check func(*producer.Entry)) ([]producer.Entry, bool) {
	res, hasRes, scopes, ok := d.container(p)
	if !ok {
		return nil, false
	}
	var resAttrs []streams.Attr
	if hasRes {
		dropped := false
		ok := d.fields(res, func(num protowire.Number, typ protowire.Type, pos int) int {
			switch num {
			case 1:
				v, n := d.lenField(typ, pos)
				if n < 0 {
					return -1
				}
				var ok bool
				if resAttrs, ok = d.keyValue(v, PrefixResource, resAttrs); !ok {
					return -1
				}
				return n
			case 2:
				if typ != protowire.VarintType || dropped {
					return -1
				}
				dropped = true
				_, n := protowire.ConsumeVarint(d.b[pos:])
				return n
			}
			return -1
		})
		if !ok {
			return nil, false
		}
	}
	for _, sc := range scopes {
		if out, ok = d.scopeLogs(sc, resAttrs, out, slab, check); !ok {
			return nil, false
		}
	}
	return out, true
}

func (d *wireDec) scopeLogs(p span, res []streams.Attr, out []producer.Entry, slab *[]streams.Attr, check func(*producer.Entry)) ([]producer.Entry, bool) {
	scope, hasScope, recs, ok := d.container(p)
	if !ok {
		return nil, false
	}
	var scopeAttrs []streams.Attr
	if hasScope {
		var name, version string
		var kvs []span
		seen := [5]bool{}
		ok := d.fields(scope, func(num protowire.Number, typ protowire.Type, pos int) int {
			if num < 1 || num > 4 || num != 3 && seen[num] {
				return -1
			}
			seen[num] = true
			if num == 4 {
				if typ != protowire.VarintType {
					return -1
				}
				_, n := protowire.ConsumeVarint(d.b[pos:])
				return n
			}
			v, n := d.lenField(typ, pos)
			if n < 0 {
				return -1
			}
			var ok bool
			switch num {
			case 1:
				name, ok = d.text(v)
			case 2:
				version, ok = d.text(v)
			case 3:
				kvs, ok = append(kvs, v), true
			}
			if !ok {
				return -1
			}
			return n
		})
		if !ok {
			return nil, false
		}
		if name != "" {
			scopeAttrs = append(scopeAttrs, streams.Attr{Key: KeyScopeName, Value: name})
		}
		if version != "" {
			scopeAttrs = append(scopeAttrs, streams.Attr{Key: KeyScopeVersion, Value: version})
		}
		for _, kv := range kvs {
			if scopeAttrs, ok = d.keyValue(kv, PrefixScope, scopeAttrs); !ok {
				return nil, false
			}
		}
	}
	for _, r := range recs {
		e, ok := d.record(r, res, scopeAttrs, slab)
		if !ok {
			return nil, false
		}
		out = append(out, e) // checked in place: &e would be an allocation a record
		if check != nil {
			if check(&out[len(out)-1]); out[len(out)-1].Bad != "" {
				return nil, false // its dead letter is the decoded record's JSON
			}
		}
	}
	return out, true
}

// record is entry of the LogRecord at p.
func (d *wireDec) record(p span, res, scope []streams.Attr, slab *[]streams.Attr) (producer.Entry, bool) {
	var (
		e               producer.Entry
		ts, observed    uint64
		sevNum          int32
		flags           uint32
		sevText, event  string
		traceID, spanID []byte
		body            span
		hasBody         bool
		kvs             []span
		seen            [13]bool
	)
	ok := d.fields(p, func(num protowire.Number, typ protowire.Type, pos int) int {
		if num < 1 || num > 12 || num == 4 || num != 6 && seen[num] {
			return -1
		}
		seen[num] = true
		switch num {
		case 1, 11: // time_unix_nano, observed_time_unix_nano
			if typ != protowire.Fixed64Type {
				return -1
			}
			v, n := protowire.ConsumeFixed64(d.b[pos:])
			if num == 1 {
				ts = v
			} else {
				observed = v
			}
			return n
		case 2, 7: // severity_number, dropped_attributes_count
			if typ != protowire.VarintType {
				return -1
			}
			v, n := protowire.ConsumeVarint(d.b[pos:])
			if num == 2 {
				sevNum = int32(v)
			}
			return n
		case 8: // flags
			if typ != protowire.Fixed32Type {
				return -1
			}
			v, n := protowire.ConsumeFixed32(d.b[pos:])
			flags = v
			return n
		}
		v, n := d.lenField(typ, pos)
		if n < 0 {
			return -1
		}
		var ok bool
		switch num {
		case 3:
			sevText, ok = d.text(v)
		case 5:
			body, hasBody, ok = v, true, true
		case 6:
			kvs, ok = append(kvs, v), true
		case 9:
			traceID, ok = d.bytes(v), true
		case 10:
			spanID, ok = d.bytes(v), true
		case 12:
			event, ok = d.text(v)
		}
		if !ok {
			return -1
		}
		return n
	})
	if !ok {
		return e, false
	}
	if hasBody {
		t, kind, ok := d.anyValue(body)
		if !ok || kind != anyString && kind != anyNone {
			return e, false // a body of another type is rendered as JSON: the full path
		}
		t = strings.TrimSuffix(t, "\n")
		e.Text = strings.TrimSuffix(t, "\r")
	}
	if ts != 0 && ts <= math.MaxInt64 {
		e.TS = time.Unix(0, int64(ts)).UTC()
	} else if observed != 0 && observed <= math.MaxInt64 {
		e.TS = time.Unix(0, int64(observed)).UTC()
	}
	n := 6 + len(res) + len(scope) + len(kvs)
	if cap(*slab)-len(*slab) < n {
		*slab = make([]streams.Attr, 0, max(n, slabAttrs))
	}
	attrs, first := *slab, len(*slab)
	if sevText != "" {
		attrs = append(attrs, streams.Attr{Key: KeySeverityText, Value: sevText})
	}
	if sevNum != 0 {
		attrs = append(attrs, streams.Attr{Key: KeySeverityNumber, Value: strconv.Itoa(int(sevNum))})
	}
	if len(traceID) > 0 {
		attrs = append(attrs, streams.Attr{Key: KeyTraceID, Value: hex.EncodeToString(traceID)})
	}
	if len(spanID) > 0 {
		attrs = append(attrs, streams.Attr{Key: KeySpanID, Value: hex.EncodeToString(spanID)})
	}
	if flags != 0 {
		attrs = append(attrs, streams.Attr{Key: KeyFlags, Value: strconv.FormatUint(uint64(flags), 10)})
	}
	if event != "" {
		attrs = append(attrs, streams.Attr{Key: KeyEventName, Value: event})
	}
	attrs = append(attrs, res...)
	attrs = append(attrs, scope...)
	for _, kv := range kvs {
		if attrs, ok = d.keyValue(kv, "", attrs); !ok {
			return e, false
		}
	}
	*slab = attrs
	attrs = attrs[first:len(attrs):len(attrs)]
	if len(attrs) == 0 {
		attrs = nil
	}
	e.Attrs = unique(attrs)
	return e, true
}

// The AnyValue kinds wireEntries reads.
const (
	anyNone = iota
	anyString
	anyScalar // bool, int, double: their text
)

// keyValue appends the KeyValue at p to out as flatten does, !ok for a
// value of a type the full path renders as JSON (or flattens: a map).
func (d *wireDec) keyValue(p span, prefix string, out []streams.Attr) ([]streams.Attr, bool) {
	var key string
	var val span
	hasKey, hasVal := false, false
	ok := d.fields(p, func(num protowire.Number, typ protowire.Type, pos int) int {
		v, n := d.lenField(typ, pos)
		if n < 0 {
			return -1
		}
		switch {
		case num == 1 && !hasKey:
			var ok bool
			if key, ok = d.text(v); !ok {
				return -1
			}
			hasKey = true
		case num == 2 && !hasVal:
			val, hasVal = v, true
		default:
			return -1
		}
		return n
	})
	if !ok {
		return out, false
	}
	if !hasVal {
		return out, true // no value: skipped
	}
	t, kind, ok := d.anyValue(val)
	if !ok {
		return out, false
	}
	if kind == anyNone {
		return out, true
	}
	if prefix != "" {
		key = prefix + key
	}
	return append(out, streams.Attr{Key: key, Value: t}), true
}

// anyValue is the AnyValue at p: a string, a scalar's text or none; !ok
// for the other types.
func (d *wireDec) anyValue(p span) (string, int, bool) {
	t, kind := "", anyNone
	seen := false
	ok := d.fields(p, func(num protowire.Number, typ protowire.Type, pos int) int {
		if seen {
			return -1 // a oneof set twice: the last wins, the full path decides
		}
		seen = true
		switch num {
		case 1:
			v, n := d.lenField(typ, pos)
			if n < 0 {
				return -1
			}
			var ok bool
			if t, ok = d.text(v); !ok {
				return -1
			}
			kind = anyString
			return n
		case 2, 3:
			if typ != protowire.VarintType {
				return -1
			}
			v, n := protowire.ConsumeVarint(d.b[pos:])
			if num == 2 {
				t = strconv.FormatBool(protowire.DecodeBool(v))
			} else {
				t = strconv.FormatInt(int64(v), 10)
			}
			kind = anyScalar
			return n
		case 4:
			if typ != protowire.Fixed64Type {
				return -1
			}
			v, n := protowire.ConsumeFixed64(d.b[pos:])
			t, kind = strconv.FormatFloat(math.Float64frombits(v), 'g', -1, 64), anyScalar
			return n
		}
		return -1
	})
	return t, kind, ok
}
