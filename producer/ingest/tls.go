package ingest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/quarrylake/quarry/producer"
)

// ServerTLS is the receivers' TLS config from rc's tls_cert and tls_key
// (nil, nil when unset), requiring client certificates signed by
// tls_client_ca when that is set (mTLS).
func ServerTLS(rc producer.ReceiversConfig) (*tls.Config, error) {
	if rc.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(rc.TLSCert, rc.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("producer.receivers.tls_cert, tls_key: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if rc.TLSClientCA != "" {
		pem, err := os.ReadFile(rc.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("producer.receivers.tls_client_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("producer.receivers.tls_client_ca %s: no PEM certificate", rc.TLSClientCA)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}
