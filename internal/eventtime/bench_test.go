package eventtime

import (
	"testing"
	"time"
)

func benchParse(b *testing.B, line string, wantOK bool) {
	p, err := New(Defaults())
	if err != nil {
		b.Fatal(err)
	}
	p.SetReference(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	l := []byte(line)
	if _, _, ok := p.Parse(l); ok != wantOK {
		b.Fatalf("%q: ok = %v", line, ok)
	}
	b.SetBytes(int64(len(l)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuNanos()
	for range b.N {
		p.Parse(l)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mlines/s")
	if cpu := cpuNanos() - cpu0; cpu > 0 {
		// CPU time, not wall time: per core even on a busy machine.
		b.ReportMetric(float64(b.N)/(float64(cpu)/1e9)/1e6, "Mlines/cpu-s")
	}
}

func BenchmarkParseISO(b *testing.B) {
	benchParse(b, "2026-11-29T00:00:00.010Z INFO [main] org.example.Server: started in 12 ms", true)
}

func BenchmarkParseLog4j(b *testing.B) {
	benchParse(b, "2015-10-18 18:01:47,978 INFO [main] org.apache.hadoop.mapreduce.v2.app.MRAppMaster: Created", true)
}

func BenchmarkParseSyslog(b *testing.B) {
	benchParse(b, "Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure; logname= uid=0", true)
}

func BenchmarkParseEpochField(b *testing.B) {
	benchParse(b, "134681 node-246 unix.hw state_change.unavailable 1077804742 1 Component State Change", true)
}

func BenchmarkParseNone(b *testing.B) {
	benchParse(b, "PacketResponder 1 for block blk_38865049064139660 terminating after 42 attempts from 10.0.0.1", false)
}

func BenchmarkParseNoneDigits(b *testing.B) {
	benchParse(b, "12 34 56 78 90 blk_38865049064139660 terminating after 42 attempts from 10.0.0.1", false)
}

func BenchmarkRenderISO(b *testing.B) {
	p, _ := New(Defaults())
	m, res, _ := p.Parse([]byte("2026-11-29T00:00:00.010Z x"))
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for range b.N {
		buf = Render(buf[:0], m.Time, m.Layout, res)
	}
}
