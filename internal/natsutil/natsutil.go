// Package natsutil starts embedded NATS servers and opens connections with
// quarry's defaults: timeouts on every call, reconnects forever, and
// JetStream contexts with a default API timeout.
package natsutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
)

// ServerConfig configures an embedded nats-server with JetStream.
type ServerConfig struct {
	Name     string `yaml:"name"`
	StoreDir string `yaml:"store_dir"`
	Host     string `yaml:"host"`
	// Port is the client port; -1 picks a free one.
	Port int `yaml:"port"`
	// SyncAlways makes JetStream fsync every write before acking it. Quarry's
	// WAL needs it on a single server: without it an ack is not durable.
	SyncAlways bool  `yaml:"sync_always"`
	MaxPayload int32 `yaml:"max_payload"`
	// Cluster settings; empty for a single server.
	ClusterName string   `yaml:"cluster_name"`
	ClusterHost string   `yaml:"cluster_host"`
	ClusterPort int      `yaml:"cluster_port"`
	Routes      []string `yaml:"routes"`
	// ReadyTimeout bounds the wait for the server to accept clients.
	ReadyTimeout time.Duration `yaml:"ready_timeout"`
	// ConfigFile is an optional nats-server configuration file (users and
	// permissions, TLS, ...); the fields above override what it sets for
	// the store, the listen address, sync and the payload limit.
	ConfigFile string `yaml:"config_file"`
}

// Defaults returns c with unset fields set.
func (c ServerConfig) Defaults() ServerConfig {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Port == 0 {
		c.Port = -1
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = 8 << 20
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 30 * time.Second
	}
	if c.Name == "" {
		c.Name = "quarry-embedded"
	}
	return c
}

// Validate reports every problem with c.
func (c ServerConfig) Validate() error {
	var errs []error
	if c.StoreDir == "" {
		errs = append(errs, errors.New("nats.store_dir: required for JetStream"))
	}
	if c.MaxPayload < 64<<10 || c.MaxPayload > 64<<20 {
		errs = append(errs, fmt.Errorf("nats.max_payload %d: must be 64KiB to 64MiB", c.MaxPayload))
	}
	if c.ClusterName != "" && c.ClusterPort == 0 {
		errs = append(errs, errors.New("nats.cluster_port: required with cluster_name"))
	}
	for _, r := range c.Routes {
		if _, err := url.Parse(r); err != nil {
			errs = append(errs, fmt.Errorf("nats.routes %q: %w", r, err))
		}
	}
	return errors.Join(errs...)
}

// StartServer starts an embedded nats-server with JetStream and waits until it
// accepts clients. The caller shuts it down with Shutdown and WaitForShutdown.
// It first locks the store directory for this process (storelock.go): a
// directory another process serves is ErrStoreInUse.
func StartServer(c ServerConfig, log *slog.Logger) (*server.Server, error) {
	c = c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := lockStore(c.StoreDir); err != nil {
		return nil, err
	}
	opts := &server.Options{}
	if c.ConfigFile != "" {
		var err error
		if opts, err = server.ProcessConfigFile(c.ConfigFile); err != nil {
			return nil, fmt.Errorf("nats server config %s: %w", c.ConfigFile, err)
		}
	}
	opts.ServerName = c.Name
	opts.Host = c.Host
	opts.Port = c.Port
	opts.JetStream = true
	opts.StoreDir = c.StoreDir
	opts.SyncAlways = c.SyncAlways
	opts.MaxPayload = c.MaxPayload
	opts.NoSigs = true
	opts.NoLog = log == nil
	if c.ClusterName != "" {
		opts.Cluster = server.ClusterOpts{Name: c.ClusterName, Host: c.Host, Port: c.ClusterPort}
		if c.ClusterHost != "" {
			opts.Cluster.Host = c.ClusterHost
		}
		for _, r := range c.Routes {
			u, _ := url.Parse(r)
			opts.Routes = append(opts.Routes, u)
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	if log != nil {
		s.SetLoggerV2(slogAdapter{log.With("component", "nats-server")}, false, false, false)
	}
	go s.Start()
	if !s.ReadyForConnections(c.ReadyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("nats server not ready after %s", c.ReadyTimeout)
	}
	return s, nil
}

// ConnConfig configures a client connection.
type ConnConfig struct {
	URL  string `yaml:"url"`
	Name string `yaml:"name"`
	// User and Password, or CredsFile, or NKeyFile authenticate; TLS
	// settings enable TLS. All optional.
	User      string `yaml:"user"`
	Password  string `yaml:"password"`
	CredsFile string `yaml:"creds_file"`
	NKeyFile  string `yaml:"nkey_file"`
	TLSCA     string `yaml:"tls_ca"`
	TLSCert   string `yaml:"tls_cert"`
	TLSKey    string `yaml:"tls_key"`
	// Timeout bounds connecting and every JetStream API call.
	Timeout time.Duration `yaml:"timeout"`
	// NoReconnectBuffer makes a publish fail at once while the connection
	// is down, instead of being buffered and sent on reconnect ahead of
	// the retries of frames that failed before it. The producers set it so
	// that their frames reach the WAL in order.
	NoReconnectBuffer bool `yaml:"-"`
}

// Connect opens a connection and a JetStream context. It retries the
// initial connect until ctx ends, and reconnects forever afterwards.
func Connect(ctx context.Context, c ConnConfig, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.Timeout(c.Timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectBufSize(reconnectBuf(c.NoReconnectBuffer)),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
		// Asynchronous errors (permission violations, slow consumers) go to
		// the log rather than to nats.go's default stderr printer.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("nats async error", "subject", sub.Subject, "err", err)
				return
			}
			log.Warn("nats async error", "err", err)
		}),
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("nkey %s: %w", c.NKeyFile, err)
		}
		opts = append(opts, o)
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", redact(c.URL), err)
	}
	// RetryOnFailedConnect returns at once; wait for the first connect.
	for !nc.IsConnected() {
		if !backoff.Sleep(ctx, 50*time.Millisecond) {
			nc.Close()
			return nil, nil, fmt.Errorf("connect %s: %w", redact(c.URL), ctx.Err())
		}
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(c.Timeout))
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<unparsable url>"
	}
	return p.Redacted()
}

// slogAdapter routes nats-server logs to slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Warnf(f string, v ...any)   { a.l.Warn(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Fatalf(f string, v ...any)  { a.l.Error(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Errorf(f string, v ...any)  { a.l.Error(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Debugf(f string, v ...any)  { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Tracef(f string, v ...any)  {}

// reconnectBuf is the nats.ReconnectBufSize for ConnConfig.NoReconnectBuffer
// (-1: none) or nats.go's default.
func reconnectBuf(off bool) int {
	if off {
		return -1
	}
	return nats.DefaultReconnectBufSize
}

// ErrShutdownTimeout is StopServer's error when the server has not shut down
// within its timeout.
var ErrShutdownTimeout = errors.New("nats server shutdown timed out")

// DefaultShutdownTimeout is how long quarry's processes wait for their
// embedded server's shutdown by default.
const DefaultShutdownTimeout = 30 * time.Second

// Stopper is what StopServer stops: *server.Server.
type Stopper interface {
	Shutdown()
	WaitForShutdown()
}

// StopServer shuts s down and waits at most timeout for it (no bound when
// timeout is 0). A server still shutting down then is left to it, and the
// error is ErrShutdownTimeout: the caller is on its way out, and with
// sync_always every write JetStream acked is on disk already, so nothing
// acked depends on the shutdown finishing. The store lock is the process's
// and goes with it.
func StopServer(s Stopper, timeout time.Duration) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Shutdown()
		s.WaitForShutdown()
	}()
	if timeout <= 0 {
		<-done
		return nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("after %s: %w", timeout, ErrShutdownTimeout)
	}
}
