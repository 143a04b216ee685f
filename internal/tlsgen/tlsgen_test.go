package tlsgen

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriteVerifies(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, []string{"nats-1", "127.0.0.1", " "}, time.Hour); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, CA))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	for _, tt := range []struct {
		cert, key, host string
		usage           x509.ExtKeyUsage
	}{
		{Server, ServerKey, "nats-1", x509.ExtKeyUsageServerAuth},
		{Server, ServerKey, "127.0.0.1", x509.ExtKeyUsageServerAuth},
		{Client, ClientKey, "", x509.ExtKeyUsageClientAuth},
	} {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, tt.cert), filepath.Join(dir, tt.key))
		if err != nil {
			t.Fatalf("%s: %v", tt.cert, err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: tt.host, KeyUsages: []x509.ExtKeyUsage{tt.usage}}); err != nil {
			t.Fatalf("%s for %q: %v", tt.cert, tt.host, err)
		}
	}
	// The server certificate is not valid for another host.
	pair, _ := tls.LoadX509KeyPair(filepath.Join(dir, Server), filepath.Join(dir, ServerKey))
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "elsewhere"}); err == nil {
		t.Fatal("server certificate verified for a host it was not made for")
	}
	if a, b := Secret(16), Secret(16); len(a) != 32 || a == b {
		t.Fatalf("secrets %q %q", a, b)
	}
}
