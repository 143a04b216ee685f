package syslog_test

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/shippertest"
	"github.com/quarrylake/quarry/internal/tlsgen"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/producer/internal/recvtest"
	"github.com/quarrylake/quarry/producer/syslog"
)

// waitAcked waits until the hub's sources acked n lines.
func waitAcked(t *testing.T, hub *ingest.Hub, n int, daemons ...*shippertest.Daemon) {
	t.Helper()
	recvtest.Wait(t, time.Minute, func() bool {
		for _, d := range daemons {
			d.Check(t)
		}
		var acked uint64
		for _, st := range hub.Stats() {
			acked += st.Lines
		}
		return acked >= uint64(n)
	})
}

// util-linux logger over TCP (newline and octet-counted framing, RFC 5424
// and RFC 3164) and UDP: every line reaches the WAL exactly once, with its
// tag as the app attribute.
func TestLogger(t *testing.T) {
	logger := shippertest.Logger(t)
	hub, js := testHub(t, producer.ReceiversConfig{})
	s := startSyslog(t, hub, syslog.Config{Addr: "127.0.0.1:0"})
	tcp, _, _ := s.Addrs()
	p := tcpPort(tcp.String())
	var want []string
	for _, v := range []struct {
		name string
		args []string
	}{
		{"tcp-newline-5424", []string{"--tcp", "--rfc5424"}},
		{"tcp-octet-5424", []string{"--tcp", "--octet-count", "--rfc5424"}},
		{"tcp-newline-3164", []string{"--tcp", "--rfc3164"}},
		{"udp-5424", []string{"--udp", "--rfc5424"}},
	} {
		file, lines := shippertest.Numbered(t, v.name, 200)
		args := append([]string{"-n", "127.0.0.1", "-P", p, "-t", "quarrytest", "-f", file}, v.args...)
		if out, err := exec.Command(logger, args...).CombinedOutput(); err != nil {
			t.Fatalf("logger %v: %v\n%s", args, err, out)
		}
		want = append(want, lines...)
		// One logger at a time: UDP on loopback is not lost, but a burst
		// from several senders could overflow the socket buffer.
		waitAcked(t, hub, len(want))
	}
	recs := recvtest.Records(t, js, "logs")
	var got []string
	for _, r := range recs {
		got = append(got, r.Text)
		if recvtest.Attr(r, "app") != "quarrytest" || r.TSSource != 1 {
			t.Fatalf("record %q: attrs %v, time source %v", r.Text, r.Attrs, r.TSSource)
		}
	}
	shippertest.ExactlyOnce(t, got, want)
}

func tcpPort(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// rsyslog reads a file (imfile) and forwards it over TCP, once with
// octet-counted RFC 5424 and once with newline-framed RFC 3164-style
// forward format: every line reaches the WAL exactly once.
func TestRsyslog(t *testing.T) {
	hub, js := testHub(t, producer.ReceiversConfig{})
	s := startSyslog(t, hub, syslog.Config{Addr: "127.0.0.1:0"})
	tcp, _, _ := s.Addrs()
	port := tcpPort(tcp.String())
	octet, want1 := shippertest.Numbered(t, "rsyslog-octet", 500)
	plain, want2 := shippertest.Numbered(t, "rsyslog-newline", 500)
	conf := fmt.Sprintf(`global(workDirectory="WORKDIR")
module(load="imfile")
input(type="imfile" file=%q tag="octet:" ruleset="octet")
input(type="imfile" file=%q tag="plain:" ruleset="plain")
ruleset(name="octet") {
  action(type="omfwd" target="127.0.0.1" port=%q protocol="tcp" tcp_framing="octet-counted" template="RSYSLOG_SyslogProtocol23Format")
}
ruleset(name="plain") {
  action(type="omfwd" target="127.0.0.1" port=%q protocol="tcp" template="RSYSLOG_ForwardFormat")
}
`, octet, plain, port, port)
	d := shippertest.Rsyslogd(t, conf)
	want := append(want1, want2...)
	waitAcked(t, hub, len(want), d)
	recs := recvtest.Records(t, js, "logs")
	var got []string
	for _, r := range recs {
		got = append(got, r.Text)
	}
	shippertest.ExactlyOnce(t, got, want)
	for _, r := range recs {
		if app := recvtest.Attr(r, "app"); app != "octet" && app != "plain" {
			t.Fatalf("record %q: app %q", r.Text, app)
		}
	}
}

// syslog-ng reads a file and forwards it as RFC 5424 over TLS with a
// client certificate (mTLS): every line reaches the WAL exactly once.
func TestSyslogNGTLS(t *testing.T) {
	dir := t.TempDir()
	if err := tlsgen.Write(dir, []string{"127.0.0.1", "localhost"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	rc := producer.ReceiversConfig{TLSCert: filepath.Join(dir, tlsgen.Server), TLSKey: filepath.Join(dir, tlsgen.ServerKey), TLSClientCA: filepath.Join(dir, tlsgen.CA)}
	hub, js := testHub(t, rc)
	tc, err := ingest.ServerTLS(hub.Config())
	if err != nil {
		t.Fatal(err)
	}
	s := startSyslog(t, hub, syslog.Config{TLSAddr: "127.0.0.1:0", TLS: tc})
	_, _, addr := s.Addrs()
	file, want := shippertest.Numbered(t, "syslogng-tls", 1000)
	d := shippertest.SyslogNG(t, fmt.Sprintf(`
source s_in { file(%q follow-freq(0.1) flags(no-parse)); };
destination d_quarry {
  syslog("127.0.0.1" port(%s) transport("tls")
    tls(ca-file(%q) cert-file(%q) key-file(%q) peer-verify(required-trusted)));
};
log { source(s_in); destination(d_quarry); };
`, file, tcpPort(addr.String()), filepath.Join(dir, tlsgen.CA), filepath.Join(dir, tlsgen.Client), filepath.Join(dir, tlsgen.ClientKey)))
	waitAcked(t, hub, len(want), d)
	var got []string
	for _, r := range recvtest.Records(t, js, "logs") {
		got = append(got, r.Text)
	}
	shippertest.ExactlyOnce(t, got, want)
}
