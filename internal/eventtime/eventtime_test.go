package eventtime

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// ref is the reference time of the tests' parsers: 2026-12-01 UTC.
var ref = time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)

func newParser(t testing.TB, cfg Config) *Parser {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.SetReference(ref)
	return p
}

// checkRoundTrip asserts the package's property: Render gives back the
// matched bytes, whatever Location the time carries.
func checkRoundTrip(t testing.TB, line []byte, m Match, res []byte) {
	t.Helper()
	if m.Start < 0 || m.End > len(line) || m.Start >= m.End {
		t.Fatalf("%q: bad span [%d,%d)", line, m.Start, m.End)
	}
	want := line[m.Start:m.End]
	for _, tm := range []time.Time{m.Time, m.Time.UTC(), m.Time.In(time.FixedZone("x", -11*3600))} {
		if got := Render(nil, tm, m.Layout, res); !bytes.Equal(got, want) {
			t.Fatalf("%q: Render(%s, %s, %q) = %q, want %q", line, tm, m.Layout, res, got, want)
		}
	}
}

func TestFormats(t *testing.T) {
	tests := []struct {
		line    string
		text    string // the timestamp's bytes
		want    string // RFC 3339 of the instant
		layout  LayoutID
		residue string
	}{
		// RFC 3339 / ISO 8601
		{"2026-11-29T00:00:00.010Z info x", "2026-11-29T00:00:00.010Z", "2026-11-29T00:00:00.01Z", LayoutISO8601, "f3"},
		{"2026-11-29T00:00:00Z x", "2026-11-29T00:00:00Z", "2026-11-29T00:00:00Z", LayoutISO8601, ""},
		{"2026-11-29T01:02:03+02:00 x", "2026-11-29T01:02:03+02:00", "2026-11-28T23:02:03Z", LayoutISO8601, "?"},
		{"2026-11-29T01:02:03.123456789-0530 x", "2026-11-29T01:02:03.123456789-0530", "2026-11-29T06:32:03.123456789Z", LayoutISO8601, "?"},
		{"2026-11-29T01:02:03-05 x", "2026-11-29T01:02:03-05", "2026-11-29T06:02:03Z", LayoutISO8601, "?"},
		{"2026-11-29t01:02:03-00:00 x", "2026-11-29t01:02:03-00:00", "2026-11-29T01:02:03Z", LayoutISO8601, "nz:dt"},
		{"2026-11-29T01:02:03 x", "2026-11-29T01:02:03", "2026-11-29T01:02:03Z", LayoutISO8601, "z-"},
		{"2026-11-29T01:02:03,5 x", "2026-11-29T01:02:03,5", "2026-11-29T01:02:03.5Z", LayoutISO8601, "z-f1s,"},
		{"2015-10-18 18:01:47,978 INFO [main] x", "2015-10-18 18:01:47,978", "2015-10-18T18:01:47.978Z", LayoutISO8601Sp, ""},
		{"2015-10-18 18:01:47.978 INFO", "2015-10-18 18:01:47.978", "2015-10-18T18:01:47.978Z", LayoutISO8601Sp, "s."},
		{"2016-09-28 04:30:30, Info  CBS", "2016-09-28 04:30:30", "2016-09-28T04:30:30Z", LayoutISO8601Sp, "f0"},
		{"2016-09-28 04:30:30.000100+01:00 x", "2016-09-28 04:30:30.000100+01:00", "2016-09-28T03:30:30.0001Z", LayoutISO8601Sp, "?"},
		{"Start-Date: 2025-06-24  14:36:25", "2025-06-24  14:36:25", "2025-06-24T14:36:25Z", LayoutISO8601Sp, "f0w1"}, // apt's history and term logs
		{"Log started: 2025-06-24  14:36:25", "2025-06-24  14:36:25", "2025-06-24T14:36:25Z", LayoutISO8601Sp, "f0w1"},
		{"2025-06-24        14:36:25.5 x", "2025-06-24        14:36:25.5", "2025-06-24T14:36:25.5Z", LayoutISO8601Sp, "f1s.w7"},
		// syslog, year from the reference
		{"Jun 14 15:16:01 combo sshd[1]: x", "Jun 14 15:16:01", "2026-06-14T15:16:01Z", LayoutSyslog, ""},
		{"Jun  4 15:16:01 combo x", "Jun  4 15:16:01", "2026-06-04T15:16:01Z", LayoutSyslog, ""},
		{"Jun 04 15:16:01 combo x", "Jun 04 15:16:01", "2026-06-04T15:16:01Z", LayoutSyslog, "p0"},
		{"Nov 9 12:01:01 dn228/dn228 x", "Nov 9 12:01:01", "2026-11-09T12:01:01Z", LayoutSyslog, "p-"},
		{"<34>Oct 11 22:14:15 mymachine su: x", "Oct 11 22:14:15", "2026-10-11T22:14:15Z", LayoutSyslog, ""},
		{"Dec 10 06:55:46.250 LabSZ x", "Dec 10 06:55:46.250", "2025-12-10T06:55:46.25Z", LayoutSyslog, "f3"},
		// ctime
		{"[Sun Dec 04 04:47:44 2005] [notice] x", "Sun Dec 04 04:47:44 2005", "2005-12-04T04:47:44Z", LayoutCtime, ""},
		{"Sun Dec  4 04:47:44 2005 x", "Sun Dec  4 04:47:44 2005", "2005-12-04T04:47:44Z", LayoutCtime, "p "},
		{"[Wed Oct 11 14:32:52.123456 2000] [core:error] x", "Wed Oct 11 14:32:52.123456 2000", "2000-10-11T14:32:52.123456Z", LayoutCtime, "f6"},
		// compact and short forms
		{"081109 203615 148 INFO dfs.DataNode: x", "081109 203615", "2008-11-09T20:36:15Z", LayoutYYMMDD, ""},
		{"03-17 16:13:38.811  1702  2395 D x", "03-17 16:13:38.811", "2026-03-17T16:13:38.811Z", LayoutMMDD, ""},
		{"20171223-22:15:29:606|Step_LSC|30002312|x", "20171223-22:15:29:606", "2017-12-23T22:15:29.606Z", LayoutYYYYMMDDms, ""},
		{"20171223-22:15:29:60|Step|x", "20171223-22:15:29:60", "2017-12-23T22:15:29.6Z", LayoutYYYYMMDDms, "f2"},
		{"[10.30 16:49:06] chrome.exe - x", "10.30 16:49:06", "2026-10-30T16:49:06Z", LayoutMMDotDD, ""},
		{"17/06/09 20:10:40 INFO spark.x: y", "17/06/09 20:10:40", "2017-06-09T20:10:40Z", LayoutYYSlash, ""},
		{"2017/06/09 20:10:40 [error] 12#0: x", "2017/06/09 20:10:40", "2017-06-09T20:10:40Z", LayoutYYYYSlash, ""},
		{"2017/06/09 20:10:40.123456 x", "2017/06/09 20:10:40.123456", "2017-06-09T20:10:40.123456Z", LayoutYYYYSlash, "f6"},
		// Apache common log format, not at the line start
		{`127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2326`, "10/Oct/2000:13:55:36 -0700", "2000-10-10T20:55:36Z", LayoutCLF, "o\xdf\x89\x03"},
		{`::1 - - [10/Oct/2000:13:55:36 +0000] "GET /"`, "10/Oct/2000:13:55:36 +0000", "2000-10-10T13:55:36Z", LayoutCLF, ""},
		// epochs, as a leading field
		{"1117838570 2005.06.03 R02 x", "1117838570", "2005-06-03T22:42:50Z", LayoutEpochSec, ""},
		{"- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 x", "1117838570", "2005-06-03T22:42:50Z", LayoutEpochSec, ""},
		{"KERNDTLB 1117838570.675872 x", "1117838570.675872", "2005-06-03T22:42:50.675872Z", LayoutEpochSec, "f6"},
		{"134681 node-246 unix.hw state_change.unavailable 1077804742 1 Component", "1077804742", "2004-02-26T14:12:22Z", LayoutEpochSec, ""},
		{"[1117838570123] x", "1117838570123", "2005-06-03T22:42:50.123Z", LayoutEpochMilli, ""},
		{"1117838570123456 x", "1117838570123456", "2005-06-03T22:42:50.123456Z", LayoutEpochMicro, ""},
		{"1117838570123456789 x", "1117838570123456789", "2005-06-03T22:42:50.123456789Z", LayoutEpochNano, ""},
		{"999999999 x", "999999999", "2001-09-09T01:46:39Z", LayoutEpochSec, ""},
		// prefixes: a level, a pid, key=value
		{"INFO 2026-11-29T00:00:00Z x", "2026-11-29T00:00:00Z", "2026-11-29T00:00:00Z", LayoutISO8601, ""},
		{"<165>1 2003-10-11T22:14:15.003Z host app", "2003-10-11T22:14:15.003Z", "2003-10-11T22:14:15.003Z", LayoutISO8601, "f3"},
		{`ts=2026-11-29T00:00:00Z level=info`, "2026-11-29T00:00:00Z", "2026-11-29T00:00:00Z", LayoutISO8601, ""},
		{`{"time":"2026-11-29T00:00:00Z","msg":"x"}`, "2026-11-29T00:00:00Z", "2026-11-29T00:00:00Z", LayoutISO8601, ""},
		{"nova-api.log.1.2017-05-16_13:53:08 2017-05-16 00:00:00.008 25746 INFO", "2017-05-16 00:00:00.008", "2017-05-16T00:00:00.008Z", LayoutISO8601Sp, "s."},
		{"2015-07-29 17:41:44,747 - INFO  [QuorumPeer] - x", "2015-07-29 17:41:44,747", "2015-07-29T17:41:44.747Z", LayoutISO8601Sp, ""},
		{"2026-11-29T00:00:00Z", "2026-11-29T00:00:00Z", "2026-11-29T00:00:00Z", LayoutISO8601, ""},
		// BGL's RAS time (IBM DB2's timestamp format)
		{"2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS", "2005-06-03-15.42.50.675872", "2005-06-03T15:42:50.675872Z", LayoutDB2, ""},
		{"2005-06-03-15.42.50 x", "2005-06-03-15.42.50", "2005-06-03T15:42:50Z", LayoutDB2, "f0"},
		// glog/klog (Kubernetes, many Go and C++ services): after the severity letter
		{"I1207 23:10:53.845933    1488 server.go:123] Starting kubelet", "1207 23:10:53.845933", "2025-12-07T23:10:53.845933Z", LayoutKlog, ""},
		{"E0102 03:04:05.000001 1 x.go:1] boom", "0102 03:04:05.000001", "2026-01-02T03:04:05.000001Z", LayoutKlog, ""},
		{"W1129 00:00:00 7 x.cc:9] y", "1129 00:00:00", "2026-11-29T00:00:00Z", LayoutKlog, "f0"},
		{"F1129 00:00:00.5 7 x.cc:9] y", "1129 00:00:00.5", "2026-11-29T00:00:00.5Z", LayoutKlog, "f1"},
		// a date alone: only when named (timestamp: yyyy.mm.dd), not in auto
		{"2005.06.03 R02-M1-N0-C:J12-U11", "2005.06.03", "2005-06-03T00:00:00Z", LayoutDotDate, ""},
	}
	seen := map[LayoutID]bool{}
	for _, tc := range tests {
		seen[tc.layout] = true
	}
	for id := LayoutID(1); id < numLayouts; id++ {
		if !seen[id] {
			t.Errorf("no test line for layout %d %s", id, id)
		}
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			cfg := Defaults()
			if tc.layout == LayoutDotDate {
				cfg.Mode = tc.layout.String()
			}
			p := newParser(t, cfg)
			m, res, ok := p.Parse([]byte(tc.line))
			if !ok {
				t.Fatalf("no match")
			}
			if got := tc.line[m.Start:m.End]; got != tc.text {
				t.Fatalf("span %q, want %q", got, tc.text)
			}
			if got := m.Time.UTC().Format(time.RFC3339Nano); got != tc.want {
				t.Fatalf("time %s, want %s", got, tc.want)
			}
			if m.Layout != tc.layout {
				t.Fatalf("layout %s, want %s", m.Layout, tc.layout)
			}
			if tc.residue != "?" && string(res) != tc.residue {
				t.Fatalf("residue %q, want %q", res, tc.residue)
			}
			checkRoundTrip(t, []byte(tc.line), m, res)
		})
	}
}

func TestNoTimestamp(t *testing.T) {
	for _, line := range []string{
		"",
		"hello world",
		"a b c d e 2026-11-29T00:00:00Z", // sixth field
		strings.Repeat("x", Window) + " 2026-11-29T00:00:00Z", // starts past Window
		"user 12345678901234567890 x",                         // too many digits
		"id=0946684800 x",                                     // leading zero
		"x1117838570 y",                                       // not a whole field
		"123456789 x",                                         // epoch before 2000
		"4102444800 x",                                        // epoch at 2100
		"2026-02-30T00:00:00Z x",                              // no such day
		"2026-11-29T24:00:00Z x",                              // hour 24
		"2026-11-29T23:59:60Z x",                              // leap second
		"2026-11-29T00:00:00.1234567891Z x",                   // ten fraction digits
		"2026-11-29T00:00:00Zulu",                             // glued to a word
		"Sat Dec 04 04:47:44 2005 x",                          // wrong weekday
		"Jun 31 15:16:01 x",                                   // June has 30 days
		"JUN 14 15:16:01 x",                                   // only title case names
		"10/Oct/2000:13:55:36 0700 x",                         // zone without sign
		"13-17 16:13:38.811 x",                                // month 13
		"version 2.2026-11-29T00:00:00Z",                      // after a '.'
		"2026-11-29",                                          // date only
		"2026-11-29         00:00:00 x",                       // more than 8 blanks
		"2026-11-29T  00:00:00Z x",                            // blanks after T
		"x=1117838570.1234567891",                             // epoch fraction too long
		"2005.06.03 x",                                        // a date alone: not in auto
		"2005-06-03-15.42 x",                                  // db2 without seconds
		"2005-06-03-15:42:50 x",                               // db2 with colons
		"X1207 23:10:53.845933 1 x.go:1] y",                   // no glog severity
		"I12070 23:10:53 x",                                   // five digits
		"I1307 23:10:53 x",                                    // month 13
		"I1207 23:10 x",                                       // no seconds
		"I1207 23:10:53x",                                     // glued to a word
		"xI1207 23:10:53 x",                                   // not a field's start
	} {
		p := newParser(t, Defaults())
		if m, _, ok := p.Parse([]byte(line)); ok {
			t.Errorf("%q: unexpected match %q as %s", line, line[m.Start:m.End], m.Layout)
		}
	}
}

func TestYearInference(t *testing.T) {
	jan := time.Date(2027, 1, 5, 8, 0, 0, 0, time.UTC)
	dec31 := time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC)
	tests := []struct {
		name  string
		ref   time.Time
		lines []string
		years []int
	}{
		{"december line read in january", jan, []string{"Dec 30 10:00:00 x"}, []int{2026}},
		{"january line read in january", jan, []string{"Jan  4 10:00:00 x"}, []int{2027}},
		{"slightly ahead of the reader", jan, []string{"Jan  6 10:00:00 x"}, []int{2027}},
		{"new year line read on new year's eve", dec31, []string{"Jan  1 00:00:10 x"}, []int{2027}},
		{"march line read in december", ref, []string{"03-17 16:13:38.811 x"}, []int{2026}},
		{"rolls over with the previous line", time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC),
			[]string{"Dec 30 23:59:59 a", "Dec 31 23:59:59 b", "Jan  1 00:00:01 c", "[01.02 00:00:00] d"},
			[]int{2026, 2026, 2027, 2027}},
		{"a late line does not go back a year", jan,
			[]string{"Jan  2 00:00:00 a", "Dec 31 23:59:00 b"}, []int{2027, 2026}},
		{"follows a line with a year", ref,
			[]string{"2019-12-31T23:00:00Z a", "Jan  1 00:00:01 b"}, []int{2019, 2020}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newParser(t, Defaults())
			p.SetReference(tc.ref)
			for i, line := range tc.lines {
				m, res, ok := p.Parse([]byte(line))
				if !ok {
					t.Fatalf("%q: no match", line)
				}
				if m.Time.Year() != tc.years[i] {
					t.Fatalf("%q: year %d, want %d", line, m.Time.Year(), tc.years[i])
				}
				if m.YearInferred != (m.Layout != LayoutISO8601) {
					t.Fatalf("%q: YearInferred %v", line, m.YearInferred)
				}
				checkRoundTrip(t, []byte(line), m, res)
			}
			p.Reset()
			if m, _, _ := p.Parse([]byte(tc.lines[0])); m.Time.Year() != tc.years[0] {
				t.Fatalf("after Reset: year %d, want %d", m.Time.Year(), tc.years[0])
			}
		})
	}
}

func TestZone(t *testing.T) {
	if _, err := time.LoadLocation("Europe/Berlin"); err != nil {
		t.Skip("no tzdata:", err)
	}
	p := newParser(t, Config{Mode: ModeAuto, Zone: "Europe/Berlin"})
	tests := []struct{ line, want string }{
		{"2015-10-18 18:01:47,978 x", "2015-10-18T16:01:47.978Z"}, // summer time
		{"2015-12-18 18:01:47,978 x", "2015-12-18T17:01:47.978Z"}, // winter
		{"2021-03-28 02:30:00,000 x", ""},                         // in the spring gap
		{"2021-10-31 02:30:00,000 x", ""},                         // ambiguous
		{"2015-10-18T18:01:47Z x", "2015-10-18T18:01:47Z"},        // the text's zone wins
		{"081109 203615 148 INFO x", "2008-11-09T19:36:15Z"},
		{"1117838570 x", "2005-06-03T22:42:50Z"},
	}
	for _, tc := range tests {
		m, res, ok := p.Parse([]byte(tc.line))
		if !ok {
			t.Fatalf("%q: no match", tc.line)
		}
		if got := m.Time.UTC().Format(time.RFC3339Nano); tc.want != "" && got != tc.want {
			t.Errorf("%q: %s, want %s", tc.line, got, tc.want)
		}
		checkRoundTrip(t, []byte(tc.line), m, res)
	}
	p = newParser(t, Config{Zone: "+05:30"})
	m, res, _ := p.Parse([]byte("2015-10-18 18:01:47,978 x"))
	if got := m.Time.UTC().Format(time.RFC3339Nano); got != "2015-10-18T12:31:47.978Z" {
		t.Errorf("fixed zone: %s", got)
	}
	checkRoundTrip(t, []byte("2015-10-18 18:01:47,978 x"), m, res)
}

func TestMode(t *testing.T) {
	lines := []string{"2026-11-29T00:00:00Z x", "Jun 14 15:16:01 x", "1117838570 x", "2015-10-18 18:01:47,978 x"}
	tests := []struct {
		mode string
		want []bool
	}{
		{"", []bool{true, true, true, true}},
		{ModeAuto, []bool{true, true, true, true}},
		{ModeNone, []bool{false, false, false, false}},
		{"iso8601", []bool{true, false, false, true}},
		{"iso8601-space", []bool{false, false, false, true}},
		{"syslog", []bool{false, true, false, false}},
		{"epoch", []bool{false, false, true, false}},
		{"epoch-ms", []bool{false, false, false, false}},
	}
	for _, tc := range tests {
		p := newParser(t, Config{Mode: tc.mode})
		for i, line := range lines {
			if _, _, ok := p.Parse([]byte(line)); ok != tc.want[i] {
				t.Errorf("mode %q, %q: ok = %v", tc.mode, line, ok)
			}
		}
	}
}

func TestConfig(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
	for id := LayoutID(1); id < numLayouts; id++ {
		if err := (Config{Mode: id.String()}).Validate(); err != nil {
			t.Errorf("layout %d: %v", id, err)
		}
	}
	err := Config{Mode: "rfc2822", Zone: "Mars/Olympus"}.Validate()
	if !errors.Is(err, ErrUnknownLayout) || !errors.Is(err, ErrUnknownZone) {
		t.Fatalf("want both errors, got %v", err)
	}
	for _, key := range []string{"timestamp: ", "timezone: ", `"rfc2822"`, `"Mars/Olympus"`} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not name %s", err, key)
		}
	}
	for _, z := range []string{"+25:00", "+1", "-05:3x"} {
		if err := (Config{Zone: z}).Validate(); !errors.Is(err, ErrUnknownZone) {
			t.Errorf("zone %q: %v", z, err)
		}
	}
	if _, err := New(Config{Mode: "bogus"}); !errors.Is(err, ErrUnknownLayout) {
		t.Fatalf("New: %v", err)
	}
}

func TestConfigYAML(t *testing.T) {
	cfg := Defaults()
	dec := yaml.NewDecoder(strings.NewReader("timestamp: syslog\ntimezone: \"+02:00\"\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg != (Config{Mode: "syslog", Zone: "+02:00"}) {
		t.Fatalf("decoded %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestLayoutIDsStable(t *testing.T) {
	// The ids are stored in the lake: this table may only grow.
	want := []string{"none", "iso8601", "iso8601-space", "syslog", "ctime", "yymmdd", "mmdd",
		"yyyymmdd-ms", "mm.dd", "clf", "yy/mm/dd", "yyyy/mm/dd", "epoch", "epoch-ms", "epoch-us", "epoch-ns"}
	for id, name := range want {
		if got := LayoutID(id).String(); got != name {
			t.Errorf("layout %d = %s, want %s", id, got, name)
		}
	}
	if got := Render([]byte("x"), time.Now(), LayoutNone, nil); string(got) != "x" {
		t.Errorf("Render of LayoutNone appended %q", got)
	}
	if LayoutID(200).Valid() || LayoutNone.Valid() || !LayoutEpochNano.Valid() {
		t.Error("Valid")
	}
}

func TestRenderGarbageResidue(t *testing.T) {
	// Render must not panic on any residue.
	tm := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	for id := LayoutID(0); id < numLayouts+2; id++ {
		for _, r := range []string{"o", "o\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", "f", "fz", "z?", "q1", "n", "p"} {
			_ = Render(nil, tm, id, []byte(r))
		}
	}
}

func TestParseAllocs(t *testing.T) {
	p := newParser(t, Config{Zone: "+02:00"})
	lines := [][]byte{
		[]byte("2026-11-29T00:00:00.010+01:00 info x"),
		[]byte("Jun 14 15:16:01 combo x"),
		[]byte("no timestamp in this line at all"),
	}
	var buf []byte
	allocs := testing.AllocsPerRun(100, func() {
		for _, l := range lines {
			m, r, ok := p.Parse(l)
			if ok {
				buf = Render(buf[:0], m.Time, m.Layout, r)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

func TestParseItem(t *testing.T) {
	near := time.Date(2005, 6, 3, 22, 42, 50, 0, time.UTC).Unix()
	tests := []struct {
		text   string
		only   LayoutID
		want   string // RFC 3339, "" for no match
		layout LayoutID
	}{
		{"2005.06.03", LayoutNone, "2005-06-03T00:00:00Z", LayoutDotDate},
		{"2005-06-03-15.42.50.675872", LayoutNone, "2005-06-03T15:42:50.675872Z", LayoutDB2},
		{"2005-06-03-15.42.50.675872", LayoutDB2, "2005-06-03T15:42:50.675872Z", LayoutDB2},
		{"2005-06-03-15.42.50.675872", LayoutDotDate, "", 0},                             // not that layout
		{"Jan  1 01:00:00", LayoutNone, "2005-01-01T01:00:00Z", LayoutSyslog},            // nearest near: within half a year
		{"Dec 31 01:00:00", LayoutNone, "2004-12-31T01:00:00Z", LayoutSyslog},            // ... not 2005-12-31
		{"Jun  3 15:42:50", LayoutNone, "2005-06-03T15:42:50Z", LayoutSyslog},            // the year of near
		{"2005-06-03-15.42.50.6758", LayoutNone, "2005-06-03T15:42:50.6758Z", LayoutDB2}, // 4 digits: residue f4
		{"2005.06.03 x", LayoutNone, "2005-06-03T00:00:00Z", LayoutDotDate},              // followed by a blank
		{"2005.06.03x", LayoutNone, "", 0},                                               // by a letter
		{"at 2005.06.03", LayoutNone, "", 0},                                             // not at its start
		{"2005.13.03", LayoutNone, "", 0},                                                // month 13
		{"R02-M1-N0", LayoutNone, "", 0},
	}
	p := newParser(t, Defaults())
	for _, tc := range tests {
		got, l, res, end, ok := p.ParseItem([]byte(tc.text), near, tc.only)
		if tc.want == "" {
			if ok {
				t.Errorf("%q: unexpected %s as %s", tc.text, got, l)
			}
			continue
		}
		if !ok || got.UTC().Format(time.RFC3339Nano) != tc.want || l != tc.layout {
			t.Errorf("%q: %s %s %v, want %s %s", tc.text, got, l, ok, tc.want, tc.layout)
			continue
		}
		if r := Render(nil, got, l, res); string(r) != tc.text[:end] || end != len(strings.TrimSuffix(tc.text, " x")) {
			t.Errorf("%q renders %q", tc.text, r)
		}
	}
	// ParseItem leaves auto as it was: a date alone is still not a line's time.
	if m, _, ok := p.Parse([]byte("2005.06.03 x")); ok {
		t.Errorf("auto found %s after ParseItem", m.Layout)
	}
}

func TestStep(t *testing.T) {
	for id := LayoutID(1); id < numLayouts; id++ {
		step := Step(id, nil)
		if step <= 0 {
			t.Fatalf("%s: step %d", id, step)
		}
		// Two instants one step apart render differently; within one step
		// the same.
		at := time.Date(2005, 6, 3, 22, 42, 50, 0, time.UTC).UnixNano() / step * step
		a := Render(nil, time.Unix(0, at), id, nil)
		b := Render(nil, time.Unix(0, at+step-1), id, nil)
		c := Render(nil, time.Unix(0, at+step), id, nil)
		if !bytes.Equal(a, b) || bytes.Equal(a, c) {
			t.Errorf("%s: step %d: %q %q %q", id, step, a, b, c)
		}
	}
	if Step(LayoutNone, nil) != 0 {
		t.Error("none has a step")
	}
	// A residue's fraction digits set it.
	if s := Step(LayoutISO8601, []byte("f3")); s != 1e6 {
		t.Errorf("iso8601 f3: step %d", s)
	}
	if s := Step(LayoutDB2, []byte("f0")); s != 1e9 {
		t.Errorf("db2 f0: step %d", s)
	}
}

// TestAppendNanos: a time kept in microseconds renders a text of
// nanoseconds exactly with the nanoseconds below the microsecond in the
// residue, through Render and through a Renderer (whose per-second cache
// must not write the fraction from the truncated time).
func TestAppendNanos(t *testing.T) {
	p := newParser(t, Defaults())
	var r Renderer
	for _, line := range []string{
		`time="2026-12-06T08:27:29.906963455Z" level=info`,
		`time="2026-12-06T08:27:29.906963456Z" level=info`, // the same second and microsecond
		`time="2026-12-06T08:27:29.908718600Z" level=info`,
		`time="2026-12-06T08:27:29.908718000Z" level=info`, // none below the microsecond
		"1117838570123456789 x",
		"2026-12-06 08:27:29.000000001 x",
	} {
		m, res, ok := p.Parse([]byte(line))
		if !ok {
			t.Fatalf("%q: no match", line)
		}
		want := line[m.Start:m.End]
		us := m.Time.Truncate(time.Microsecond)
		full := slices.Clone(res)
		if ns := m.Time.Nanosecond() % 1000; ns != 0 {
			full = AppendNanos(full, ns)
			if got := string(Render(nil, us, m.Layout, res)); got == want {
				t.Fatalf("%q renders from microseconds without its nanoseconds", line)
			}
		}
		for range 3 {
			if got := string(r.Render(nil, us, m.Layout, full)); got != want {
				t.Fatalf("%q: Renderer %q, want %q (residue %q)", line, got, want, full)
			}
		}
		if got := string(Render(nil, us, m.Layout, full)); got != want {
			t.Fatalf("%q: Render %q, want %q (residue %q)", line, got, want, full)
		}
	}
}
