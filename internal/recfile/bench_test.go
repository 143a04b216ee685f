package recfile

import (
	"bytes"
	"io"
	"runtime"
	"testing"
	"time"

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

// BenchmarkEncodeV3Mixed encodes the same rows with the datasets' lines
// interleaved one by one, renumbered in WAL order: the rows of a template
// lie apart, as in a pipeline's file of many sources, where the Loghub
// sets concatenated keep a template's rows near each other.
func BenchmarkEncodeV3Mixed(b *testing.B) {
	rows, tpl := mixedRows(benchCorpus(b))
	b.ResetTimer()
	for b.Loop() {
		if _, err := Encode(rows, tpl); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/line")
}

// mixedRows interleaves c's rows in runs of 2,000 (one Loghub set each)
// line by line and renumbers them in WAL order, frames of frameLines.
func mixedRows(c *corpus) ([]Row, Templates) {
	const set = 2000
	rows := make([]Row, 0, len(c.rows))
	for i := 0; len(rows) < len(c.rows); i++ {
		for s := 0; s*set < len(c.rows); s++ {
			if j := s*set + i; i < set && j < len(c.rows) {
				r := c.rows[j]
				r.WALSeq, r.Index = uint64(1+len(rows)/frameLines), uint32(len(rows)%frameLines)
				rows = append(rows, r)
			}
		}
	}
	return rows, c.tpl
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
		decodeV2(b, c, data)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.rows)), "ns/line")
}

// decodeV2 reads a records v2 file and renders every line.
func decodeV2(b *testing.B, c *corpus, data []byte) {
	r := parquet.NewGenericReader[v2RecordRow](bytes.NewReader(data))
	defer r.Close()
	rows := make([]v2RecordRow, 256)
	for {
		n, err := r.Read(rows)
		for _, row := range rows[:n] {
			if _, rerr := mining.Render(c.tpl[Key{uint64(row.TemplateID), uint32(row.TemplateVersion)}], row.Params); rerr != nil {
				b.Fatal(rerr)
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRatio alternates the v3 and v2 writers and readers on the same
// lines and reports v3's time over v2's, so load from other processes
// falls on both alike:
//
//	go test -run='^$' -bench=Ratio -benchtime=20x -cpu=1 -count=5 ./internal/recfile/
func BenchmarkRatio(b *testing.B) {
	c := benchCorpus(b)
	f, err := Encode(c.rows, c.tpl)
	if err != nil {
		b.Fatal(err)
	}
	v2 := c.v2File(b)
	var e3, e2, d3, d2 time.Duration
	b.ResetTimer()
	// Each step starts on a collected heap, so no step pays for the
	// garbage of the one before.
	step := func(f func()) time.Duration {
		runtime.GC()
		t := time.Now()
		f()
		return time.Since(t)
	}
	for b.Loop() {
		e3 += step(func() {
			if _, err := Encode(c.rows, c.tpl); err != nil {
				b.Fatal(err)
			}
		})
		e2 += step(func() { writeGeneric(b, v2Rows(c.rows)) })
		d3 += step(func() {
			if _, err := Decode(f.Data, c.tpl); err != nil {
				b.Fatal(err)
			}
		})
		d2 += step(func() { decodeV2(b, c, v2) })
	}
	b.ReportMetric(float64(e3)/float64(e2), "encode-v3/v2")
	b.ReportMetric(float64(d3)/float64(d2), "decode-v3/v2")
}

// BenchmarkOtherTimes is the cost of the other times of a line (kinds w
// and y, records v6), with them ("on") and without ("off", the text as
// before): encode-default encodes the 11 Loghub sets at the default level,
// decode-bgl decodes BGL's file, whose lines each carry two (docs/
// benchmarks.md, "Lake size: the other times of a line").
func BenchmarkOtherTimes(b *testing.B) {
	all := benchCorpus(b)
	bgl := loadCorpus(b, "BGL", "BGL")
	for _, shift := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[shift]
		o := defaultOptions()
		o.shift = shift
		b.Run("encode-default/"+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := encode(all.rows, all.tpl, &o); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(all.rows)), "ns/line")
		})
		if bgl == nil {
			continue
		}
		f, err := encode(bgl.rows, bgl.tpl, &o)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("decode-bgl/"+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Decode(f.Data, bgl.tpl); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bgl.rows)), "ns/line")
		})
	}
}

// BenchmarkMoreText decodes each Loghub set's file written at zstd's best
// level with every parameter in more, in WAL order, as the more list and
// as more_text (records v7): the list is read value by value, more_text
// as one byte array column. Reports ns a line over the sets.
func BenchmarkMoreText(b *testing.B) {
	var sets []*corpus
	for _, s := range loghubSets {
		if c := loadCorpus(b, s, s); c != nil {
			sets = append(sets, c)
		}
	}
	if len(sets) == 0 {
		b.Skip("no Loghub data")
	}
	for _, mode := range []string{"off", "on"} {
		o := defaultOptions()
		WithHighCompression(true)(&o)
		o.slotMin, o.sortByTpl, o.moreText = everyToMore, false, mode
		files := make([][]byte, len(sets))
		lines := 0
		for k, c := range sets {
			f, _, err := encodeOnce(c.rows, c.tpl, &o, splitNone, nil)
			if err != nil {
				b.Fatal(err)
			}
			files[k] = f.Data
			lines += len(c.rows)
		}
		b.Run("decode/"+map[string]string{"off": "list", "on": "more_text"}[mode], func(b *testing.B) {
			for b.Loop() {
				for k, c := range sets {
					if _, err := Decode(files[k], c.tpl); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
		})
	}
}
