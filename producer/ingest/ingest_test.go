package ingest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/quarrylake/quarry/internal/tlsgen"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

func TestParseTokens(t *testing.T) {
	got, err := ParseTokens(" a=acme,b=globex\nc=acme ")
	if err != nil || len(got) != 3 || got["a"] != "acme" || got["b"] != "globex" || got["c"] != "acme" {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"notoken", "=acme", "t=bad.tenant"} {
		if _, err := ParseTokens(bad); err == nil || !strings.Contains(err.Error(), TokensEnv) {
			t.Fatalf("%q: err %v", bad, err)
		}
	}
	if got, err := ParseTokens(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
}

func TestParseClientTenants(t *testing.T) {
	got, err := ParseClientTenants("web1.example.com=acme, quarry=globex")
	if err != nil || len(got) != 2 || got["web1.example.com"] != "acme" || got["quarry"] != "globex" {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"nocn", "=acme", "cn=bad.tenant"} {
		if _, err := ParseClientTenants(bad); err == nil || !strings.Contains(err.Error(), ClientTenantsEnv) {
			t.Fatalf("%q: err %v", bad, err)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	open := &Hub{}
	if ten, ok := open.Authenticate(""); !ok || ten != "" {
		t.Fatal("no tokens: every request allowed")
	}
	h := &Hub{deps: Deps{Tokens: map[string]string{"s3cret": "acme"}}}
	for tok, want := range map[string]bool{"": false, "s3cre": false, "s3cret": true, "s3cret2": false} {
		if ten, ok := h.Authenticate(tok); ok != want || (ok && ten != "acme") {
			t.Fatalf("%q: %q %v", tok, ten, ok)
		}
	}
}

func TestCheckLimits(t *testing.T) {
	h := &Hub{rc: producer.ReceiversConfig{MaxLineBytes: 10, MaxAttrs: 2, MaxAttrBytes: 8}}
	for _, tc := range []struct {
		e   producer.Entry
		bad string
	}{
		{producer.Entry{Text: "ok", Attrs: []streams.Attr{{Key: "a", Value: "1"}}}, ""},
		{producer.Entry{Text: "01234567890"}, "max_line_bytes"},
		{producer.Entry{Text: "x", Attrs: []streams.Attr{{Key: "a"}, {Key: "b"}, {Key: "c"}}}, "max_attrs"},
		{producer.Entry{Text: "x", Attrs: []streams.Attr{{Key: "abcd", Value: "efghi"}}}, "max_attr_bytes"},
		{producer.Entry{Text: "x", Bad: "already"}, "already"},
	} {
		h.Check(&tc.e)
		if (tc.bad == "") != (tc.e.Bad == "") || !strings.Contains(tc.e.Bad, tc.bad) {
			t.Fatalf("%+v: bad %q, want %q", tc.e, tc.e.Bad, tc.bad)
		}
	}
}

// The in-flight bound: never above n, except one request alone; a waiter
// gets room when it is released, or gives up at ctx's end or the stop.
func TestWeighted(t *testing.T) {
	w := newWeighted(10)
	if !w.tryAcquire(20) { // alone: granted though above the bound
		t.Fatal("a lone large request was refused")
	}
	if w.tryAcquire(1) {
		t.Fatal("granted above the bound")
	}
	got := make(chan error, 1)
	go func() { got <- w.acquire(context.Background(), 5, nil) }()
	select {
	case err := <-got:
		t.Fatalf("acquired while full: %v", err)
	default:
	}
	w.release(20)
	if err := <-got; err != nil || w.inUse() != 5 {
		t.Fatalf("after release: %v, in use %d", err, w.inUse())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := w.acquire(ctx, 6, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if err := w.acquire(context.Background(), 6, stop); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v", err)
	}
}

// TLS from the config: none without a certificate; server-only TLS
// without tls_client_ca; client certificates signed by it required with
// it (mTLS); a CA file that holds no certificate is an error naming the
// key.
func TestServerTLS(t *testing.T) {
	dir := t.TempDir()
	if err := tlsgen.Write(dir, []string{"127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	rc := producer.ReceiversConfig{TLSCert: filepath.Join(dir, tlsgen.Server), TLSKey: filepath.Join(dir, tlsgen.ServerKey)}
	if c, err := ServerTLS(producer.ReceiversConfig{}); c != nil || err != nil {
		t.Fatalf("no certificate: %v, %v", c, err)
	}
	c, err := ServerTLS(rc)
	if err != nil || c.ClientAuth != tls.NoClientCert || len(c.Certificates) != 1 {
		t.Fatalf("server-only TLS: %+v, %v", c, err)
	}
	rc.TLSClientCA = filepath.Join(dir, tlsgen.CA)
	c, err = ServerTLS(rc)
	if err != nil || c.ClientAuth != tls.RequireAndVerifyClientCert || c.ClientCAs == nil {
		t.Fatalf("mTLS: %+v, %v", c, err)
	}
	rc.TLSClientCA = filepath.Join(dir, tlsgen.ServerKey) // PEM, but no certificate
	if _, err := ServerTLS(rc); err == nil || !strings.Contains(err.Error(), "tls_client_ca") {
		t.Fatalf("no CA certificate: %v", err)
	}
}

// ReadBody reads what io.ReadAll reads, whatever the hint, in one
// allocation when the hint is the length.
func TestReadBody(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 100_000} {
		want := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		for _, hint := range []int64{-1, 0, 1, int64(n) - 1, int64(n), int64(n) + 7, 1 << 40} {
			for _, one := range []bool{false, true} {
				var rd io.Reader = bytes.NewReader(want)
				if one {
					rd = iotest.OneByteReader(rd)
				}
				got, err := ReadBody(rd, hint, 1<<20)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%d bytes, hint %d, one byte a read %v: %d bytes, %v", n, hint, one, len(got), err)
				}
			}
		}
	}
	boom := errors.New("boom")
	if _, err := ReadBody(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 3, 100); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	body := bytes.Repeat([]byte("x"), 50_000)
	br := bytes.NewReader(body)
	if a := testing.AllocsPerRun(20, func() { br.Reset(body); ReadBody(br, int64(len(body)), 1<<20) }); a != 1 {
		t.Fatalf("%v allocations with the length as hint, want 1", a)
	}
}
