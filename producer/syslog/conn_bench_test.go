package syslog

import (
	"bufio"
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/streams"
)

// BenchmarkConnRead is a TCP connection's own work on 1,000 of the ingest
// benchmark's lines as its client writes them (RFC 5424, newline framing,
// cmd/quarry's TestIngestBench): framing, parsing and batching as
// serveConn does, without the handing over.
func BenchmarkConnRead(b *testing.B) {
	hub, err := ingest.New(producer.Config{Tenant: "acme"}, ingest.Deps{JS: struct{ jetstream.JetStream }{}})
	if err != nil {
		b.Fatal(err)
	}
	s := &Server{hub: hub, rc: hub.Config(), cfg: Config{Location: time.UTC}}
	var body bytes.Buffer
	for _, l := range producer.NewGenerator(1, []string{"acme"}).Lines("acme", 1000) {
		fmt.Fprintf(&body, "<14>1 2026-11-29T10:00:00Z host-1 app - - - %s\n", l)
	}
	b.SetBytes(int64(body.Len()))
	b.ReportAllocs()
	rd := bytes.NewReader(body.Bytes())
	r := bufio.NewReaderSize(rd, 64<<10)
	batch := make([]producer.Entry, 0, 16)
	var attrs []streams.Attr
	for b.Loop() {
		rd.Reset(body.Bytes())
		r.Reset(rd)
		fr := &framer{r: r, max: s.rc.MaxLineBytes}
		now := time.Now()
		for {
			msg, bad, err := fr.next()
			if err != nil {
				break
			}
			batch = append(batch, s.entry(msg, bad, now, &attrs))
			if len(batch) >= batchMessages || r.Buffered() == 0 {
				batch = make([]producer.Entry, 0, len(batch))
			}
		}
	}
}

// Entries cut their attributes from one slab and keep each its own: every
// entry's attributes are its message's after all are made, and none can
// grow into the next's.
func TestEntryAttrsSlab(t *testing.T) {
	hub, err := ingest.New(producer.Config{Tenant: "acme"}, ingest.Deps{JS: struct{ jetstream.JetStream }{}})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{hub: hub, rc: hub.Config(), cfg: Config{Location: time.UTC}}
	var msgs [][]byte
	for i := range 3000 {
		sd := "-"
		if i%3 == 1 {
			sd = fmt.Sprintf(`[ex@1 a="%d" b="x"]`, i)
		}
		msgs = append(msgs, fmt.Appendf(nil, "<%d>1 2026-11-29T10:00:00Z host-%d app%d %d - %s line %d", i%192, i, i%5, i, sd, i))
	}
	msgs = append(msgs, []byte("<13>Nov 29 10:00:00 h tag: bsd"))
	var slab []streams.Attr
	var got []producer.Entry
	for _, m := range msgs {
		got = append(got, s.entry(m, "", time.Now(), &slab))
	}
	for i, m := range msgs {
		pm, err := Parse(m, time.Now(), time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if want := pm.Attrs(); !reflect.DeepEqual(got[i].Attrs, want) || cap(got[i].Attrs) != len(got[i].Attrs) {
			t.Fatalf("message %d: attrs %v (cap %d), want %v", i, got[i].Attrs, cap(got[i].Attrs), want)
		}
	}
}
