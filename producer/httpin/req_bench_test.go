package httpin

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
)

// benchServer is a Server whose hub is never started: for the request
// benchmarks, which stop before the lines are handed over.
func benchServer(b *testing.B) *Server {
	b.Helper()
	hub, err := ingest.New(producer.Config{Tenant: "acme"}, ingest.Deps{JS: struct{ jetstream.JetStream }{}})
	if err != nil {
		b.Fatal(err)
	}
	return &Server{hub: hub, rc: hub.Config()}
}

// benchBody is a request of 1,000 of the ingest benchmark's lines as its
// client sends them (cmd/quarry's TestIngestBench): {"message": line},
// each after an index action for _bulk.
func benchBody(bulk bool) []byte {
	var buf bytes.Buffer
	for _, l := range producer.NewGenerator(1, []string{"acme"}).Lines("acme", 1000) {
		if bulk {
			buf.WriteString("{\"index\":{}}\n")
		}
		m, _ := json.Marshal(map[string]string{"message": l})
		buf.Write(m)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// BenchmarkJSONLinesRequest is the JSON-lines handler's own work on a
// request of 1,000 lines: reading the body, splitting and converting its
// lines, without the handing over (ingest) and the answer.
func BenchmarkJSONLinesRequest(b *testing.B) {
	s, body := benchServer(b), benchBody(false)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		buf, err := ingest.ReadBody(bytes.NewReader(body), int64(len(body)), s.rc.MaxBodyBytes)
		if err != nil {
			b.Fatal(err)
		}
		docs, _ := lines(bodyString(buf))
		entries := make([]producer.Entry, len(docs))
		for i, d := range docs {
			entries[i] = s.entry(d)
		}
	}
}

// BenchmarkBulkRequest is the _bulk handler's own work on a request of
// 1,000 documents: reading the body, parsing it and writing the answer,
// without the handing over (ingest).
func BenchmarkBulkRequest(b *testing.B) {
	s, body := benchServer(b), benchBody(true)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		buf, err := ingest.ReadBody(bytes.NewReader(body), int64(len(body)), s.rc.MaxBodyBytes)
		if err != nil {
			b.Fatal(err)
		}
		_, items, entryItem := parseBulk(bodyString(buf), "acme", s.entry)
		for i, it := range entryItem {
			if res := &items[it].res; res.ID == "" && res.Status < 300 {
				items[it].msgID = uint64(i) + 1
			}
		}
		_, _ = io.Discard.Write(appendBulkResponse(make([]byte, 0, 64+len(items)*96), 3, false, items, "recv-acme"))
	}
}
