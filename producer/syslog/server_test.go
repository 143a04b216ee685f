package syslog_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/tlsgen"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/producer/internal/recvtest"
	"github.com/quarrylake/quarry/producer/syslog"
	"github.com/quarrylake/quarry/streams"
)

// startSyslog runs a syslog server for hub until the test ends.
func startSyslog(t *testing.T, hub *ingest.Hub, cfg syslog.Config) *syslog.Server {
	t.Helper()
	s, err := syslog.Listen(cfg, hub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("syslog run: %v", err)
		}
	})
	return s
}

func testHub(t *testing.T, rc producer.ReceiversConfig) (*ingest.Hub, jetstream.JetStream) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	return recvtest.HubOn(t, js, producer.Config{Tenant: "logs", Receivers: rc}, nil), js
}

// waitTexts waits until the WAL holds n lines for tenant and returns them
// sorted.
func waitTexts(t *testing.T, js jetstream.JetStream, tenant string, n int) []string {
	t.Helper()
	var got []string
	recvtest.Wait(t, 30*time.Second, func() bool {
		got = recvtest.Texts(t, js, tenant)
		return len(got) >= n
	})
	sort.Strings(got)
	return got
}

// TCP with either framing, UDP: every message lands once with its time
// and attributes; a malformed one is dead-lettered with the reason, and
// the messages after it on the connection still land.
func TestTCPAndUDP(t *testing.T) {
	hub, js := testHub(t, producer.ReceiversConfig{})
	s := startSyslog(t, hub, syslog.Config{Addr: "127.0.0.1:0"})
	tcp, udp, _ := s.Addrs()

	c, err := net.Dial("tcp", tcp.String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "<34>Oct 11 22:14:15 mymachine su[123]: newline one\n")
	fmt.Fprint(c, "no pri at all\n")
	fmt.Fprint(c, "<165>1 2003-10-11T22:14:15.003Z host app 42 ID47 [ex@1 k=\"v\"] newline two\r\n")
	c.Close()

	c, err = net.Dial("tcp", tcp.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"<13>1 - h a - - - octet\none", "<13>1 - h a - - - octet two"} {
		fmt.Fprintf(c, "%d %s", len(m), m)
	}
	c.Close()

	u, err := net.Dial("udp", udp.String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(u, "<14>Jan  2 03:04:05 h udp: datagram\n")
	u.Close()

	got := waitTexts(t, js, "logs", 5)
	want := []string{"datagram", "newline one", "newline two", "octet\none", "octet two"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WAL %q, want %q", got, want)
	}
	for _, r := range recvtest.Records(t, js, "logs") {
		switch r.Text {
		case "newline two":
			if r.TSSource != streams.TSEvent || r.TS != time.Date(2003, 10, 11, 22, 14, 15, 3e6, time.UTC).UnixNano() {
				t.Fatalf("time %d %v", r.TS, r.TSSource)
			}
			if recvtest.Attr(r, "host") != "host" || recvtest.Attr(r, "app") != "app" || recvtest.Attr(r, "syslog.severity") != "notice" ||
				recvtest.Attr(r, "syslog.facility") != "local4" || recvtest.Attr(r, "sd.ex@1.k") != "v" || recvtest.Attr(r, "syslog.msgid") != "ID47" {
				t.Fatalf("attrs %v", r.Attrs)
			}
		case "newline one":
			if recvtest.Attr(r, "app") != "su" || recvtest.Attr(r, "syslog.procid") != "123" || recvtest.Attr(r, "host") != "mymachine" {
				t.Fatalf("attrs %v", r.Attrs)
			}
		}
	}
	dl := recvtest.DeadLetters(t, js)
	if len(dl) != 1 || dl[0].Payload != "no pri at all" || !strings.Contains(dl[0].Reason, "no <PRI>") {
		t.Fatalf("dead letters %+v", dl)
	}
}

// TLS with a client certificate required: a client without one is
// refused; one with it writes.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	if err := tlsgen.Write(dir, []string{"127.0.0.1"}, time.Hour); err != nil {
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
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(filepath.Join(dir, tlsgen.CA))
	pool.AppendCertsFromPEM(pem)
	if c, err := tls.Dial("tcp", addr.String(), &tls.Config{RootCAs: pool}); err == nil {
		// TLS 1.3 reports the refused certificate on the first read.
		fmt.Fprint(c, "<13>1 - h a - - - refused\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("client without certificate: read %v", err)
		}
		c.Close()
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, tlsgen.Client), filepath.Join(dir, tlsgen.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", addr.String(), &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	m := "<13>1 - h a - - - over tls one"
	fmt.Fprintf(c, "%d %s<13>1 - h a - - - over tls two\n", len(m), m)
	c.Close()
	got := waitTexts(t, js, "logs", 1)
	if !reflect.DeepEqual(got, []string{"over tls one"}) {
		// The second message is not octet-counted on an octet-counted
		// connection: the framing is lost and it is dead-lettered.
		t.Fatalf("WAL %q", got)
	}
	recvtest.Wait(t, 10*time.Second, func() bool { return len(recvtest.DeadLetters(t, js)) == 1 })
	if dl := recvtest.DeadLetters(t, js); !strings.Contains(dl[0].Reason, "framing broken") {
		t.Fatalf("dead letters %+v", dl)
	}
}

// While the WAL does not acknowledge (by construction), a connection is
// read only up to the in-flight bounds: the sender's writes stall instead
// of the receiver buffering without bound. Once the WAL acknowledges,
// every line lands exactly once.
func TestTCPBackpressure(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	gate := recvtest.NewGate(js)
	hub := recvtest.HubOn(t, gate, producer.Config{Tenant: "logs", Receivers: producer.ReceiversConfig{MaxInFlightBytes: 64 << 10, MaxLineBytes: 1024}}, nil)
	srv := startSyslog(t, hub, syslog.Config{Addr: "127.0.0.1:0"})
	tcp, _, _ := srv.Addrs()
	c, err := net.Dial("tcp", tcp.String())
	if err != nil {
		t.Fatal(err)
	}
	// ~16 MB, far above every buffer on the way (socket buffers grow to
	// 4 MiB and 6 MiB).
	const n = 150000
	pad := strings.Repeat("p", 64)
	var all []byte
	for i := range n {
		all = fmt.Appendf(all, "<13>1 - h a - - - line %07d %s\n", i, pad)
	}
	c.SetWriteDeadline(time.Now().Add(3 * time.Second))
	w, err := c.Write(all)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write of %d bytes while the WAL holds its acks: %d written, err %v; want a stalled write", len(all), w, err)
	}
	if held := hub.InFlight(); held > 64<<10+256<<10 {
		t.Fatalf("%d bytes in flight, above the bound", held)
	}
	gate.Open()
	c.SetWriteDeadline(time.Time{})
	if _, err := c.Write(all[w:]); err != nil {
		t.Fatal(err)
	}
	c.Close()
	recvtest.Wait(t, 2*time.Minute, func() bool {
		var acked uint64
		for _, st := range hub.Stats() {
			acked += st.Lines
		}
		return acked >= n
	})
	got := waitTexts(t, js, "logs", n)
	if len(got) != n {
		t.Fatalf("WAL holds %d lines, want %d", len(got), n)
	}
	for i, x := range got {
		if want := fmt.Sprintf("line %07d %s", i, pad); x != want {
			t.Fatalf("line %d: %q, want %q (lost or repeated)", i, x, want)
		}
	}
}

// The limits of producer.receivers apply to syslog: a TCP message or UDP
// datagram above max_line_bytes and a message with more than max_attrs
// attributes are dead-lettered with the limit's name; the messages around
// them land.
func TestLimits(t *testing.T) {
	hub, js := testHub(t, producer.ReceiversConfig{MaxLineBytes: 100, MaxAttrs: 8})
	s := startSyslog(t, hub, syslog.Config{Addr: "127.0.0.1:0"})
	tcp, udp, _ := s.Addrs()
	long := "<13>1 - h a - - - " + strings.Repeat("x", 120)
	c, err := net.Dial("tcp", tcp.String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "<13>1 - h a - - - tcp before\n%s\n", long)
	fmt.Fprint(c, `<13>1 - h a - - [x@1 a="1" b="2" c="3" d="4" e="5" f="6"] many attrs`+"\n")
	fmt.Fprint(c, "<13>1 - h a - - - tcp after\n")
	c.Close()
	recvtest.Wait(t, 30*time.Second, func() bool { return len(recvtest.DeadLetters(t, js)) >= 2 })
	u, err := net.Dial("udp", udp.String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(u, long)
	u.Close()
	recvtest.Wait(t, 30*time.Second, func() bool { return len(recvtest.DeadLetters(t, js)) >= 3 })
	if got := waitTexts(t, js, "logs", 2); !reflect.DeepEqual(got, []string{"tcp after", "tcp before"}) {
		t.Fatalf("WAL %q", got)
	}
	var reasons []string
	for _, d := range recvtest.DeadLetters(t, js) {
		reasons = append(reasons, d.Reason)
	}
	for i, want := range []string{"max_line_bytes", "max_attrs", "max_line_bytes"} {
		if !strings.Contains(reasons[i], want) {
			t.Fatalf("dead letter %d: reason %q, want %s (all %q)", i, reasons[i], want, reasons)
		}
	}
}

// With client tenants (ingest.ClientTenantsEnv), a syslog TLS connection
// writes for its verified client certificate's tenant, and one whose
// certificate's common name is not listed is refused before anything is
// read; plain TCP still writes for the default tenant.
func TestTLSClientTenant(t *testing.T) {
	dir := t.TempDir()
	if err := tlsgen.Write(dir, []string{"127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	rc := producer.ReceiversConfig{TLSCert: filepath.Join(dir, tlsgen.Server), TLSKey: filepath.Join(dir, tlsgen.ServerKey), TLSClientCA: filepath.Join(dir, tlsgen.CA)}
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	for _, tt := range []struct {
		name, env, tenant string
	}{
		{"listed", "quarry=acme other=globex", "acme"},
		{"not listed", "other=globex", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clients, err := ingest.ParseClientTenants(tt.env)
			if err != nil {
				t.Fatal(err)
			}
			hub := recvtest.HubWith(t, producer.Config{Tenant: "logs", Receivers: rc}, ingest.Deps{JS: js, ClientTenants: clients})
			tc, err := ingest.ServerTLS(hub.Config())
			if err != nil {
				t.Fatal(err)
			}
			s := startSyslog(t, hub, syslog.Config{Addr: "127.0.0.1:0", TLSAddr: "127.0.0.1:0", TLS: tc})
			tcp, _, addr := s.Addrs()
			pool := x509.NewCertPool()
			pem, _ := os.ReadFile(filepath.Join(dir, tlsgen.CA))
			pool.AppendCertsFromPEM(pem)
			cert, err := tls.LoadX509KeyPair(filepath.Join(dir, tlsgen.Client), filepath.Join(dir, tlsgen.ClientKey))
			if err != nil {
				t.Fatal(err)
			}
			c, err := tls.Dial("tcp", addr.String(), &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "<13>1 - h a - - - %s over tls\n", tt.name)
			if tt.tenant == "" {
				// Refused: the server closes the connection unread.
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("unlisted client certificate: read %v, want the connection closed", err)
				}
			}
			c.Close()
			p, err := net.Dial("tcp", tcp.String())
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(p, "<13>1 - h a - - - %s plain\n", tt.name)
			p.Close()
			want := 1 // the plain line
			if tt.tenant != "" {
				want = 2
			}
			waitAcked(t, hub, want)
			if got := recvtest.Texts(t, js, "logs"); !slices.Contains(got, tt.name+" plain") {
				t.Fatalf("tenant logs: %q", got)
			}
			if tt.tenant != "" {
				if got := recvtest.Texts(t, js, tt.tenant); !reflect.DeepEqual(got, []string{tt.name + " over tls"}) {
					t.Fatalf("tenant %s: %q", tt.tenant, got)
				}
			}
			for _, ten := range []string{"logs", "acme", "globex"} {
				for _, x := range recvtest.Texts(t, js, ten) {
					if x == tt.name+" over tls" && ten != tt.tenant {
						t.Fatalf("%q written for tenant %s, want %q", x, ten, tt.tenant)
					}
				}
			}
		})
	}
}

// Broken octet-counted framing: the message of the break and every byte
// the client sends after it, also what it sends once the break is
// dead-lettered (withheld until then, so that it cannot be in the
// receiver's buffer at the break), reach the dead-letter stream in order;
// nothing after the break is dropped. The connection stays open until the
// client closes it.
func TestBrokenFramingRest(t *testing.T) {
	hub, js := testHub(t, producer.ReceiversConfig{})
	s := startSyslog(t, hub, syslog.Config{Addr: "127.0.0.1:0"})
	tcp, _, _ := s.Addrs()
	c, err := net.Dial("tcp", tcp.String())
	if err != nil {
		t.Fatal(err)
	}
	m := "<13>1 - h a - - - framed"
	fmt.Fprintf(c, "%d %sx garbage", len(m), m)
	recvtest.Wait(t, 30*time.Second, func() bool { return len(recvtest.DeadLetters(t, js)) == 1 })
	if _, err := fmt.Fprint(c, " and what followed it\n12 <13>1 - h a"); err != nil {
		t.Fatalf("write after the break: %v", err)
	}
	c.Close()
	recvtest.Wait(t, 30*time.Second, func() bool { return len(recvtest.DeadLetters(t, js)) >= 2 })
	if got := waitTexts(t, js, "logs", 1); !reflect.DeepEqual(got, []string{"framed"}) {
		t.Fatalf("WAL %q", got)
	}
	dl := recvtest.DeadLetters(t, js)
	var rest string
	for _, d := range dl {
		rest += d.Payload
	}
	if want := "x garbage and what followed it\n12 <13>1 - h a"; rest != want {
		t.Fatalf("dead letters hold %q, want %q (%+v)", rest, want, dl)
	}
	if !strings.Contains(dl[0].Reason, "framing broken") || !strings.Contains(dl[len(dl)-1].Reason, "framing broken earlier") {
		t.Fatalf("reasons %+v", dl)
	}
}
