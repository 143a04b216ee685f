package producer

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// ReceiversConfig is the producer's receivers section (key
// producer.receivers): network endpoints that shippers send lines to
// (packages producer/ingest, producer/syslog, producer/httpin,
// producer/otlp). Secrets
// never come from the file: bearer tokens and the client certificates'
// tenants are read from the environment (QUARRY_INGEST_TOKENS,
// QUARRY_INGEST_CLIENT_TENANTS).
type ReceiversConfig struct {
	// ListenSyslog is a host:port served over TCP (octet counting and
	// newline framing) and UDP; empty: off.
	ListenSyslog string `yaml:"listen_syslog"`
	// ListenSyslogTLS is a host:port served as syslog over TLS (RFC 5425);
	// it needs TLSCert and TLSKey.
	ListenSyslogTLS string `yaml:"listen_syslog_tls"`
	// ListenHTTP serves /_bulk, /<tenant>/_bulk and /jsonline; with
	// TLSCert and TLSKey it serves HTTPS.
	ListenHTTP string `yaml:"listen_http"`
	// ListenOTLP serves OTLP logs over HTTP (POST /v1/logs, protobuf and
	// JSON); with TLSCert and TLSKey it serves HTTPS.
	ListenOTLP string `yaml:"listen_otlp"`
	// ListenOTLPGRPC serves OTLP logs over gRPC (LogsService/Export);
	// with TLSCert and TLSKey over TLS.
	ListenOTLPGRPC string `yaml:"listen_otlp_grpc"`
	// TLSCert and TLSKey are PEM files of the receivers' server
	// certificate; TLSClientCA, when set, requires client certificates
	// signed by it (mTLS) on the TLS endpoints.
	TLSCert     string `yaml:"tls_cert"`
	TLSKey      string `yaml:"tls_key"`
	TLSClientCA string `yaml:"tls_client_ca"`
	// MessageFields are the JSON fields tried, in order, for the message
	// of a JSON line or _bulk document (default message, log, msg); the
	// other fields become attributes.
	MessageFields []string `yaml:"message_fields"`
	// MaxBodyBytes bounds an HTTP request body or OTLP gRPC message
	// (default 32 MiB): a larger one is refused with 413
	// (RESOURCE_EXHAUSTED over gRPC).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxLineBytes bounds one syslog message or JSON line (default 1 MiB):
	// a longer one is dead-lettered (its first 64 KiB) with the reason.
	MaxLineBytes int `yaml:"max_line_bytes"`
	// MaxAttrs and MaxAttrBytes bound a line's attributes (default 128
	// attributes, 64 KiB of keys and values): a line above either is
	// dead-lettered with the reason.
	MaxAttrs     int `yaml:"max_attrs"`
	MaxAttrBytes int `yaml:"max_attr_bytes"`
	// MaxInFlightBytes bounds the bytes received and not yet durable,
	// over every receiver (default 64 MiB): above it HTTP answers 429 with
	// Retry-After and syslog stops reading.
	MaxInFlightBytes int64 `yaml:"max_in_flight_bytes"`
	// AckTimeout bounds an HTTP request's wait for its lines to be durable
	// (default 30s): after it the answer is 503 with Retry-After.
	AckTimeout time.Duration `yaml:"ack_timeout"`
	// MaxTenants bounds the tenants the receivers write for (default 64):
	// each has its own source in the WAL.
	MaxTenants int `yaml:"max_tenants"`
	// MaxConns bounds the open syslog TCP and TLS connections (default
	// 1024); further connections wait to be accepted.
	MaxConns int `yaml:"max_conns"`
}

// Defaults returns c with unset fields set to their defaults.
func (c ReceiversConfig) Defaults() ReceiversConfig {
	if len(c.MessageFields) == 0 {
		c.MessageFields = []string{"message", "log", "msg"}
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 32 << 20
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = 1 << 20
	}
	if c.MaxAttrs == 0 {
		c.MaxAttrs = 128
	}
	if c.MaxAttrBytes == 0 {
		c.MaxAttrBytes = 64 << 10
	}
	if c.MaxInFlightBytes == 0 {
		c.MaxInFlightBytes = 64 << 20
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = 30 * time.Second
	}
	if c.MaxTenants == 0 {
		c.MaxTenants = 64
	}
	if c.MaxConns == 0 {
		c.MaxConns = 1024
	}
	return c
}

// Enabled reports whether any receiver listens.
func (c ReceiversConfig) Enabled() bool {
	return c.ListenSyslog != "" || c.ListenSyslogTLS != "" || c.ListenHTTP != "" ||
		c.ListenOTLP != "" || c.ListenOTLPGRPC != ""
}

// Validate reports every problem with c (after Defaults).
func (c ReceiversConfig) Validate() error {
	var errs []error
	for _, a := range []struct{ key, addr string }{
		{"listen_syslog", c.ListenSyslog}, {"listen_syslog_tls", c.ListenSyslogTLS}, {"listen_http", c.ListenHTTP},
		{"listen_otlp", c.ListenOTLP}, {"listen_otlp_grpc", c.ListenOTLPGRPC},
	} {
		if a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("producer.receivers.%s %q: want host:port: %w", a.key, a.addr, err))
		}
	}
	if c.ListenSyslogTLS != "" && (c.TLSCert == "" || c.TLSKey == "") {
		errs = append(errs, errors.New("producer.receivers.listen_syslog_tls: needs tls_cert and tls_key"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("producer.receivers.tls_cert, tls_key: set both or neither"))
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		errs = append(errs, errors.New("producer.receivers.tls_client_ca: needs tls_cert and tls_key"))
	}
	for i, f := range c.MessageFields {
		if f == "" {
			errs = append(errs, fmt.Errorf("producer.receivers.message_fields[%d]: empty", i))
		}
	}
	if c.MaxBodyBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("producer.receivers.max_body_bytes %d: must be at least 1KiB", c.MaxBodyBytes))
	}
	if c.MaxLineBytes < 64 || c.MaxLineBytes > maxFrameBytesLimit-1024 {
		errs = append(errs, fmt.Errorf("producer.receivers.max_line_bytes %d: must be 64 to 7MiB-1KiB", c.MaxLineBytes))
	}
	if c.MaxAttrs < 1 {
		errs = append(errs, fmt.Errorf("producer.receivers.max_attrs %d: must be at least 1", c.MaxAttrs))
	}
	if c.MaxAttrBytes < 64 {
		errs = append(errs, fmt.Errorf("producer.receivers.max_attr_bytes %d: must be at least 64", c.MaxAttrBytes))
	}
	if c.MaxInFlightBytes < int64(c.MaxLineBytes) {
		errs = append(errs, fmt.Errorf("producer.receivers.max_in_flight_bytes %d: must be at least max_line_bytes (%d)", c.MaxInFlightBytes, c.MaxLineBytes))
	}
	if c.AckTimeout < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("producer.receivers.ack_timeout %s: must be at least 10ms", c.AckTimeout))
	}
	if c.MaxTenants < 1 {
		errs = append(errs, fmt.Errorf("producer.receivers.max_tenants %d: must be at least 1", c.MaxTenants))
	}
	if c.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("producer.receivers.max_conns %d: must be at least 1", c.MaxConns))
	}
	return errors.Join(errs...)
}
