package recfile

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

// pipelineRows mines and stamps lines as the pipeline does: record times
// by the producer's rule (eventtime.Stamper), templates by the miner's
// model, frames of frame lines.
func pipelineRows(t testing.TB, lines []string, frame int) ([]Row, Templates) {
	t.Helper()
	m, err := mining.New(mining.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventtime.NewStamper(eventtime.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	read := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC).UnixNano()
	tpl := Templates{}
	rows := make([]Row, 0, len(lines))
	var events []mining.Event
	for i, line := range lines {
		ts, src := st.Stamp(line, read)
		var res mining.Result
		res, events = m.Mine("t", line, events[:0])
		for _, ev := range events {
			if ev.Kind == mining.EventCreated || ev.Kind == mining.EventChanged {
				tpl[Key{ev.ID, ev.Version}] = ev.Template
			}
		}
		rows = append(rows, Row{WALSeq: uint64(1 + i/frame), Index: uint32(i % frame), TS: ts, TSSource: streams.TSSource(src),
			TemplateID: res.ID, TemplateVersion: res.Version, Params: res.Params, Source: "file:x.log"})
	}
	return rows, tpl
}

// roundTripOptions are the encodings FuzzLinesRoundTrip writes, a bit of
// opt each: the encoder's own choices (date, zstd's best level and the
// trials it runs) and the layouts those trials pick only for larger files
// than a fuzzer's (every parameter in a typed column, every string split
// at its digits, several row groups, WAL order, dictionaries and deltas).
func roundTripOptions(opt byte) []Option {
	var opts []Option
	set := func(bit int, o Option) {
		if opt&(1<<bit) != 0 {
			opts = append(opts, o)
		}
	}
	set(0, WithDate(true))
	set(1, WithHighCompression(true))
	set(2, func(o *options) { o.digits = "on" })
	set(3, func(o *options) { o.slotMin, o.slotRows, o.moreText = 0, 0, "off" })
	set(4, func(o *options) { o.groupRows, o.rareRows = 4, 2 })
	set(5, func(o *options) { o.sortByTpl = false })
	set(6, func(o *options) { o.strings, o.ints = "dict", "delta" })
	set(7, func(o *options) { o.strings, o.tsDelta, o.walDelta = "delta", true, true })
	return opts
}

// FuzzLinesRoundTrip: lines mined and stamped as the pipeline does,
// encoded as the encoder writes them (each option) and decoded as a raw
// query reads them, render back byte for byte, in WAL order; and so do
// they once compaction has rewritten the file (DecodeRows, Encode). The encoder
// recognises timestamps among the parameters, splits digit runs, shifts
// times inside parameters and picks column layouts by trial: each a way to
// lose a byte that only a line as odd as a fuzzer's finds.
func FuzzLinesRoundTrip(f *testing.F) {
	for _, s := range []string{
		"2015-10-18 18:01:47,978 INFO dfs.DataNode: Receiving block blk_-1608999687919862906 src: /10.250.19.102:54106\n" +
			"2015-10-18 18:01:48,012 INFO dfs.DataNode: Receiving block blk_7503483334202473044 src: /10.250.10.6:40524\n" +
			"\tat org.example.Foo.bar(Foo.java:42)",
		"Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure; logname= uid=0\n" +
			"Jun 14 15:16:02 combo sshd(pam_unix)[19937]: check pass; user unknown\n" +
			"Dec 31 23:59:59 combo cron[1]: x\nJan  1 00:00:01 combo cron[2]: y",
		`time="2026-12-07T12:01:23.373140974Z" level=info msg="Starting up"` + "\n" +
			`time="2026-12-07T12:01:23.374316586Z" level=info msg="libcontainerd: started" pid=1576`,
		"[Sun Dec 04 04:47:44 2005] [notice] workerEnv.init() ok /etc/httpd/conf/workers2.properties\n" +
			"[Sun Dec 04 04:47:46 2005] [error] mod_jk child workerEnv in error state 6",
		"081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block blk_38865049064139660 terminating",
		"03-17 16:13:38.811  1702  2395 D WindowManager: printFreezingDisplayLogsopening app wtoken = AppWindowToken{9f4ef63 token=Token{a64f992 ActivityRecord{de9231d u0 com.tencent.qt.qtl/.activity.info.NewsDetailXmlActivity t761}}}, allDrawn= false",
		"20171223-22:15:29:606|Step_LSC|30002312|onStandStepChanged 3579\n20171223-22:15:29:633|Step_LSC|30002312|onExtend:1514038530000 14 0 4",
		"[10.30 16:49:06] chrome.exe - proxy.cse.cuhk.edu.hk:5070 open through proxy proxy.cse.cuhk.edu.hk:5070 HTTPS",
		`127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326`,
		"1131566461 2005.11.09 dn228 Nov 9 12:01:01 dn228/dn228 crond(pam_unix)[2915]: session closed for user root",
		"1700000000123 ms epoch\n1700000000 s epoch\nid=0x7f3a 1.50 -0.05 10.0.0.1 007 ok",
		"conn from 10.0.0.1 port 22 id 0x7f3a took 1.50 ms\nconn from 10.0.0.2 port 2222 id 0x7f3b took 0.05 ms\n" +
			"conn from 192.168.1.10 port 007 id 0xdeadbeef took -12.5 ms\nconn from 255.255.255.255 port 65535 id 0x0 took 1e5 ms",
		"caf\xe9 latin-1 \xff\xfe\nnul \x00 byte\r\n  lead and trail  \n\n\nlast",
		"Preparing to unpack .../libsystemd0_252.38-1~deb12u1_amd64.deb ...\r\nUnpacking libsystemd0:amd64 (252.38-1~deb12u1) over (252.36-1~deb12u1) ...\r",
	} {
		for _, opt := range []byte{0, 0b11, 0b1110, 0b11111010, 0b1101101} {
			f.Add(s, opt, byte(len(s)))
		}
	}
	f.Fuzz(func(t *testing.T, text string, opt, frame byte) {
		lines := strings.Split(text, "\n")
		if len(lines) > 300 {
			lines = lines[:300]
		}
		rows, tpl := pipelineRows(t, lines, 1+int(frame)%64)
		file, err := Encode(rows, tpl, roundTripOptions(opt)...)
		if err != nil {
			t.Fatalf("encode %d lines: %v", len(lines), err)
		}
		rendersLines(t, file.Data, tpl, lines)
		// As compaction rewrites it: its rows read back (DecodeRows) and
		// encoded again at zstd's best level.
		again, err := DecodeRows(file.Data, tpl)
		if err != nil {
			t.Fatalf("decode rows: %v", err)
		}
		rewritten, err := Encode(again, tpl, WithDate(opt&1 != 0), WithHighCompression(true))
		if err != nil {
			t.Fatalf("encode the rows read back: %v", err)
		}
		rendersLines(t, rewritten.Data, tpl, lines)
	})
}

// rendersLines: data's lines, rendered as a raw query reads them, are lines.
func rendersLines(t *testing.T, data []byte, tpl Templates, lines []string) {
	t.Helper()
	r, err := OpenAt(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.DecodeLines(tpl, Projection{Lines: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != len(lines) {
		t.Fatalf("%d lines decoded, %d written", l.Len(), len(lines))
	}
	var got []byte
	for x := range l.Len() {
		if got, err = l.AppendLine(got[:0], x); err != nil {
			t.Fatalf("line %d: %v", x, err)
		}
		if string(got) != lines[x] {
			t.Fatalf("line %d renders\n%q\nwritten\n%q", x, got, lines[x])
		}
	}
}
