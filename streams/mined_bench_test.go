package streams_test

import (
	"fmt"
	"testing"

	"github.com/quarrylake/quarry/streams"
)

// benchMined is a mined batch shaped like the ingest benchmark's (4,000
// records, about 6 parameters of about 10 bytes each, event-time
// nanosecond timestamps, no attributes).
func benchMined() *streams.MinedBatch {
	b := &streams.MinedBatch{WALSeq: 9, PrevSeq: 8, Tenant: "acme", Source: "file:/var/log/x.log", Subject: "quarry.wal.lines.acme"}
	for i := range 4000 {
		ps := make([]string, 1+i%11)
		for j := range ps {
			ps[j] = fmt.Sprintf("p%d-%x", j, i*7919)
		}
		b.Records = append(b.Records, streams.MinedRecord{Index: uint32(i), TS: 1764374400000000000 + int64(i)*1_000_000,
			TSSource: streams.TSEvent, TemplateID: uint64(1 + i%90), TemplateVersion: uint32(1 + i%3), Params: ps})
	}
	return b
}

func BenchmarkAppendMinedBatch(b *testing.B) {
	m := benchMined()
	buf := streams.AppendMinedBatch(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = streams.AppendMinedBatch(buf[:0], m)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(m.Records)), "ns/record")
}

func BenchmarkDecodeMinedBatchShared(b *testing.B) {
	m := benchMined()
	buf := streams.AppendMinedBatch(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := streams.DecodeMinedBatchShared(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(m.Records)), "ns/record")
}

// BenchmarkDecodeMinedBatchSharedInto is the encoder's decode: into one
// records array, cleared after each batch.
func BenchmarkDecodeMinedBatchSharedInto(b *testing.B) {
	m := benchMined()
	buf := streams.AppendMinedBatch(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var into streams.MinedBatch
	for b.Loop() {
		if err := streams.DecodeMinedBatchSharedInto(&into, buf); err != nil {
			b.Fatal(err)
		}
		clear(into.Records)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(m.Records)), "ns/record")
}
