package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/quarrylake/quarry/committer"
	"github.com/quarrylake/quarry/encoder"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/miner"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/cdc"
	"github.com/quarrylake/quarry/streams"
)

// Config is quarry's one configuration file. `quarry run` and every role
// process (`quarry producer`, `producer mssql`, `miner`, `encoder`,
// `committer`) read the same sections; each uses the ones it needs. Load
// reads it once; an unknown key at any level is an error.
type Config struct {
	// NATS is the client connection of a role process; for `quarry run`
	// a URL here replaces the embedded server.
	NATS NATSConfig `yaml:"nats"`
	// Lake is where the encoders and the committer write and the readers
	// read.
	Lake LakeConfig `yaml:"lake"`
	// Server holds the settings of the process itself.
	Server    ServerConfig     `yaml:"server"`
	Streams   streams.Config   `yaml:"streams"`
	Producer  producer.Config  `yaml:"producer"`
	Miner     miner.Config     `yaml:"miner"`
	Encoder   encoder.Config   `yaml:"encoder"`
	Committer committer.Config `yaml:"committer"`
	// MSSQL configures `quarry producer mssql` (SQL Server CDC); nil when
	// the file has no mssql section.
	MSSQL *cdc.Config `yaml:"mssql"`

	// File is the path Load read, as given ("" for a config built in code); every
	// error of Load and Validate names it.
	File string `yaml:"-"`
}

// NATSConfig is the nats section. Passwords and other secrets never come
// from the file: QUARRY_NATS_PASSWORD and the other environment variables
// carry them.
type NATSConfig struct {
	// URL is a NATS URL or a comma-separated list of a cluster's URLs.
	URL       string        `yaml:"url"`
	User      string        `yaml:"user"`
	CredsFile string        `yaml:"creds_file"`
	NKeyFile  string        `yaml:"nkey_file"`
	TLSCA     string        `yaml:"tls_ca"`
	TLSCert   string        `yaml:"tls_cert"`
	TLSKey    string        `yaml:"tls_key"`
	Timeout   time.Duration `yaml:"timeout"`
}

// Conn is the connection config of n with the given client name.
func (n NATSConfig) Conn(name string) natsutil.ConnConfig {
	return natsutil.ConnConfig{
		URL: n.URL, Name: name, User: n.User, CredsFile: n.CredsFile, NKeyFile: n.NKeyFile,
		TLSCA: n.TLSCA, TLSCert: n.TLSCert, TLSKey: n.TLSKey, Timeout: n.Timeout,
	}
}

// LakeConfig is the lake section.
type LakeConfig struct {
	// URL is file:///abs/path, a plain path or s3://bucket/prefix. For
	// `quarry run` it defaults to Server.DataDir/lake.
	URL string `yaml:"url"`
}

// ServerConfig is the server section: the process itself.
type ServerConfig struct {
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// HTTP is the health and metrics listen address, e.g. ":8080".
	HTTP string `yaml:"http"`
	// DataDir (`quarry run`) holds the embedded NATS store (DataDir/nats)
	// and, unless Lake.URL says otherwise, the lake (DataDir/lake).
	DataDir string `yaml:"data_dir"`
	// NATSPort (`quarry run`) is the embedded server's client port; -1
	// picks a free one.
	NATSPort int `yaml:"nats_port"`
	// Encoders (`quarry run`) is the number of encoder instances in the
	// process.
	Encoders int `yaml:"encoders"`
	// ShutdownTimeout (`quarry run`) bounds the embedded server's shutdown
	// once the stages have stopped; past it the process goes on without
	// it (every acked write is on disk already). Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
}

// DefaultTenant is the producer's tenant when neither the file nor a flag
// names one.
const DefaultTenant = "default"

// Defaults returns c with the unset fields of its own sections set; the
// stage sections are defaulted by their stage's New (and checked with
// their defaults by Validate), so that names derived from the host stay
// the process's own.
func (c Config) Defaults() Config {
	if c.Server.DataDir == "" {
		c.Server.DataDir = "./data"
	}
	if c.Server.NATSPort == 0 {
		c.Server.NATSPort = -1
	}
	if c.Server.Encoders == 0 {
		c.Server.Encoders = 1
	}
	if c.Server.ShutdownTimeout == 0 {
		c.Server.ShutdownTimeout = natsutil.DefaultShutdownTimeout
	}
	if c.Producer.Tenant == "" {
		c.Producer.Tenant = DefaultTenant
	}
	c.Streams = c.Streams.Defaults()
	if c.MSSQL != nil {
		m := c.MSSQL.Defaults()
		c.MSSQL = &m
	}
	return c
}

// Validate reports every problem with c (after Defaults), each naming its
// key and the file.
func (c Config) Validate() error {
	var errs []error
	if c.Server.DataDir == "" {
		errs = append(errs, errors.New("server.data_dir: required"))
	}
	if c.Server.Encoders < 1 || c.Server.Encoders > 64 {
		errs = append(errs, fmt.Errorf("server.encoders %d: must be 1 to 64", c.Server.Encoders))
	}
	switch strings.ToLower(c.Server.LogLevel) {
	case "", "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("server.log_level %q: want debug, info, warn or error", c.Server.LogLevel))
	}
	if c.Server.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("server.shutdown_timeout %s: must not be negative", c.Server.ShutdownTimeout))
	}
	if c.NATS.Timeout < 0 {
		errs = append(errs, fmt.Errorf("nats.timeout %s: must not be negative", c.NATS.Timeout))
	}
	errs = append(errs,
		c.Streams.Validate(),
		c.Producer.Defaults().Validate(),
		c.Miner.Defaults().Validate(),
		c.Encoder.Defaults().Validate(),
		c.Committer.Defaults().Validate(),
	)
	if c.MSSQL != nil {
		errs = append(errs, c.MSSQL.Validate())
	}
	return c.inFile(errors.Join(errs...))
}

// inFile prefixes every error joined in err with the file's name, so that
// each line of the report says where to look.
func (c Config) inFile(err error) error {
	if err == nil || c.File == "" {
		return err
	}
	var out []error
	for _, e := range flatten(err) {
		out = append(out, fmt.Errorf("%s: %w", c.File, e))
	}
	return errors.Join(out...)
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// Load reads the YAML config file at path once. An empty path is the empty
// config. Unknown keys at any level are errors that name their full key
// path. Two older layouts are still read, each with a warning on log (nil:
// slog.Default) that says what to rename: the `pipeline:` wrapper of
// `quarry run`, and the `producer mssql` file whose CDC settings sat at
// the top level.
func Load(path string, log *slog.Logger) (Config, error) {
	if path == "" {
		return Config{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	return parse(b, path, log)
}

func parse(b []byte, path string, log *slog.Logger) (Config, error) {
	if log == nil {
		log = slog.Default()
	}
	name := path // as given: two quarry.yaml in different directories are told apart
	fail := func(errs ...error) (Config, error) {
		return Config{}, Config{File: name}.inFile(errors.Join(errs...))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fail(err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return Config{File: name}, nil // an empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fail(fmt.Errorf("line %d: the top level must be a mapping of sections", root.Line))
	}
	var errs []error
	rewritten := false
	if renames, err := upgradePipeline(root); err != nil {
		errs = append(errs, err...)
	} else if renames != nil {
		rewritten = true
		log.Warn("config uses the old pipeline section; rename its keys", "file", path, "rename", strings.Join(renames, ", "))
	}
	if renames, err := upgradeMSSQL(root); err != nil {
		errs = append(errs, err...)
	} else if renames != nil {
		rewritten = true
		log.Warn("config uses the old producer mssql layout; move its settings under mssql", "file", path, "rename", strings.Join(renames, ", "))
	}
	lines := map[int]string{}
	errs = append(errs, walkKeys(root, reflect.TypeFor[Config](), "", lines)...)
	if m := mapValue(root, "mssql"); m != nil && m.Kind == yaml.MappingNode {
		if mapValue(m, "nats") != nil {
			errs = append(errs, errors.New("mssql.nats: move it to the top-level nats section"))
		}
		for _, k := range []string{"dsn", "connection_string", "password"} {
			if mapValue(m, k) != nil {
				errs = append(errs, fmt.Errorf("mssql.%s: not allowed in the file: pass the connection string in %s", k, cdc.DSNEnv))
			}
		}
	}
	if len(errs) > 0 {
		return fail(errs...)
	}
	var c Config
	var err error
	if rewritten {
		// Every key is known (walkKeys); the moved nodes keep their lines.
		err = root.Decode(&c)
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err = dec.Decode(&c); errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		return fail(decodeErrors(err, lines)...)
	}
	c.File = name
	return c, nil
}

// decodeErrors splits a yaml.TypeError into one error per value, each
// naming its key path (found by line) when it can.
func decodeErrors(err error, lines map[int]string) []error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return []error{err}
	}
	var out []error
	for _, msg := range te.Errors {
		var line int
		if _, serr := fmt.Sscanf(msg, "line %d:", &line); serr == nil {
			if key, ok := lines[line]; ok {
				_, rest, _ := strings.Cut(msg, ": ")
				out = append(out, fmt.Errorf("%s: %s (line %d)", key, rest, line))
				continue
			}
		}
		out = append(out, errors.New(msg))
	}
	return out
}

// unknownKeys walks a mapping node against struct type t and reports every
// key t has no field for, with its full path.
func unknownKeys(n *yaml.Node, t reflect.Type, path string) []error {
	return walkKeys(n, t, path, nil)
}

// walkKeys is unknownKeys that also records, in lines (when not nil), the
// key path of every value by its line, to name the key of a decode error.
func walkKeys(n *yaml.Node, t reflect.Type, path string, lines map[int]string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		if t == reflect.TypeFor[time.Time]() {
			return nil
		}
		fields := yamlFields(t)
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: unknown key (line %d)", p, k.Line))
				continue
			}
			if lines != nil {
				lines[v.Line] = p
			}
			errs = append(errs, walkKeys(v, ft, p, lines)...)
		}
		return errs
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := join(path, n.Content[i].Value)
			if lines != nil {
				lines[n.Content[i+1].Line] = p
			}
			errs = append(errs, walkKeys(n.Content[i+1], t.Elem(), p, lines)...)
		}
		return errs
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		var errs []error
		for i, e := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if lines != nil {
				lines[e.Line] = p
			}
			errs = append(errs, walkKeys(e, t.Elem(), p, lines)...)
		}
		return errs
	}
	return nil // a scalar, or a kind mismatch the decoder reports
}

// yamlFields maps the yaml keys of struct t (with inlined structs) to
// their field types, the way yaml.v3 names them.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapValue is the value of key in mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// moveKey moves the value of key src in mapping from to the dotted path dst
// of root, creating mappings on the way. It reports a conflict when dst is
// already set.
func moveKey(root *yaml.Node, dst string, key, val *yaml.Node, src string) error {
	parts := strings.Split(dst, ".")
	n := root
	for _, p := range parts[:len(parts)-1] {
		v := mapValue(n, p)
		if v == nil {
			v = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p}, v)
		}
		if v.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: cannot move to %s: %s is not a mapping (line %d)", src, dst, p, v.Line)
		}
		n = v
	}
	last := parts[len(parts)-1]
	if mapValue(n, last) != nil {
		return fmt.Errorf("%s and %s are both set (line %d): keep %s only", src, dst, key.Line, dst)
	}
	k := *key
	k.Value = last
	n.Content = append(n.Content, &k, val)
	return nil
}

// removeKey deletes key from mapping n.
func removeKey(n *yaml.Node, key string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content = append(n.Content[:i], n.Content[i+2:]...)
			return
		}
	}
}

// oldPipeline maps the keys of the old `pipeline:` section of `quarry run`
// to their place in Config.
var oldPipeline = map[string]string{
	"data_dir": "server.data_dir", "lake": "lake.url", "nats_port": "server.nats_port",
	"nats_url": "nats.url", "encoders": "server.encoders", "streams": "streams",
	"miner": "miner", "encoder": "encoder", "committer": "committer",
}

// oldPipelineConfig is the old `pipeline:` section, to report its unknown
// keys under their old names.
type oldPipelineConfig struct {
	DataDir   string           `yaml:"data_dir"`
	Lake      string           `yaml:"lake"`
	NATSPort  int              `yaml:"nats_port"`
	NATSURL   string           `yaml:"nats_url"`
	Encoders  int              `yaml:"encoders"`
	Streams   streams.Config   `yaml:"streams"`
	Miner     miner.Config     `yaml:"miner"`
	Encoder   encoder.Config   `yaml:"encoder"`
	Committer committer.Config `yaml:"committer"`
}

// upgradePipeline rewrites an old `pipeline:` section in place and returns
// the renames it made.
func upgradePipeline(root *yaml.Node) ([]string, []error) {
	p := mapValue(root, "pipeline")
	if p == nil {
		return nil, nil
	}
	removeKey(root, "pipeline")
	if p.Kind != yaml.MappingNode {
		return []string{"remove pipeline"}, nil
	}
	if errs := unknownKeys(p, reflect.TypeFor[oldPipelineConfig](), "pipeline"); len(errs) > 0 {
		return nil, errs
	}
	renames := []string{}
	var errs []error
	for i := 0; i+1 < len(p.Content); i += 2 {
		k, v := p.Content[i], p.Content[i+1]
		src := "pipeline." + k.Value
		dst := oldPipeline[k.Value]
		if err := moveKey(root, dst, k, v, src); err != nil {
			errs = append(errs, err)
			continue
		}
		renames = append(renames, src+" -> "+dst)
	}
	return renames, errs
}

// upgradeMSSQL rewrites an old `producer mssql` file, whose CDC settings
// sat at the top level, in place: every key of cdc.Config but nats
// moves under mssql, and nats keeps its connection keys (name is dropped:
// the client name is set by the process).
func upgradeMSSQL(root *yaml.Node) ([]string, []error) {
	if mapValue(root, "mssql") != nil {
		return nil, nil
	}
	if mapValue(root, "database") == nil && mapValue(root, "capture_instances") == nil &&
		mapValue(root, "tables") == nil && mapValue(root, "table_defaults") == nil {
		return nil, nil
	}
	cdcKeys := yamlFields(reflect.TypeFor[cdc.Config]())
	top := yamlFields(reflect.TypeFor[Config]())
	renames := []string{}
	var errs []error
	for i := 0; i+1 < len(root.Content); {
		k, v := root.Content[i], root.Content[i+1]
		_, isCDC := cdcKeys[k.Value]
		_, isTop := top[k.Value]
		if isTop || !(isCDC || k.Value == "dsn" || k.Value == "connection_string" || k.Value == "password") {
			i += 2
			continue
		}
		root.Content = append(root.Content[:i], root.Content[i+2:]...)
		if err := moveKey(root, "mssql."+k.Value, k, v, k.Value); err != nil {
			errs = append(errs, err)
			continue
		}
		renames = append(renames, k.Value+" -> mssql."+k.Value)
	}
	if n := mapValue(root, "nats"); n != nil && n.Kind == yaml.MappingNode {
		if mapValue(n, "name") != nil {
			removeKey(n, "name")
			renames = append(renames, "remove nats.name")
		}
		if mapValue(n, "password") != nil {
			errs = append(errs, fmt.Errorf("nats.password: not allowed in the file: set QUARRY_NATS_PASSWORD"))
		}
	}
	return renames, errs
}
