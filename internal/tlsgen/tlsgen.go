// Package tlsgen writes throwaway TLS material for local deployments and
// tests: a CA, a server certificate for the given hosts and a client
// certificate, all ECDSA P-256, as PEM files. Never use them in production:
// the keys are written world-readable so that containers running as a
// non-root user can read them through a bind mount.
package tlsgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Files written by Write.
const (
	CA        = "ca.pem"
	Server    = "server.pem"
	ServerKey = "server-key.pem"
	Client    = "client.pem"
	ClientKey = "client-key.pem"
)

// Write writes CA, Server/ServerKey (valid for hosts: DNS names or IP
// addresses) and Client/ClientKey into dir, valid from an hour ago until
// valid from now.
func Write(dir string, hosts []string, valid time.Duration) error {
	// Valid from an hour ago (clock skew between hosts) until valid from now.
	notBefore, notAfter := time.Now().Add(-time.Hour), time.Now().Add(valid)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("ca key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "quarry throwaway CA", Organization: []string{"quarry"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("ca certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("ca certificate: %w", err)
	}
	if err := writePEM(filepath.Join(dir, CA), "CERTIFICATE", caDER); err != nil {
		return err
	}
	leaf := func(cert, keyFile, cn string, usage []x509.ExtKeyUsage, hosts []string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("%s key: %w", cn, err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn, Organization: []string{"quarry"}},
			NotBefore:    notBefore,
			NotAfter:     notAfter,
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  usage,
		}
		for _, h := range hosts {
			h = strings.TrimSpace(h)
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("%s certificate: %w", cn, err)
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return fmt.Errorf("%s key: %w", cn, err)
		}
		if err := writePEM(filepath.Join(dir, cert), "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(filepath.Join(dir, keyFile), "EC PRIVATE KEY", kb)
	}
	if err := leaf(Server, ServerKey, "nats", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, hosts); err != nil {
		return err
	}
	return leaf(Client, ClientKey, "quarry", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil)
}

// Secret returns a random hex secret of n bytes of entropy.
func Secret(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return n
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
