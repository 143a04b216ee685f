package producer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/streams"
)

func TestGeneratorDeterministic(t *testing.T) {
	g := NewGenerator(7, []string{"acme", "globex"})
	a := g.Lines("acme", 3000)
	if b := NewGenerator(7, []string{"acme"}).Lines("acme", 3000); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatal("same seed and tenant, different lines")
	}
	if prefix := g.Lines("acme", 100); strings.Join(prefix, "\n") != strings.Join(a[:100], "\n") {
		t.Fatal("the first n lines depend on n")
	}
	if other := g.Lines("globex", 100); strings.Join(other, "\n") == strings.Join(a[:100], "\n") {
		t.Fatal("tenants share a stream")
	}
	if c := NewGenerator(8, []string{"acme"}).Lines("acme", 100); strings.Join(c, "\n") == strings.Join(a[:100], "\n") {
		t.Fatal("seed ignored")
	}
	raw, err := io.ReadAll(g.Reader("acme", 3000))
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != strings.Join(a, "\n")+"\n" {
		t.Fatal("Reader differs from Lines")
	}
	// Variety: many distinct shapes (first word after the timestamp-ish prefix).
	distinct := map[string]bool{}
	for _, l := range a {
		if strings.Contains(l, "\n") {
			t.Fatalf("line holds a newline: %q", l)
		}
		distinct[l] = true
	}
	if len(distinct) < 2500 {
		t.Fatalf("only %d distinct lines of 3000", len(distinct))
	}
}

func TestGeneratorFamilies(t *testing.T) {
	// Every family produces at least one non-empty first line.
	s := NewGenerator(1, nil).stream("x")
	for i, f := range families {
		if l := f(s); len(l) == 0 || l[0] == "" {
			t.Fatalf("family %d: %q", i+1, l)
		}
	}
	if len(families) < 30 {
		t.Fatalf("%d families", len(families))
	}
}

func TestGenerateStage(t *testing.T) {
	js := testJS(t)
	cfg := GenerateConfig{Seed: 3, Tenants: []string{"acme", "globex"}, LinesPerTenant: 2500, Lines: Config{FrameMaxRecords: 200}}
	g, err := NewGenerate(cfg, Deps{JS: js})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	gen := NewGenerator(3, cfg.Tenants)
	for _, tenant := range cfg.Tenants {
		equalLines(t, walLines(t, js, streams.LineSubject(tenant)), gen.Lines(tenant, 2500))
	}
	if st := g.Stats(); st.Lines != 5000 || g.AckLatencies().Count() != st.Frames {
		t.Fatalf("stats %+v", st)
	}
	// A second run with more lines writes only the new ones.
	cfg.LinesPerTenant = 3000
	g2, err := NewGenerate(cfg, Deps{JS: js})
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range cfg.Tenants {
		equalLines(t, walLines(t, js, streams.LineSubject(tenant)), gen.Lines(tenant, 3000))
	}
	if err := (GenerateConfig{Tenants: []string{"a", "a", "b c"}, LinesPerTenant: -1}).Defaults().Validate(); err == nil ||
		!strings.Contains(err.Error(), "twice") || !strings.Contains(err.Error(), "lines_per_tenant") || !strings.Contains(err.Error(), "b c") {
		t.Fatalf("validate: %v", err)
	}
}

func FuzzScanner(f *testing.F) {
	for _, s := range []string{"", "a", "a\n", "a\r\nb", "\n\n", "\xff\x00\n", strings.Repeat("x", 300) + "\ny"} {
		f.Add([]byte(s), 100)
	}
	f.Fuzz(func(t *testing.T, data []byte, maxRec int) {
		if maxRec < 1 || maxRec > 1<<20 {
			return
		}
		sc := newScanner(strings.NewReader(string(data)), 5, maxRec)
		var got []line
		for {
			ln, err := sc.next()
			if err != nil {
				break
			}
			got = append(got, ln)
		}
		if ln, ok := sc.final(); ok {
			got = append(got, ln)
		}
		want := strings.Split(string(data), "\n")
		if len(data) > 0 && data[len(data)-1] == '\n' || len(data) == 0 {
			want = want[:len(want)-1]
		}
		if len(got) != len(want) {
			t.Fatalf("%d lines, want %d", len(got), len(want))
		}
		off := uint64(5)
		for i, ln := range got {
			if ln.off != off {
				t.Fatalf("line %d at %d, want %d", i, ln.off, off)
			}
			if len(want[i]) > maxRec {
				if ln.long != len(want[i]) || !strings.HasPrefix(want[i], ln.text) || len(ln.text) != min(len(want[i]), deadLetterPrefix) {
					t.Fatalf("long line %d: long %d text %d", i, ln.long, len(ln.text))
				}
			} else if ln.long != 0 || ln.text != want[i] {
				t.Fatalf("line %d = %q, want %q", i, ln.text, want[i])
			}
			off = ln.next
		}
		if off != uint64(5+len(data)) {
			t.Fatalf("end %d, want %d", off, 5+len(data))
		}
	})
}

// BenchmarkPublish measures lines/s from the generator through framing and
// the publisher into an embedded sync-always JetStream server, and reports
// the publish→ack latency quantiles.
func BenchmarkPublish(b *testing.B) {
	for _, inflight := range []int{1, 64} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			s := natstest.RunServer(b)
			_, js := natstest.Connect(b, s.URL(), streams.Config{})
			gen := NewGenerator(1, []string{"bench"})
			cfg := Config{Tenant: "bench", Source: fmt.Sprintf("bench-%d", inflight), Publisher: PublisherConfig{MaxInFlight: inflight}}.Defaults()
			// Generate first: the benchmark measures framing and publishing.
			data, err := io.ReadAll(gen.Reader("bench", b.N))
			if err != nil {
				b.Fatal(err)
			}
			l, err := newLines(cfg, Deps{JS: js}, &readerSource{r: bytes.NewReader(data), maxRec: cfg.MaxRecordBytes, skip: true}, cfg.Source)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			if err := l.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			el := time.Since(start)
			b.StopTimer()
			st := l.Stats()
			if st.Lines != uint64(b.N) {
				b.Fatalf("%d lines written, want %d", st.Lines, b.N)
			}
			h := l.AckLatencies()
			b.ReportMetric(float64(b.N)/el.Seconds(), "lines/s")
			b.ReportMetric(float64(st.Bytes)/el.Seconds()/1e6, "MB/s")
			b.ReportMetric(float64(h.Quantile(0.5).Microseconds()), "p50-ack-µs")
			b.ReportMetric(float64(h.Quantile(0.99).Microseconds()), "p99-ack-µs")
			b.ReportMetric(float64(st.Frames), "frames")
		})
	}
}

func BenchmarkGenerator(b *testing.B) {
	r := NewGenerator(1, []string{"bench"}).Reader("bench", b.N)
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n / int64(max(b.N, 1)))
}

// The generated streams must not change between versions: a generated
// source resumes like a file, by re-reading its stream up to its position.
func TestGeneratorStreamPinned(t *testing.T) {
	h := sha256.New()
	if _, err := io.Copy(h, NewGenerator(1, []string{"acme"}).Reader("acme", 50000)); err != nil {
		t.Fatal(err)
	}
	const want = "36843daee4ee22aaadba6c27cefc9eff51dd919027baa0e36ce6437d07014e50"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Fatalf("acme's first 50000 lines hash to %s, want %s", got, want)
	}
}

func TestGeneratorTimestamps(t *testing.T) {
	s := NewGenerator(1, nil).stream("x")
	for _, tm := range []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC),
		time.Date(2026, 11, 29, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2027, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 5, 10, 12, 30, 1, 45_000, time.UTC),
	} {
		s.t = tm
		for _, c := range []struct{ got, layout string }{
			{s.iso(), "2006-01-02T15:04:05.000Z"},
			{s.syslog(), "Jan _2 15:04:05"},
			{s.clf(), "02/Jan/2006:15:04:05 -0700"},
		} {
			if want := tm.Format(c.layout); c.got != want {
				t.Errorf("%s as %q: got %q, want %q", tm, c.layout, c.got, want)
			}
		}
	}
}

// A read fills the buffer with many lines: one line per read made the line
// source hand over a batch per line.
func TestGeneratorReaderFills(t *testing.T) {
	r := NewGenerator(1, []string{"acme"}).Reader("acme", 1000)
	p := make([]byte, 64<<10)
	n, err := r.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if lines := bytes.Count(p[:n], []byte{'\n'}); n < len(p) && lines < 1000 || lines < 100 {
		t.Fatalf("one read returned %d bytes, %d lines", n, lines)
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(NewGenerator(1, []string{"acme"}).Lines("acme", 1000), "\n") + "\n"
	if got := string(p[:n]) + string(rest); got != all {
		t.Fatalf("reader and Lines disagree (%d and %d bytes)", len(got), len(all))
	}
}
