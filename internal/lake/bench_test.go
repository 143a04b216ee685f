package lake_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
)

// BenchmarkQuery measures rendering committed records from 8 files of 50k
// rows each whose WAL ranges interleave (two tenants, two dates, two
// encoders), i.e. the merge keeps several files open.
func BenchmarkQuery(b *testing.B) {
	f := newFixture(b)
	f.commit(f.tpl, 1, f.templatesFile("enc", []lake.TemplateRow{
		{TemplateID: 1, Tenant: "a", Version: 1, Template: "user <*> logged in from <*> port <*> ssh2", Kind: "created", WALSeq: 1}}))
	const perFile = 50_000
	var adds []delta.Add
	for fi := 0; fi < 8; fi++ {
		rows := make([]lake.RecordRow, perFile)
		for i := range rows {
			seq := int64(i*8 + fi + 1)
			rows[i] = lake.RecordRow{WALSeq: seq, TS: time.Date(2026, 1, 1+fi%2, 0, 0, 0, 0, time.UTC).UnixMicro() + seq,
				TemplateID: 1, TemplateVersion: 1, Params: []string{fmt.Sprint("u", i), "10.0.0.1", fmt.Sprint(i % 65536)}, Source: "s"}
		}
		adds = append(adds, f.recordsFile([]string{"a", "b"}[fi/4%2], []string{"2026-01-01", "2026-01-02"}[fi%2], fmt.Sprint("enc", fi), rows))
	}
	f.commit(f.rec, int64(8*perFile), adds...)
	l := lake.Open(f.store)
	b.ResetTimer()
	for b.Loop() {
		n := 0
		if err := l.Query(f.ctx, lake.Filter{}, func(lake.Record) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n != 8*perFile {
			b.Fatalf("%d records", n)
		}
	}
	b.ReportMetric(float64(8*perFile)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
