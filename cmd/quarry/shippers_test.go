package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/shippertest"
	"github.com/quarrylake/quarry/internal/tlsgen"
)

// Real shippers to `quarry run --follow` with every syslog and HTTP
// listener, TLS with client certificates from the config file and client
// tenants from the environment: rsyslog (imfile -> omfwd, octet-counted
// TCP) writes for --tenant, syslog-ng's syslog() over mTLS for its
// certificate's tenant, syslog-ng's elasticsearch-http() over HTTPS for
// its path's tenant. Every line is in the lake exactly once, in its
// tenant.
func TestRunFollowShippers(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	if err := tlsgen.Write(dir, []string{"127.0.0.1", "localhost"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	ca, cert, key := filepath.Join(dir, tlsgen.CA), filepath.Join(dir, tlsgen.Client), filepath.Join(dir, tlsgen.ClientKey)
	cfg := filepath.Join(dir, "quarry.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("producer:\n  receivers:\n    tls_cert: %q\n    tls_key: %q\n    tls_client_ca: %q\n",
		filepath.Join(dir, tlsgen.Server), filepath.Join(dir, tlsgen.ServerKey), ca)), 0o644)
	sysAddr, tlsAddr, httpAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	_, cancel, done, errb := startEnv(t, map[string]string{"QUARRY_INGEST_CLIENT_TENANTS": "quarry=tls"}, "http ingest on",
		"run", "--follow", "--data", data, "--config", cfg, "--tenant", "sys", "--encoders", "1",
		"--listen-syslog", sysAddr, "--listen-syslog-tls", tlsAddr, "--listen-http", httpAddr)
	defer cancel()
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

	rsFile, rsWant := shippertest.Numbered(t, "rsyslog", 1000)
	tlsFile, tlsWant := shippertest.Numbered(t, "syslogng-tls", 1000)
	bulkFile, bulkWant := shippertest.Numbered(t, "syslogng-bulk", 1000)
	shippertest.Rsyslogd(t, fmt.Sprintf(`global(workDirectory="WORKDIR")
module(load="imfile")
input(type="imfile" file=%q tag="rs:")
action(type="omfwd" target="127.0.0.1" port=%q protocol="tcp" tcp_framing="octet-counted" template="RSYSLOG_SyslogProtocol23Format")
`, rsFile, port(sysAddr)))
	shippertest.SyslogNG(t, fmt.Sprintf(`
source s_tls { file(%q follow-freq(0.1) flags(no-parse)); };
source s_bulk { file(%q follow-freq(0.1) flags(no-parse)); };
destination d_tls {
  syslog("127.0.0.1" port(%s) transport("tls")
    tls(ca-file(%q) cert-file(%q) key-file(%q) peer-verify(required-trusted)));
};
destination d_bulk {
  elasticsearch-http(url("https://127.0.0.1:%s/bulk/_bulk") index("ignored") type("") batch-lines(100)
    tls(ca-file(%q) cert-file(%q) key-file(%q) peer-verify(yes)));
};
log { source(s_tls); destination(d_tls); };
log { source(s_bulk); destination(d_bulk); };
`, tlsFile, bulkFile, port(tlsAddr), ca, cert, key, port(httpAddr), ca, cert, key))

	want := append(append(append([]string(nil), rsWant...), tlsWant...), bulkWant...)
	lake := filepath.Join(data, "lake")
	stopWhenCommitted(t, lake, want, cancel, done, errb)
	for _, c := range []struct {
		tenant, prefix string
	}{{"sys", "rsyslog line"}, {"tls", "syslogng-tls line"}, {"bulk", "syslogng-bulk line"}} {
		raw, _ := runCLI(t, "", "query", "--lake", lake, "--tenant", c.tenant, "--format", "raw")
		if n := strings.Count(raw, "\n"); n != 1000 || strings.Count(raw, c.prefix) != 1000 {
			t.Fatalf("tenant %s holds %d lines, want its 1000 %q lines", c.tenant, n, c.prefix)
		}
	}
}
