package producer

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/streams"
)

// stamped is what a record's time should be: an event time (at), the
// previous line's (at, previous), or the read time (read).
type stamped struct {
	at   string // RFC 3339 with fraction, UTC; "" for read time
	src  streams.TSSource
	text string
}

func ev(at, text string) stamped   { return stamped{at, streams.TSEvent, text} }
func prev(at, text string) stamped { return stamped{at, streams.TSPrevious, text} }
func read(text string) stamped     { return stamped{"", streams.TSRead, text} }

// checkStamps checks recs against want: text byte for byte, ts source, and
// ts (an event time exactly, a read time between from and to).
func checkStamps(t *testing.T, recs []streams.Record, want []stamped, from, to time.Time) {
	t.Helper()
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, w := range want {
		r := recs[i]
		if r.Text != w.text {
			t.Errorf("record %d text %q, want %q (the line must not change)", i, r.Text, w.text)
		}
		ts := time.Unix(0, r.TS).UTC()
		if r.TSSource != w.src {
			t.Errorf("record %d %q: ts source %s (%s), want %s", i, w.text, r.TSSource, ts.Format(time.RFC3339Nano), w.src)
			continue
		}
		if w.at == "" {
			if ts.Before(from) || ts.After(to) {
				t.Errorf("record %d %q: ts %s is not a read time in [%s, %s]", i, w.text, ts, from, to)
			}
			continue
		}
		want, err := time.Parse(time.RFC3339Nano, w.at)
		if err != nil {
			t.Fatal(err)
		}
		if !ts.Equal(want) {
			t.Errorf("record %d %q: ts %s, want %s", i, w.text, ts.Format(time.RFC3339Nano), w.at)
		}
	}
}

func walRecords(t *testing.T, frames []*streams.Frame) []streams.Record {
	var recs []streams.Record
	for _, f := range frames {
		recs = append(recs, f.Records...)
	}
	return recs
}

// Each timestamp mode of a file source: the record's ts is the line's event
// time, a continuation line's the line's before it, a line with none before
// it its read time; the text is never changed.
func TestEventTimeModes(t *testing.T) {
	js := testJS(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		et   eventtime.Config
		want []stamped
	}{
		{"auto", eventtime.Config{}, []stamped{
			read("starting up, no time yet"),
			ev("2026-11-29T00:00:00.010Z", "2026-11-29T00:00:00.010Z INFO web: GET / 200"),
			ev("2015-10-18T18:01:47.978Z", "2015-10-18 18:01:47,978 INFO [main] org.apache.hadoop: started"),
			prev("2015-10-18T18:01:47.978Z", "java.lang.IllegalStateException: boom"),
			prev("2015-10-18T18:01:47.978Z", "\tat org.apache.Foo.bar(Foo.java:42)"),
			ev("2005-12-04T04:47:44Z", "[Sun Dec 04 04:47:44 2005] [error] mod_jk child workerEnv in error state 6"),
			ev("2008-11-09T20:36:15Z", "081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1"),
			ev("2017-12-23T22:15:29.606Z", "20171223-22:15:29:606|Step_LSC|30002312|onStandStepChanged 3579"),
			ev("2000-10-10T20:55:36Z", `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326`),
			ev("2005-06-03T22:42:50Z", "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 RAS KERNEL INFO instruction cache parity error corrected"),
			ev("2005-06-03T22:42:50.123Z", "1117838570123 job done"),
			ev("2026-11-29T01:02:03+01:00", "2026-11-29T01:02:03+01:00 zoned"),
		}},
		{"none", eventtime.Config{Mode: eventtime.ModeNone}, []stamped{
			read("2026-11-29T00:00:00.010Z INFO web: GET / 200"),
			read("\tat org.apache.Foo.bar(Foo.java:42)"),
		}},
		{"fixed layout", eventtime.Config{Mode: "clf"}, []stamped{
			read("2026-11-29T00:00:00.010Z not clf, so no time"),
			ev("2000-10-10T20:55:36Z", `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2326`),
			prev("2000-10-10T20:55:36Z", "2026-11-29T00:00:00.010Z iso again: continuation"),
		}},
		{"zone-less in Europe/Berlin", eventtime.Config{Zone: "Europe/Berlin"}, []stamped{
			ev("2015-10-18T16:01:47.978Z", "2015-10-18 18:01:47,978 summer time, +02:00"),
			ev("2015-12-18T17:01:47.978Z", "2015-12-18 18:01:47,978 winter time, +01:00"),
			ev("2015-12-18T18:01:47Z", "2015-12-18T18:01:47Z a zone in the text wins"),
			ev("2005-12-04T03:47:44Z", "[Sun Dec 04 04:47:44 2005] ctime"),
		}},
		{"zone-less at +05:30", eventtime.Config{Mode: "iso8601", Zone: "+05:30"}, []stamped{
			ev("2015-10-18T12:31:47.978Z", "2015-10-18 18:01:47,978 INFO x"),
			prev("2015-10-18T12:31:47.978Z", "081109 203615 not iso8601"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tenant := "t-" + strings.NewReplacer(" ", "-", "/", "-", ":", "-", "+", "-").Replace(tc.name)
			var lines []string
			for _, w := range tc.want {
				lines = append(lines, w.text)
			}
			path := filepath.Join(dir, tenant)
			writeFile(t, path, lines, false)
			l, err := NewFile(Config{Tenant: tenant, EventTime: tc.et}, Deps{JS: js}, path)
			if err != nil {
				t.Fatal(err)
			}
			from := time.Now()
			runLines(t, l)
			checkStamps(t, walRecords(t, walFrames(t, js, streams.LineSubject(tenant))), tc.want, from, time.Now())
		})
	}
}

// A bad timestamp or timezone is refused when the source is made, naming the
// key.
func TestEventTimeConfigRejected(t *testing.T) {
	for _, tc := range []struct {
		et   eventtime.Config
		want string
	}{
		{eventtime.Config{Mode: "iso9999"}, "producer.timestamp"},
		{eventtime.Config{Zone: "Mars/Olympus"}, "producer.timezone"},
	} {
		cfg := Config{Tenant: "acme", EventTime: tc.et}.Defaults()
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate = %v, want an error naming %s", tc.et, err, tc.want)
		}
		if _, err := NewFile(Config{Tenant: "acme", EventTime: tc.et}, Deps{JS: testJS(t)}, "x"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: NewFile = %v, want an error naming %s", tc.et, err, tc.want)
		}
	}
	if c := (Config{}).Defaults(); c.EventTime != eventtime.Defaults() {
		t.Errorf("default event time %+v, want %+v", c.EventTime, eventtime.Defaults())
	}
}

// stampAll stamps lines read at the given times with one stamper.
func stampAll(t *testing.T, et eventtime.Config, reads []time.Time, texts []string) []streams.Record {
	t.Helper()
	s, err := newStamper(et)
	if err != nil {
		t.Fatal(err)
	}
	var recs []streams.Record
	for i, text := range texts {
		ln := line{text: text, read: reads[i].UnixNano()}
		s.stamp(&ln)
		recs = append(recs, streams.Record{TS: ln.ts, TSSource: ln.tsSrc, Text: ln.text})
	}
	return recs
}

// A syslog line carries no year: the first takes the year that puts it
// nearest before its read time, the next ones roll over at New Year.
func TestEventTimeSyslogAcrossNewYear(t *testing.T) {
	readAt := time.Date(2027, 1, 1, 0, 0, 30, 0, time.UTC)
	want := []stamped{
		ev("2026-12-31T23:59:58Z", "Dec 31 23:59:58 host sshd[42]: session opened"),
		prev("2026-12-31T23:59:58Z", "  continued"),
		ev("2026-12-31T23:59:59Z", "Dec 31 23:59:59 host cron[7]: tick"),
		ev("2027-01-01T00:00:01Z", "Jan  1 00:00:01 host cron[7]: happy new year"),
		ev("2027-01-01T00:00:02Z", "Jan 1 00:00:02 host cron[7]: tock"),
	}
	var texts []string
	var reads []time.Time
	for _, w := range want {
		texts = append(texts, w.text)
		reads = append(reads, readAt)
	}
	checkStamps(t, stampAll(t, eventtime.Config{}, reads, texts), want, readAt, readAt)

	// Read a day later, a December line is still of the year before.
	later := readAt.Add(24 * time.Hour)
	checkStamps(t, stampAll(t, eventtime.Config{Mode: "syslog"}, []time.Time{later}, []string{"Dec 31 23:59:58 x"}),
		[]stamped{ev("2026-12-31T23:59:58Z", "Dec 31 23:59:58 x")}, later, later)
}

// Lines of a stdin reader and of the ingest subject are stamped the same
// way.
func TestEventTimeReaderAndSubject(t *testing.T) {
	js := testJS(t)
	want := []stamped{
		read("no time yet"),
		ev("2026-11-29T00:00:00.010Z", "2026-11-29T00:00:00.010Z first"),
		prev("2026-11-29T00:00:00.010Z", "  continuation"),
		ev("2026-11-28T00:00:00Z", "2026-11-28T00:00:00Z out of order"),
	}
	var texts []string
	for _, w := range want {
		texts = append(texts, w.text)
	}
	input := strings.Join(texts, "\n") + "\n"

	l, err := NewReader(Config{Tenant: "stdin"}, Deps{JS: js}, bytes.NewReader([]byte(input)))
	if err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	runLines(t, l)
	checkStamps(t, walRecords(t, walFrames(t, js, streams.LineSubject("stdin"))), want, from, time.Now())

	l, stop := startSubject(t, js, Config{Tenant: "ingest", Linger: 5 * time.Millisecond})
	from = time.Now()
	if err := js.Conn().Publish(IngestSubject("ingest"), []byte(input)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return l.Stats().Lines >= uint64(len(want)) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkStamps(t, walRecords(t, walFrames(t, js, streams.LineSubject("ingest"))), want, from, time.Now())
}

// The progress fact's finalized time is the read time of the last acked
// line, not its event time: event times come out of order (here a backfill
// of 2015, last line older than the first), and a reader of the progress
// may take "finalized until T" to mean no line with a time before T is
// still to come, which only the producer's own clock can promise.
func TestFinalizedIsReadTime(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "old.log")
	writeFile(t, path, []string{"2015-10-18 18:01:47,978 b", "2015-10-17 09:00:00,000 a"}, false)
	l, err := NewFile(Config{Tenant: "acme"}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	runLines(t, l)
	recs := walRecords(t, walFrames(t, js, streams.LineSubject("acme")))
	if len(recs) != 2 || recs[1].TSSource != streams.TSEvent || time.Unix(0, recs[1].TS).Year() != 2015 {
		t.Fatalf("records %+v: want event times of 2015", recs)
	}
	kv, err := js.KeyValue(context.Background(), streams.ProgressBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), l.Source())
	if err != nil {
		t.Fatal(err)
	}
	p, err := streams.DecodeProgress(e.Value())
	if err != nil {
		t.Fatal(err)
	}
	if p.FinalizedUntil.Before(from) || p.FinalizedUntil.After(time.Now()) {
		t.Fatalf("finalized until %s, want the read time of the last line (after %s)", p.FinalizedUntil, from)
	}
}

// BenchmarkStamp measures stamping the generator's lines (auto), which runs
// on the reader goroutine for every line read.
func BenchmarkStamp(b *testing.B) {
	lines := NewGenerator(1, []string{"bench"}).Lines("bench", 4096)
	s, err := newStamper(eventtime.Config{})
	if err != nil {
		b.Fatal(err)
	}
	read := time.Now().UnixNano()
	var n int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ln := line{text: lines[i%len(lines)], read: read}
		s.stamp(&ln)
		if ln.tsSrc == streams.TSEvent {
			n++
		}
	}
	b.ReportMetric(float64(n)/float64(b.N), "event-fraction")
}
