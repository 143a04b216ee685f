package httpin

import (
	"encoding/json"
	"strconv"

	"github.com/quarrylake/quarry/streams"
)

// appendBulkResponse appends the _bulk answer (took, errors, items; an
// item's msgID read as FrameMsgID of source) as encoding/json's Encoder
// writes a BulkResponse of one-action BulkItems (newline included), without
// reflection, a map per item or a formatted id per item
// (TestBulkResponseJSON): the map, the id and the reflection were 8% and
// more of the _bulk receiver's CPU at a thousand documents a request.
func appendBulkResponse(b []byte, took int64, errs bool, items []bulkItem, source string) []byte {
	b = append(b, `{"took":`...)
	b = strconv.AppendInt(b, took, 10)
	b = append(b, `,"errors":`...)
	b = strconv.AppendBool(b, errs)
	b = append(b, `,"items":`...)
	if len(items) == 0 {
		return append(b, "null}\n"...) // parseBulk's items of an empty body: nil
	}
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendString(b, items[i].op)
		b = append(b, ':')
		res := &items[i].res
		if items[i].msgID > 0 {
			b = appendResultID(b, res, source, items[i].msgID-1)
		} else {
			b = appendResult(b, res)
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

// appendResultID is appendResult of res with the _id FrameMsgID(source,
// off), appended in place when source needs no escaping.
func appendResultID(b []byte, res *BulkResult, source string, off uint64) []byte {
	if !plainString(source) {
		r := *res
		r.ID = streams.FrameMsgID(source, off)
		return appendResult(b, &r)
	}
	b = append(b, `{"_index":`...)
	b = appendString(b, res.Index)
	b = append(b, `,"_id":"`...)
	b = append(b, source...)
	b = append(b, ':')
	b = strconv.AppendUint(b, off, 10)
	b = append(b, '"')
	return appendTail(b, res)
}

func appendResult(b []byte, res *BulkResult) []byte {
	b = append(b, `{"_index":`...)
	b = appendString(b, res.Index)
	if res.ID != "" {
		b = append(b, `,"_id":`...)
		b = appendString(b, res.ID)
	}
	return appendTail(b, res)
}

// appendTail appends res's fields after _id and closes it.
func appendTail(b []byte, res *BulkResult) []byte {
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
	if !plainString(s) {
		q, _ := json.Marshal(s) // a string always marshals
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainString reports whether encoding/json writes s as it is between
// quotes: printable ASCII but " \\ < > &.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
