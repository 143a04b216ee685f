package mining

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/quarrylake/quarry/internal/cputime"
)

// loghubDir returns the Loghub-2k directory, or "" when it is absent.
// $LOGHUB_DIR, when set, is the only place looked at.
func loghubDir() string {
	dirs := []string{"/work/shared/loghub2k", "../../../shared/loghub2k"}
	if d, ok := os.LookupEnv("LOGHUB_DIR"); ok {
		dirs = []string{d}
	}
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
	}
	return ""
}

// loghubNames returns the datasets found in dir (sorted): every D with a
// D/D_2k.log_structured_corrected.csv.
func loghubNames(dir string) []string {
	matches, _ := filepath.Glob(filepath.Join(dir, "*", "*_2k.log_structured_corrected.csv"))
	var names []string
	for _, p := range matches {
		d := filepath.Base(filepath.Dir(p))
		if filepath.Base(p) == d+"_2k.log_structured_corrected.csv" {
			names = append(names, d)
		}
	}
	sort.Strings(names)
	return names
}

// loadLoghub returns the Content column of every Loghub-2k dataset, keyed by
// dataset name, and the sorted names, or nil when the data are absent. The
// data are read from their shared location, never copied.
func loadLoghub(tb testing.TB) (map[string][]string, []string) {
	tb.Helper()
	dir := loghubDir()
	if dir == "" {
		return nil, nil
	}
	names := loghubNames(dir)
	if len(names) == 0 {
		return nil, nil
	}
	out := map[string][]string{}
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, name, name+"_2k.log_structured_corrected.csv"))
		if err != nil {
			tb.Fatalf("open %s: %v", name, err)
		}
		r := csv.NewReader(f)
		r.FieldsPerRecord = -1
		recs, err := r.ReadAll()
		f.Close()
		if err != nil {
			tb.Fatalf("read %s: %v", name, err)
		}
		ci := -1
		for i, h := range recs[0] {
			if h == "Content" {
				ci = i
			}
		}
		if ci < 0 {
			tb.Fatalf("%s: no Content column", name)
		}
		for _, rec := range recs[1:] {
			out[name] = append(out[name], rec[ci])
		}
	}
	return out, names
}

// benchLines returns all Loghub lines (dataset by dataset, each its own
// tenant) or a generated corpus when the data are absent.
func benchLines(b *testing.B) (tenants, lines []string) {
	data, names := loadLoghub(b)
	if data == nil {
		for _, l := range genCorpus(20000, 1) {
			tenants = append(tenants, "gen")
			lines = append(lines, l)
		}
		return tenants, lines
	}
	for _, name := range names {
		for _, l := range data[name] {
			tenants = append(tenants, name)
			lines = append(lines, l)
		}
	}
	return tenants, lines
}

// BenchmarkMine measures steady-state mining: the model is warmed up with
// one pass over the corpus, then every iteration mines one line.
func BenchmarkMine(b *testing.B) {
	tenants, lines := benchLines(b)
	m, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	var events []Event
	for i := range lines {
		_, events = m.Mine(tenants[i], lines[i], events[:0])
	}
	var bytes int64
	for _, l := range lines {
		bytes += int64(len(l))
	}
	b.SetBytes(bytes / int64(len(lines)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, cpuOK := cputime.Used()
	n := len(lines)
	for i := 0; i < b.N; i++ {
		k := i % n
		_, events = m.Mine(tenants[k], lines[k], events[:0])
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	if cpu1, ok := cputime.Used(); ok && cpuOK && cpu1 > cpu0 {
		// Throughput per CPU-second: with -cpu 1 this is the one-core
		// figure even when the machine is busy with other work.
		b.ReportMetric(float64(b.N)/(cpu1-cpu0).Seconds(), "lines/cpu-s")
	}
}

// BenchmarkMineCold measures mining from an empty model, template creation
// included: one iteration is a whole pass over the corpus.
func BenchmarkMineCold(b *testing.B) {
	tenants, lines := benchLines(b)
	b.ReportAllocs()
	var events []Event
	cpu0, cpuOK := cputime.Used()
	for i := 0; i < b.N; i++ {
		m, _ := New(Config{})
		for k := range lines {
			_, events = m.Mine(tenants[k], lines[k], events[:0])
		}
	}
	b.ReportMetric(float64(b.N*len(lines))/b.Elapsed().Seconds(), "lines/s")
	if cpu1, ok := cputime.Used(); ok && cpuOK && cpu1 > cpu0 {
		b.ReportMetric(float64(b.N*len(lines))/(cpu1-cpu0).Seconds(), "lines/cpu-s")
	}
}
