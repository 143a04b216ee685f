package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/pipeline"
	"github.com/quarrylake/quarry/producer"
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

// common holds the settings every role shares.
type common struct {
	config   string
	natsURL  string
	lake     string
	logLevel string
	logJSON  bool
	httpAddr string

	// cfg is the config file with the environment and flags laid over it
	// and conn its NATS connection (resolve sets both).
	cfg  pipeline.Config
	conn natsutil.ConnConfig
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

// resolve reads the config file once (--config, else QUARRY_CONFIG) into
// c.cfg and lays the environment, then the flags, over its nats.url,
// lake.url, server.log_level and server.http. A command without a --nats
// (or --lake) flag takes that setting from the file only. It returns the
// NATS connection config, with the secrets from the environment only.
func (c *common) resolve(fs *flag.FlagSet, e *env) (natsutil.ConnConfig, error) {
	set := flagSet(fs)
	if !set["config"] {
		if v := e.getenv("QUARRY_CONFIG"); v != "" {
			c.config = v
		}
	}
	cfg, err := pipeline.Load(c.config, c.warnLogger(e.stderr))
	if err != nil {
		return natsutil.ConnConfig{}, err
	}
	pick := func(flagName string, cur *string, file, envName string) {
		if set[flagName] {
			return
		}
		*cur = file
		if fs.Lookup(flagName) == nil {
			return
		}
		if v := e.getenv(envName); v != "" {
			*cur = v
		}
	}
	pick("nats", &c.natsURL, cfg.NATS.URL, "QUARRY_NATS_URL")
	pick("lake", &c.lake, cfg.Lake.URL, "QUARRY_LAKE")
	pick("log-level", &c.logLevel, cfg.Server.LogLevel, "QUARRY_LOG_LEVEL")
	pick("http", &c.httpAddr, cfg.Server.HTTP, "QUARRY_HTTP_ADDR")
	cfg.NATS.URL, cfg.Lake.URL, cfg.Server.LogLevel, cfg.Server.HTTP = c.natsURL, c.lake, c.logLevel, c.httpAddr
	c.cfg = cfg
	cc := cfg.NATS.Conn("")
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
	c.conn = cc
	return cc, nil
}

// checked is cfg with its defaults, or every problem with it.
func checked(cfg pipeline.Config) (pipeline.Config, error) {
	cfg = cfg.Defaults()
	return cfg, cfg.Validate()
}

// warnLogger logs what Load warns about, before the configured logger
// exists.
func (c *common) warnLogger(w io.Writer) *slog.Logger {
	if c.logJSON {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
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

// eventTimeFlags are --timestamp and --timezone of the commands that read
// lines (producer.timestamp and producer.timezone in --config).
type eventTimeFlags struct{ mode, zone *string }

func registerEventTime(fs *flag.FlagSet) eventTimeFlags {
	return eventTimeFlags{
		mode: fs.String("timestamp", eventtime.ModeAuto, "event time of a line: auto (find the timestamp it starts with), none (read time) or a layout name such as iso8601, syslog, clf, epoch (producer.timestamp in --config)"),
		zone: fs.String("timezone", "UTC", "time zone of timestamps written without one: UTC, Local, an IANA name or ±hh:mm (producer.timezone in --config)"),
	}
}

// apply sets the flags given on the command line over the config's
// values; a bad value is a usage error naming the flag.
func (f eventTimeFlags) apply(fs *flag.FlagSet, c *producer.Config) error {
	set := flagSet(fs)
	var bad []string
	if set["timestamp"] {
		if err := (eventtime.Config{Mode: *f.mode}).Validate(); err != nil {
			bad = append(bad, "--"+err.Error())
		}
		c.EventTime.Mode = *f.mode
	}
	if set["timezone"] {
		if err := (eventtime.Config{Zone: *f.zone}).Validate(); err != nil {
			bad = append(bad, "--"+err.Error())
		}
		c.EventTime.Zone = *f.zone
	}
	if len(bad) > 0 {
		return errUsage{strings.Join(bad, "; ")}
	}
	return nil
}
