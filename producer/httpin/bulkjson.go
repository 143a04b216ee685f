package httpin

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
)

// appendBulkResponse appends r as encoding/json's Encoder writes it
// (newline included), without reflection: an item's map and the encoder's
// reflection were 8% of the _bulk receiver's CPU at a thousand documents a
// request.
func appendBulkResponse(b []byte, r BulkResponse) []byte {
	b = append(b, `{"took":`...)
	b = strconv.AppendInt(b, r.Took, 10)
	b = append(b, `,"errors":`...)
	b = strconv.AppendBool(b, r.Errors)
	b = append(b, `,"items":`...)
	if r.Items == nil {
		return append(b, "null}\n"...)
	}
	b = append(b, '[')
	for i, it := range r.Items {
		if i > 0 {
			b = append(b, ',')
		}
		if it == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '{')
		if len(it) == 1 {
			for op, res := range it {
				b = appendItem(b, op, res)
			}
		} else {
			for j, op := range slices.Sorted(maps.Keys(it)) { // encoding/json sorts map keys
				if j > 0 {
					b = append(b, ',')
				}
				b = appendItem(b, op, it[op])
			}
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

func appendItem(b []byte, op string, res BulkResult) []byte {
	b = appendString(b, op)
	b = append(b, ':')
	return appendResult(b, res)
}

func appendResult(b []byte, res BulkResult) []byte {
	b = append(b, `{"_index":`...)
	b = appendString(b, res.Index)
	if res.ID != "" {
		b = append(b, `,"_id":`...)
		b = appendString(b, res.ID)
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(res.Status), 10)
	if res.Result != "" {
		b = append(b, `,"result":`...)
		b = appendString(b, res.Result)
	}
	if res.Error != nil {
		b = append(b, `,"error":{"type":`...)
		b = appendString(b, res.Error.Type)
		b = append(b, `,"reason":`...)
		b = appendString(b, res.Error.Reason)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendString appends s as a JSON string: in place when no byte of it
// needs escaping (printable ASCII but " \ < > &), else as json.Marshal
// writes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
