package httpin

import (
	"encoding/json"
	"reflect"
	"testing"
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
	got, ok := flatEntry(doc, fields)
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
		op, act, err := parseAction([]byte(l))
		var m map[string]bulkAction
		jerr := json.Unmarshal([]byte(l), &m)
		if (err == nil) != (jerr == nil) {
			t.Fatalf("%s: parseAction err %v, json %v", l, err, jerr)
		}
		if err == nil && (len(m) != 1 || m[op] != act) {
			t.Fatalf("%s: parseAction %s %+v, json %+v", l, op, act, m)
		}
	}
	idx := []byte(`{"index":{}}`)
	if n := testing.AllocsPerRun(100, func() { parseAction(idx) }); n > 0 {
		t.Fatalf("%v allocations for an index action", n)
	}
}
