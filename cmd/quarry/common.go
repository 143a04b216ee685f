package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/objstore"
)

var errHelp = errors.New("help shown")

// parseFlags parses args with fs, mapping -h to errHelp and mistakes to
// errUsage. Positional arguments are returned.
func parseFlags(fs *flag.FlagSet, e *env, args []string) ([]string, error) {
	fs.SetOutput(e.stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, errUsage{err.Error()}
	}
	return fs.Args(), nil
}

// flagSet reports which flags were set on the command line, so flags win
// over the config file and the environment.
func flagSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// loadSection decodes section name of the YAML config file at path into v.
// A missing section leaves v unchanged; unknown fields are errors.
func loadSection(path, name string, v any) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var doc map[string]yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("parse config %s: %w", path, err)
	}
	node, ok := doc[name]
	if !ok {
		return nil
	}
	// Node.Decode ignores unknown fields; a typo in a config must not be
	// silently ignored, so decode the section again with KnownFields.
	sec, err := yaml.Marshal(&node)
	if err != nil {
		return fmt.Errorf("config %s section %s: %w", path, name, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(sec))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s section %s: %w", path, name, err)
	}
	return nil
}

// common holds the settings every role shares.
type common struct {
	config   string
	natsURL  string
	lake     string
	logLevel string
	logJSON  bool
	httpAddr string
}

func (c *common) register(fs *flag.FlagSet, needLake bool) {
	fs.StringVar(&c.natsURL, "nats", "", "NATS URL (env QUARRY_NATS_URL; config nats.url)")
	c.registerEmbedded(fs, needLake)
}

// registerEmbedded registers the shared flags of a command that runs its
// own embedded NATS server (no --nats).
func (c *common) registerEmbedded(fs *flag.FlagSet, needLake bool) {
	fs.StringVar(&c.config, "config", "", "YAML config file (env QUARRY_CONFIG)")
	if needLake {
		fs.StringVar(&c.lake, "lake", "", "lake URL: file:///abs/path, a plain path, or s3://bucket/prefix (env QUARRY_LAKE; config lake.url)")
	}
	fs.StringVar(&c.logLevel, "log-level", "", "debug, info, warn or error (env QUARRY_LOG_LEVEL)")
	fs.BoolVar(&c.logJSON, "log-json", false, "log as JSON")
	fs.StringVar(&c.httpAddr, "http", "", "health and metrics listen address, e.g. :8080 (env QUARRY_HTTP_ADDR)")
}

// resolve fills unset values from the environment and the config file.
func (c *common) resolve(fs *flag.FlagSet, e *env) (natsutil.ConnConfig, error) {
	set := flagSet(fs)
	pick := func(flagName string, cur *string, envName string) {
		if set[flagName] {
			return
		}
		if v := e.getenv(envName); v != "" {
			*cur = v
		}
	}
	pick("config", &c.config, "QUARRY_CONFIG")
	var file struct {
		URL       string `yaml:"url"`
		User      string `yaml:"user"`
		CredsFile string `yaml:"creds_file"`
		NKeyFile  string `yaml:"nkey_file"`
		TLSCA     string `yaml:"tls_ca"`
		TLSCert   string `yaml:"tls_cert"`
		TLSKey    string `yaml:"tls_key"`
		Timeout   time.Duration
	}
	if err := loadSection(c.config, "nats", &file); err != nil {
		return natsutil.ConnConfig{}, err
	}
	var lake struct {
		URL string `yaml:"url"`
	}
	if err := loadSection(c.config, "lake", &lake); err != nil {
		return natsutil.ConnConfig{}, err
	}
	var top struct {
		LogLevel string `yaml:"log_level"`
		HTTP     string `yaml:"http"`
	}
	if err := loadSection(c.config, "server", &top); err != nil {
		return natsutil.ConnConfig{}, err
	}
	if c.natsURL == "" {
		c.natsURL = file.URL
	}
	if c.lake == "" {
		c.lake = lake.URL
	}
	if c.logLevel == "" {
		c.logLevel = top.LogLevel
	}
	if c.httpAddr == "" {
		c.httpAddr = top.HTTP
	}
	pick("nats", &c.natsURL, "QUARRY_NATS_URL")
	pick("lake", &c.lake, "QUARRY_LAKE")
	pick("log-level", &c.logLevel, "QUARRY_LOG_LEVEL")
	pick("http", &c.httpAddr, "QUARRY_HTTP_ADDR")
	cc := natsutil.ConnConfig{
		URL: c.natsURL, User: file.User, CredsFile: file.CredsFile, NKeyFile: file.NKeyFile,
		TLSCA: file.TLSCA, TLSCert: file.TLSCert, TLSKey: file.TLSKey, Timeout: file.Timeout,
	}
	// Secrets come from the environment only.
	if v := e.getenv("QUARRY_NATS_USER"); v != "" {
		cc.User = v
	}
	cc.Password = e.getenv("QUARRY_NATS_PASSWORD")
	for _, kv := range []struct {
		dst *string
		env string
	}{{&cc.CredsFile, "QUARRY_NATS_CREDS"}, {&cc.NKeyFile, "QUARRY_NATS_NKEY"}, {&cc.TLSCA, "QUARRY_NATS_TLS_CA"}, {&cc.TLSCert, "QUARRY_NATS_TLS_CERT"}, {&cc.TLSKey, "QUARRY_NATS_TLS_KEY"}} {
		if v := e.getenv(kv.env); v != "" {
			*kv.dst = v
		}
	}
	return cc, nil
}

func (c *common) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	switch strings.ToLower(c.logLevel) {
	case "", "info":
		lvl = slog.LevelInfo
	case "debug":
		lvl = slog.LevelDebug
	case "warn":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		return nil, errUsage{fmt.Sprintf("log level %q: want debug, info, warn or error", c.logLevel)}
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if c.logJSON {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// s3Options reads S3 settings from the environment (never from flags or
// files, so credentials stay out of shell history and configs).
func s3Options(e *env) objstore.S3Options { return objstore.S3OptionsFromEnv(e.getenv) }

func atoiDefault(s string, d int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return d
}
