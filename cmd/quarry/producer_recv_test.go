package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/tlsgen"
	"github.com/quarrylake/quarry/streams"
)

// walTexts are the texts of every WAL record of tenant, sorted.
func walTexts(t *testing.T, js jetstream.JetStream, tenant string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil || m.Subject != streams.LineSubject(tenant) {
			continue
		}
		f, err := streams.DecodeFrame(m.Data)
		if err != nil {
			t.Fatalf("wal message %d: %v", seq, err)
		}
		for _, r := range f.Records {
			out = append(out, r.Text)
		}
	}
	sort.Strings(out)
	return out
}

// `quarry producer` with receivers from both places: listen_http, the TLS
// files and a line limit from producer.receivers in --config,
// --listen-syslog-tls from the flag, the bearer tokens from
// QUARRY_INGEST_TOKENS. Syslog over mTLS writes for --tenant; HTTPS
// (mTLS too: tls_client_ca covers every TLS endpoint) needs a token and
// writes for its tenant; a line above the file's max_line_bytes is
// answered 400 with the reason and the other lines are written.
func TestProducerReceivers(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	dir := t.TempDir()
	if err := tlsgen.Write(dir, []string{"127.0.0.1", "localhost"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	httpAddr, tlsAddr := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "quarry.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`producer:
  receivers:
    listen_http: %q
    tls_cert: %q
    tls_key: %q
    tls_client_ca: %q
    max_line_bytes: 200
`, httpAddr, filepath.Join(dir, tlsgen.Server), filepath.Join(dir, tlsgen.ServerKey), filepath.Join(dir, tlsgen.CA))), 0o644)
	_, cancel, done, errb := startEnv(t, map[string]string{"QUARRY_INGEST_TOKENS": "tok1=web"}, "http ingest on",
		"producer", "--nats", srv.URL(), "--config", cfg, "--tenant", "sys", "--listen-syslog-tls", tlsAddr)
	defer cancel()

	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, tlsgen.CA))
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, tlsgen.Client), filepath.Join(dir, tlsgen.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	clientTLS := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}

	c, err := tls.Dial("tcp", tlsAddr, clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	var wantSys []string
	for i := range 100 {
		m := fmt.Sprintf("<13>1 - h app - - - over tls %03d", i)
		fmt.Fprintf(c, "%d %s", len(m), m)
		wantSys = append(wantSys, fmt.Sprintf("over tls %03d", i))
	}
	c.Close()

	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: clientTLS}}
	post := func(body string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "https://"+httpAddr+"/jsonline", strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := post(`{"message":"no token"}`, nil); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s", code, b)
	}
	if code, b := post(`{"message":"wrong tenant"}`, map[string]string{"Authorization": "Bearer tok1", "X-Quarry-Tenant": "sys"}); code != http.StatusForbidden {
		t.Fatalf("token of web, tenant sys: %d %s", code, b)
	}
	body := `{"message":"https one"}` + "\n" + `{"message":"` + strings.Repeat("x", 300) + `"}` + "\n" + `{"message":"https two"}`
	if code, b := post(body, map[string]string{"Authorization": "Bearer tok1"}); code != http.StatusBadRequest || !strings.Contains(b, "max_line_bytes 200") {
		t.Fatalf("line above max_line_bytes: %d %s", code, b)
	}

	deadline := time.Now().Add(time.Minute)
	for len(walTexts(t, js, "sys")) < len(wantSys) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("producer exited %d:\n%s", code, errb.String())
	}
	if got := walTexts(t, js, "sys"); strings.Join(got, "\n") != strings.Join(wantSys, "\n") {
		t.Fatalf("tenant sys: %d lines %q, want the %d syslog lines", len(got), got, len(wantSys))
	}
	if got := walTexts(t, js, "web"); strings.Join(got, ",") != "https one,https two" {
		t.Fatalf("tenant web: %q", got)
	}
}
