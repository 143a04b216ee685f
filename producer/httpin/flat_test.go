package httpin

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/quarrylake/quarry/streams"
)

var flatDocs = []string{
	`{"message":"GET / 200","host":"web1","n":12,"ok":true,"no":false,"nil":null}`,
	` {"log":"x","@timestamp":"2026-01-02T03:04:05.5Z","k":"v"} `,
	`{"msg":"m","timestamp":1767322800123}`,
	`{"message":"m","timestamp":1767322800.25e0,"f":-0.5E+3}`,
	`{"message":"m","timestamp":"soon"}`,
	`{"message":"m","timestamp":null,"@timestamp":"2026-01-02 03:04:05"}`,
	`{"msg":"b","message":"a"}`,
	`{"message":"esc \"q\" \\ \/ \u00e9 \ud83d\ude00 \n"}`,
	`{"message":"ünïcödé ✓","k":"日本"}`,
	`{"message":12.5}`,
	`{"message":true}`,
	`{}`,
	`{"message":null,"log":"l"}`,
	`{"MESSAGE":"a"}`,
	`{"message":"a","message":"b"}`,
	`{"message":"a","o":{"b":1}}`,
	`{"message":"a","arr":[1]}`,
	`{"message":"a"} {"message":"b"}`,
	`{"message":"a",}`,
	`{"message":01}`,
	`{"message":-}`,
	`{"message":1.}`,
	`{"message":"a` + "\x01" + `"}`,
	"{\"message\":\"\xff\"}",
	`{"message":"a"`,
	`{"message" "a"}`,
	`[1]`,
	`null`,
	`{"message":tru}`,
}

// The fast path gives exactly what the full decode gives, wherever it
// answers, and answers the common documents.
func TestFlatEntryAgrees(t *testing.T) {
	fields := []string{"message", "log", "msg"}
	fast := 0
	for _, d := range flatDocs {
		if checkFlat(t, []byte(d), fields) {
			fast++
		}
	}
	if fast < 10 {
		t.Fatalf("the fast path answered %d of %d documents", fast, len(flatDocs))
	}
}

func checkFlat(t *testing.T, doc []byte, fields []string) bool {
	t.Helper()
	got, ok := flatEntry(string(doc), fields)
	if !ok {
		return false
	}
	want, err := decodeEntry(doc, fields)
	if err != nil {
		t.Fatalf("%q: the fast path took a document the decoder refuses: %v", doc, err)
	}
	if !got.TS.Equal(want.TS) || got.Text != want.Text || !reflect.DeepEqual(got.Attrs, want.Attrs) || got.Bad != want.Bad {
		t.Fatalf("%q:\nfast    %+v\ndecoded %+v", doc, got, want)
	}
	return true
}

func FuzzFlatEntry(f *testing.F) {
	for _, d := range flatDocs {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFlat(t, b, []string{"message", "log"}) })
}

// The action lines shippers send take the short way and read as the full
// decode reads them; anything else is decoded.
func TestParseActionShortWay(t *testing.T) {
	for _, l := range []string{`{"index":{}}`, ` {"create":{}} `, `{"index":{"_index":"x"}}`, `{"index":{} }`, `{"delete":{"_id":"1"}}`, `{"index":{}}x`} {
		op, act, err := parseAction(l)
		var m map[string]bulkAction
		jerr := json.Unmarshal([]byte(l), &m)
		if (err == nil) != (jerr == nil) {
			t.Fatalf("%s: parseAction err %v, json %v", l, err, jerr)
		}
		if err == nil && (len(m) != 1 || m[op] != act) {
			t.Fatalf("%s: parseAction %s %+v, json %+v", l, op, act, m)
		}
	}
	idx := `{"index":{}}`
	if n := testing.AllocsPerRun(100, func() { parseAction(idx) }); n > 0 {
		t.Fatalf("%v allocations for an index action", n)
	}
}

var quotedStrings = []string{
	``, `plain`, `a \"quoted\" word`, `C:\\path\\to`, `\/\b\f\n\r\t`, `\u00e9\u00E9`, `\ud83d\ude00`,
	`\ud83d`, `\ud83dx`, `\ude00\ud83d`, `\ud83d\u0041`, `\ud83d\ud83d\ude00`, `\u0000`, `\u12`, `\u12G4`,
	`\x`, `\`, `tail\\`, `ünï \"ç\" ✓`, `\ud83d\u12G4`,
}

// flatString reads every string encoding/json reads (valid UTF-8, no
// control byte) and gives the same text; what JSON refuses it refuses.
func TestFlatStringAgrees(t *testing.T) {
	for _, s := range quotedStrings {
		checkString(t, s)
	}
}

func checkString(t *testing.T, content string) {
	t.Helper()
	doc := `"` + content + `"`
	got, next, ok := flatString(doc, 0)
	var want string
	err := json.Unmarshal([]byte(doc), &want)
	plain := utf8.ValidString(content) && !strings.ContainsFunc(content, func(r rune) bool { return r < 0x20 })
	switch {
	case ok && next != len(doc):
		// A quote inside content ended the string: not one JSON string.
	case ok && err != nil:
		t.Fatalf("%q: read as %q, encoding/json refuses it: %v", doc, got, err)
	case ok && got != want:
		t.Fatalf("%q: read as %q, encoding/json reads %q", doc, got, want)
	case !ok && err == nil && plain:
		t.Fatalf("%q: refused, encoding/json reads %q", doc, want)
	}
}

func FuzzFlatString(f *testing.F) {
	for _, s := range quotedStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkString(t, s) })
}

// BenchmarkFlatEntry reads JSON lines as the ingest benchmark's clients send
// them: a message, a third of them with quotes, and a host attribute.
func BenchmarkFlatEntry(b *testing.B) {
	msgs := []string{
		`2026-11-29T00:00:00.010Z Normal Scheduled pod/api-7a31ff58f4-f08f8 Successfully assigned default/api-59ba0834bc-764b4 to node-8`,
		`10.1.2.3 - - [29/Nov/2026:00:00:00 +0000] "GET /api/v1/users/87368 HTTP/1.1" 200 512 "-" "curl/8.5.0"`,
		`2026-11-29T00:00:00.042Z DEBUG cache: hit key=user:87368 ttl=1941s`,
	}
	var docs []string
	for _, m := range msgs {
		d, err := json.Marshal(map[string]string{"message": m, "host": "web-1"})
		if err != nil {
			b.Fatal(err)
		}
		docs = append(docs, string(d))
	}
	fields := []string{"message"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := flatEntry(docs[i%len(docs)], fields); !ok {
			b.Fatal("not flat")
		}
	}
}

// appendBulkResponse writes what encoding/json's Encoder writes for the
// same answer as a BulkResponse of one-action BulkItems, ids from
// FrameMsgID included, for strings that need escaping.
func TestBulkResponseJSON(t *testing.T) {
	strs := []string{"", "acme", "quarry-7-3", `a"b`, `c:\d`, "<", ">", "&", "é", "\x01", "\x7f", "\xff", "\u2028"}
	for _, source := range []string{"recv-acme", `re"cv<`, ""} {
		var items []bulkItem
		var want []BulkItem
		for i, s := range strs {
			res := BulkResult{Index: s, ID: strs[(i+1)%len(strs)], Status: 200 + i*50, Result: strs[(i+2)%len(strs)]}
			if i%3 == 0 {
				res.Error = &BulkError{Type: s, Reason: strs[(i+3)%len(strs)]}
			}
			op := []string{"index", "create", s}[i%3]
			items = append(items, bulkItem{op: op, res: res})
			want = append(want, BulkItem{op: res})
			if i%2 == 0 {
				res.ID = ""
				items = append(items, bulkItem{op: op, res: res, msgID: uint64(i*1000) + 1})
				res.ID = streams.FrameMsgID(source, uint64(i*1000))
				want = append(want, BulkItem{op: res})
			}
		}
		for _, r := range []BulkResponse{{}, {Took: 12, Errors: true, Items: want}} {
			got := appendBulkResponse(nil, r.Took, r.Errors, items[:len(r.Items)], source)
			var w bytes.Buffer
			if err := json.NewEncoder(&w).Encode(r); err != nil {
				t.Fatal(err)
			}
			if string(got) != w.String() {
				t.Fatalf("appendBulkResponse\n%s\nencoding/json\n%s", got, w.String())
			}
		}
	}
}

// BenchmarkBulkResponse: the answer to a _bulk request of 1,000 documents.
func BenchmarkBulkResponse(b *testing.B) {
	var items []bulkItem
	for i := range 1000 {
		items = append(items, bulkItem{op: "index", res: BulkResult{Index: "acme", Status: 201, Result: "created"}, msgID: uint64(i) + 1})
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = appendBulkResponse(make([]byte, 0, 64+len(items)*96), 3, false, items, "recv-acme")
	}
}
