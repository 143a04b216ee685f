package recfile

import (
	"bytes"
	"io"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/mining"
)

func benchCorpus(b *testing.B) *corpus {
	c := loadCorpus(b, "all", loghubSets...)
	if c == nil {
		b.Skip("no loghub data")
	}
	return c
}

// BenchmarkEncodeV3 and BenchmarkEncodeV2 compare the writers per line:
// records v3 against today's list<string> rows.
func BenchmarkEncodeV3(b *testing.B) {
	c := benchCorpus(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Encode(c.rows, c.tpl); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.rows)), "ns/line")
}

func BenchmarkEncodeV2(b *testing.B) {
	c := benchCorpus(b)
	b.ResetTimer()
	for b.Loop() {
		writeGeneric(b, v2Rows(c.rows))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.rows)), "ns/line")
}

// BenchmarkDecodeV3 and BenchmarkDecodeV2 compare the readers per line, each
// returning every line's text.
func BenchmarkDecodeV3(b *testing.B) {
	c := benchCorpus(b)
	f, err := Encode(c.rows, c.tpl)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := Decode(f.Data, c.tpl); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.rows)), "ns/line")
}

func BenchmarkDecodeV2(b *testing.B) {
	c := benchCorpus(b)
	data := c.v2File(b)
	b.ResetTimer()
	for b.Loop() {
		r := parquet.NewGenericReader[v2RecordRow](bytes.NewReader(data))
		rows := make([]v2RecordRow, 256)
		for {
			n, err := r.Read(rows)
			for _, row := range rows[:n] {
				if _, rerr := mining.Render(c.tpl[Key{uint64(row.TemplateID), uint32(row.TemplateVersion)}], row.Params); rerr != nil {
					b.Fatal(rerr)
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		r.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.rows)), "ns/line")
}
