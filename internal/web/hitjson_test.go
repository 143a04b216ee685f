package web

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/quarrylake/quarry/internal/lake"
)

// hitReference is a hit line as encoding/json writes it from the struct
// the search API documents: the reference for the hand-written hits.
func hitReference(t *testing.T, typ string, h Hit) string {
	t.Helper()
	r := h.Record
	if r.Params == nil {
		r.Params = []string{}
	}
	v := struct {
		Type            string            `json:"type,omitempty"`
		WALSeq          uint64            `json:"wal_seq"`
		Index           uint32            `json:"index"`
		Tenant          string            `json:"tenant"`
		TS              time.Time         `json:"ts"`
		TemplateID      uint64            `json:"template_id"`
		TemplateVersion uint32            `json:"template_version"`
		Params          []string          `json:"params"`
		Attrs           map[string]string `json:"attrs,omitempty"`
		Source          string            `json:"source"`
		Line            string            `json:"line"`
		LineBase64      string            `json:"line_base64,omitempty"`
		Template        string            `json:"template"`
	}{typ, r.WALSeq, r.Index, r.Tenant, r.TS, r.TemplateID, r.TemplateVersion, r.Params, r.Attrs, r.Source, r.Line, "", h.Template}
	if !utf8.ValidString(r.Line) {
		v.LineBase64 = base64.StdEncoding.EncodeToString([]byte(r.Line))
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSearchHitJSON: the search API's hit lines and a Hit's MarshalJSON
// (the templates API's samples) are what encoding/json writes for the
// documented members, and a line that is not UTF-8 comes with its exact
// bytes in line_base64, as `quarry query --format jsonl` gives them.
func TestSearchHitJSON(t *testing.T) {
	hits := []Hit{
		{Record: lake.Record{WALSeq: 3, Index: 1, Tenant: "acme", TS: t0, TemplateID: 7, TemplateVersion: 2,
			Params: []string{"u42"}, Source: "app", Line: "user u42 logged in"}, Template: "user <*> logged in"},
		{Record: lake.Record{WALSeq: 4, Tenant: "acme", TS: t0.Add(1500 * time.Millisecond), TemplateID: 8, TemplateVersion: 1,
			Params: []string{"caf\xe9", "<b>&"}, Source: "app", Line: "name caf\xe9 <b>&\tx"}, Template: "name <*> <*>\tx"},
		{Record: lake.Record{WALSeq: 5, Tenant: "acme", TS: t0, TemplateID: 9, TemplateVersion: 1, Source: "otlp",
			Attrs: map[string]string{"service.name": "api", "host": "h\u2028"}, Line: "ready \"now\""}, Template: "ready \"now\""},
	}
	f := &fakeLake{n: len(hits), gen: func(i int) Hit { return hits[i] }}
	ts := newTestServer(t, f, nil)
	resp := get(t, ts, search(""))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	if len(got) != len(hits)+1 || !strings.HasPrefix(got[len(hits)], `{"type":"end","count":3,`) {
		t.Fatalf("response %q", got)
	}
	for i, h := range hits {
		if want := hitReference(t, "hit", h); got[i] != want {
			t.Errorf("hit %d\n got %s\nwant %s", i, got[i], want)
		}
		b, err := json.Marshal(&hits[i])
		if err != nil {
			t.Fatal(err)
		}
		if want := hitReference(t, "", h); string(b) != want {
			t.Errorf("MarshalJSON %d\n got %s\nwant %s", i, b, want)
		}
	}
	var m struct {
		Line       string `json:"line"`
		LineBase64 string `json:"line_base64"`
	}
	if err := json.Unmarshal([]byte(got[1]), &m); err != nil {
		t.Fatal(err)
	}
	if raw, err := base64.StdEncoding.DecodeString(m.LineBase64); err != nil || string(raw) != hits[1].Line || m.Line != "name caf\ufffd <b>&\tx" {
		t.Errorf("hit of a line that is not UTF-8: line %q, line_base64 decodes to %q (%v)", m.Line, raw, err)
	}
}

func BenchmarkSearchHitJSON(b *testing.B) {
	h := Hit{Record: lake.Record{WALSeq: 1, Index: 10, Tenant: "acme", TS: t0, TemplateID: 10, TemplateVersion: 1,
		Params: []string{"2026-11-29T00", "00", "00.113Z", "6db6e4ee-9136-4efa-9053-8d52b055950b"}, Source: "gen-acme",
		Line: "2026-11-29T00:00:00.113Z ERROR [scheduler] request 6db6e4ee-9136-4efa-9053-8d52b055950b failed: java.lang.IllegalStateException: connection closed"},
		Template: "<*>:<*>:<*> ERROR [scheduler] request <*> failed: java.lang.IllegalStateException: connection closed"}
	b.Run("hand", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = append(h.appendMembers(append(buf[:0], `{"type":"hit",`...)), '}', '\n')
		}
	})
	// What the hits cost before f0ab96b: the struct through encoding/json.
	b.Run("encoding-json", func(b *testing.B) {
		type jsonHit struct {
			Type string `json:"type"`
			lake.Record
			Template string `json:"template"`
		}
		enc := json.NewEncoder(io.Discard)
		for b.Loop() {
			_ = enc.Encode(jsonHit{"hit", h.Record, h.Template})
		}
	})
}
