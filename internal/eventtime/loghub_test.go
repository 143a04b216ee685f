package eventtime

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// datasets describes, per Loghub-2k dataset, the header shape with a few
// synthetic lines written for this test, and how the dataset's structured
// CSV spells the header time (used only when the data are present).
var datasets = []struct {
	name   string
	layout LayoutID
	// lines are synthetic lines in the dataset's header shape, each with
	// the time its header says (year-less ones in the reference's year).
	lines []struct{ line, want string }
	// header gives the header time of a structured CSV record, and whether
	// the text carries a year.
	header func(rec map[string]string) (time.Time, bool, error)
}{
	{"Android", LayoutMMDD, []struct{ line, want string }{
		{"01-02 03:04:05.006  1000  2000 I Foo: started bar=1", "2026-01-02T03:04:05.006Z"},
		{"12-31 23:59:59.999 31337 31338 E Baz: x", "2025-12-31T23:59:59.999Z"}, // after the reference: last year,
	}, parseHeader("01-02 15:04:05.000", false, "Date", "Time")},
	{"Apache", LayoutCtime, []struct{ line, want string }{
		{"[Mon Jan 02 15:04:05 2006] [error] something odd", "2006-01-02T15:04:05Z"},
		{"[Thu Feb 29 00:00:01 2024] [notice] leap", "2024-02-29T00:00:01Z"},
	}, parseHeader("Mon Jan 02 15:04:05 2006", true, "Time")},
	{"BGL", LayoutEpochSec, []struct{ line, want string }{
		{"- 1200000000 2008.01.10 R00-M0-N0 2008-01-10-13.20.00.000000 R00-M0-N0 RAS KERNEL INFO ok", "2008-01-10T21:20:00Z"},
		{"KERNSTOR 1200000001 2008.01.10 R00 2008-01-10-13.20.01.000000 R00 RAS KERNEL FATAL bad", "2008-01-10T21:20:01Z"},
	}, epochHeader("Timestamp")},
	{"HDFS", LayoutYYMMDD, []struct{ line, want string }{
		{"090102 030405 12 INFO dfs.Foo: bar", "2009-01-02T03:04:05Z"},
		{"081231 235959 7 WARN dfs.Baz$Q: qux", "2008-12-31T23:59:59Z"},
	}, func(rec map[string]string) (time.Time, bool, error) {
		d := fmt.Sprintf("%06s %06s", rec["Date"], rec["Time"]) // the CSV drops leading zeros
		tm, err := time.Parse("060102 150405", d)
		return tm, true, err
	}},
	{"HPC", LayoutEpochSec, []struct{ line, want string }{
		{"12345 node-1 unix.hw state_change.unavailable 1100000000 1 Component x", "2004-11-09T11:33:20Z"},
		{"1234567 Interconnect-0N00 switch_module error 1100000001 1 Linkerror", "2004-11-09T11:33:21Z"},
	}, epochHeader("Time")},
	{"Hadoop", LayoutISO8601Sp, []struct{ line, want string }{
		{"2016-01-02 03:04:05,678 INFO [main] org.x.Y: z", "2016-01-02T03:04:05.678Z"},
		{"2016-12-31 23:59:59,000 WARN [IPC Server] org.x.Y: z", "2016-12-31T23:59:59Z"},
	}, parseHeader("2006-01-02 15:04:05,000", true, "Date", "Time")},
	{"Linux", LayoutSyslog, []struct{ line, want string }{
		{"Jan  2 03:04:05 host sshd(pam_unix)[123]: x", "2026-01-02T03:04:05Z"},
		{"Jul 27 14:41:59 host kernel: y", "2026-07-27T14:41:59Z"},
	}, parseHeader("Jan 2 15:04:05", false, "Month", "Date", "Time")},
	{"OpenSSH", LayoutSyslog, []struct{ line, want string }{
		{"Mar  7 08:09:10 host sshd[4242]: Invalid user x", "2026-03-07T08:09:10Z"},
		{"Nov 11 11:11:11 host sshd[4243]: Accepted y", "2026-11-11T11:11:11Z"},
	}, parseHeader("Jan 2 15:04:05", false, "Date", "Day", "Time")},
	{"Proxifier", LayoutMMDotDD, []struct{ line, want string }{
		{"[01.02 03:04:05] app.exe - host:80 open through proxy", "2026-01-02T03:04:05Z"},
		{"[11.30 23:59:59] app.exe *64 - host:443 close", "2026-11-30T23:59:59Z"},
	}, parseHeader("01.02 15:04:05", false, "Time")},
	{"Spark", LayoutYYSlash, []struct{ line, want string }{
		{"16/01/02 03:04:05 INFO x.Y: z", "2016-01-02T03:04:05Z"},
		{"18/12/31 23:59:59 ERROR x.Y: z", "2018-12-31T23:59:59Z"},
	}, parseHeader("06/01/02 15:04:05", true, "Date", "Time")},
	{"Windows", LayoutISO8601Sp, []struct{ line, want string }{
		{"2017-01-02 03:04:05, Info                  CBS    x", "2017-01-02T03:04:05Z"},
		{"2017-12-31 23:59:59, Error                 CSI    y", "2017-12-31T23:59:59Z"},
	}, parseHeader("2006-01-02 15:04:05", true, "Date", "Time")},
	// The other five of the sixteen (not in ../shared/loghub2k here).
	{"HealthApp", LayoutYYYYMMDDms, []struct{ line, want string }{
		{"20180102-03:04:05:678|Step_X|123|onY 1", "2018-01-02T03:04:05.678Z"},
	}, nil},
	{"Mac", LayoutSyslog, []struct{ line, want string }{
		{"Jul  1 09:00:55 host kernel[0]: x", "2026-07-01T09:00:55Z"},
	}, nil},
	{"OpenStack", LayoutISO8601Sp, []struct{ line, want string }{
		{"nova-api.log.1.2018-01-02_03:04:05 2018-01-02 03:04:05.678 123 INFO nova.x [req-1] y", "2018-01-02T03:04:05.678Z"},
	}, nil},
	{"Thunderbird", LayoutEpochSec, []struct{ line, want string }{
		{"- 1200000000 2008.01.10 dn1 Jan 10 13:20:00 dn1/dn1 crond[1]: x", "2008-01-10T21:20:00Z"},
	}, nil},
	{"Zookeeper", LayoutISO8601Sp, []struct{ line, want string }{
		{"2018-01-02 03:04:05,678 - INFO  [main:Q@1] - x", "2018-01-02T03:04:05.678Z"},
	}, nil},
}

func parseHeader(layout string, hasYear bool, cols ...string) func(map[string]string) (time.Time, bool, error) {
	return func(rec map[string]string) (time.Time, bool, error) {
		parts := make([]string, len(cols))
		for i, c := range cols {
			parts[i] = rec[c]
		}
		tm, err := time.Parse(layout, strings.Join(parts, " "))
		return tm, hasYear, err
	}
}

func epochHeader(col string) func(map[string]string) (time.Time, bool, error) {
	return func(rec map[string]string) (time.Time, bool, error) {
		s, err := strconv.ParseInt(rec[col], 10, 64)
		return time.Unix(s, 0).UTC(), true, err
	}
}

func TestDatasetShapes(t *testing.T) {
	for _, ds := range datasets {
		t.Run(ds.name, func(t *testing.T) {
			p := newParser(t, Defaults())
			for _, l := range ds.lines {
				p.Reset()
				m, res, ok := p.Parse([]byte(l.line))
				if !ok {
					t.Fatalf("%q: no timestamp", l.line)
				}
				if m.Layout != ds.layout {
					t.Fatalf("%q: layout %s, want %s", l.line, m.Layout, ds.layout)
				}
				if got := m.Time.UTC().Format(time.RFC3339Nano); got != l.want {
					t.Fatalf("%q: %s, want %s", l.line, got, l.want)
				}
				checkRoundTrip(t, []byte(l.line), m, res)
			}
		})
	}
}

// loghubDir is where the Loghub-2k data are read in place, if present.
func loghubDir(t *testing.T) string {
	dir := os.Getenv("LOGHUB_DIR")
	if dir == "" {
		dir = "/work/shared/loghub2k"
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no Loghub data (%v); set LOGHUB_DIR", err)
	}
	return dir
}

// TestLoghub parses every line of each dataset's raw log and checks the
// time against the header time in its structured CSV.
func TestLoghub(t *testing.T) {
	dir := loghubDir(t)
	for _, ds := range datasets {
		if ds.header == nil {
			continue
		}
		t.Run(ds.name, func(t *testing.T) {
			raw, err := os.Open(filepath.Join(dir, ds.name, ds.name+"_2k.log"))
			if os.IsNotExist(err) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			cf, err := os.Open(filepath.Join(dir, ds.name, ds.name+"_2k.log_structured_corrected.csv"))
			if err != nil {
				t.Fatal(err)
			}
			defer cf.Close()
			cr := csv.NewReader(cf)
			cr.LazyQuotes = true
			head, err := cr.Read()
			if err != nil {
				t.Fatal(err)
			}
			p := newParser(t, Defaults())
			sc := bufio.NewScanner(raw)
			sc.Buffer(nil, 1<<20)
			lines, good := 0, 0
			for sc.Scan() {
				line := sc.Bytes()
				row, err := cr.Read()
				if err != nil {
					t.Fatalf("csv row %d: %v", lines+1, err)
				}
				lines++
				rec := make(map[string]string, len(head))
				for i, h := range head {
					rec[h] = row[i]
				}
				want, hasYear, err := ds.header(rec)
				if err != nil {
					t.Fatalf("line %d header: %v", lines, err)
				}
				m, res, ok := p.Parse(line)
				if !ok {
					t.Logf("line %d: no timestamp", lines)
					continue
				}
				checkRoundTrip(t, line, m, res)
				got := m.Time
				if !hasYear {
					got = time.Date(want.Year(), got.Month(), got.Day(), got.Hour(), got.Minute(), got.Second(), got.Nanosecond(), time.UTC)
				}
				if !got.Equal(want) || m.Layout != ds.layout {
					t.Logf("line %d: %s as %s, header says %s", lines, got, m.Layout, want)
					continue
				}
				good++
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d of %d lines parse to their header time", good, lines)
			if lines == 0 || good*100 < lines*99 {
				t.Fatalf("%d of %d lines parse to their header time, want ≥ 99%%", good, lines)
			}
		})
	}
}
