package pipeline

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// errs are substrings of the Load error, each expected on its own
		// line; none means Load succeeds.
		errs []string
		// warn is a substring of the logged warning ("" means no warning).
		warn  string
		check func(t *testing.T, c Config)
	}{
		{name: "empty file", yaml: "", check: func(t *testing.T, c Config) {
			if c.MSSQL != nil || filepath.Base(c.File) != "q.yaml" || !filepath.IsAbs(c.File) {
				t.Fatalf("got %+v", c)
			}
		}},
		{name: "every section", yaml: "nats:\n  url: nats://a:4222\n  timeout: 3s\nlake:\n  url: /lake\nserver:\n  log_level: debug\n  http: :8080\n  data_dir: /d\n  encoders: 3\nstreams:\n  replicas: 3\nproducer:\n  tenant: acme\n  rate: 5\nminer:\n  snapshot_every: 7\n  mining:\n    similarity: 0.5\nencoder:\n  max_age: 2s\ncommitter:\n  lease_ttl: 4s\nmssql:\n  database: shop\n  capture_instances: [dbo_orders]\n",
			check: func(t *testing.T, c Config) {
				if c.NATS.URL != "nats://a:4222" || c.NATS.Timeout != 3*time.Second || c.Lake.URL != "/lake" || c.Server.HTTP != ":8080" ||
					c.Server.Encoders != 3 || c.Streams.Replicas != 3 || c.Producer.Tenant != "acme" || c.Miner.SnapshotEvery != 7 ||
					c.Encoder.MaxAge != 2*time.Second || c.Committer.LeaseTTL != 4*time.Second || c.MSSQL == nil || c.MSSQL.Database != "shop" {
					t.Fatalf("got %+v", c)
				}
			}},
		{name: "event time keys", yaml: "producer:\n  timestamp: syslog\n  timezone: Europe/Berlin\n",
			check: func(t *testing.T, c Config) {
				if c.Producer.EventTime.Mode != "syslog" || c.Producer.EventTime.Zone != "Europe/Berlin" {
					t.Fatalf("got %+v", c.Producer.EventTime)
				}
			}},
		{name: "event time key misspelt", yaml: "producer:\n  timestmap: auto\n", errs: []string{"q.yaml: producer.timestmap: unknown key (line 2)"}},
		{name: "unknown top-level section", yaml: "mineer:\n  snapshot_every: 5\n", errs: []string{"q.yaml: mineer: unknown key (line 1)"}},
		{name: "unknown nested key", yaml: "miner:\n  snapshot_evry: 5\n", errs: []string{"q.yaml: miner.snapshot_evry: unknown key (line 2)"}},
		{name: "unknown deeper key", yaml: "miner:\n  mining:\n    dept: 4\nmssql:\n  tables:\n    dbo_orders:\n      txt: [a]\n",
			errs: []string{"q.yaml: miner.mining.dept: unknown key", "q.yaml: mssql.tables.dbo_orders.txt: unknown key"}},
		{name: "several unknown keys at once", yaml: "nats:\n  ulr: x\n  password: p\nlake:\n  path: /x\nencoder:\n  workerz: 2\n",
			errs: []string{"q.yaml: nats.ulr: unknown key", "q.yaml: nats.password: unknown key", "q.yaml: lake.path: unknown key", "q.yaml: encoder.workerz: unknown key"}},
		{name: "a value of the wrong type", yaml: "miner:\n  snapshot_every: many\n", errs: []string{"q.yaml: miner.snapshot_every: cannot unmarshal !!str `many` into int (line 2)"}},
		{name: "values of the wrong type, old layout", yaml: "pipeline:\n  encoders: two\n  miner:\n    snapshot_every: many\n",
			errs: []string{"q.yaml: server.encoders: cannot unmarshal !!str `two` into int (line 2)", "q.yaml: miner.snapshot_every: cannot unmarshal !!str `many` into int (line 4)"}},
		{name: "not yaml", yaml: "nats: [unclosed\n", errs: []string{"q.yaml: yaml:"}},
		{name: "old pipeline section", yaml: "pipeline:\n  data_dir: /d\n  lake: /l\n  nats_url: nats://x:4222\n  encoders: 4\n  miner:\n    snapshot_every: 9\n  streams:\n    replicas: 3\n",
			warn: "pipeline.data_dir -> server.data_dir, pipeline.lake -> lake.url, pipeline.nats_url -> nats.url, pipeline.encoders -> server.encoders, pipeline.miner -> miner, pipeline.streams -> streams",
			check: func(t *testing.T, c Config) {
				if c.Server.DataDir != "/d" || c.Lake.URL != "/l" || c.NATS.URL != "nats://x:4222" || c.Server.Encoders != 4 || c.Miner.SnapshotEvery != 9 || c.Streams.Replicas != 3 {
					t.Fatalf("got %+v", c)
				}
			}},
		{name: "old pipeline section: unknown key", yaml: "pipeline:\n  mineer: {}\n  miner:\n    snapshot_evry: 1\n",
			errs: []string{"q.yaml: pipeline.mineer: unknown key (line 2)", "q.yaml: pipeline.miner.snapshot_evry: unknown key (line 4)"}},
		{name: "old pipeline section: set twice", yaml: "pipeline:\n  miner:\n    snapshot_every: 9\nminer:\n  snapshot_every: 8\n",
			errs: []string{"q.yaml: pipeline.miner and miner are both set"}},
		{name: "old mssql file", yaml: "database: shop\ncapture_instances: [dbo_orders]\npoll_interval: 2s\nnats:\n  url: nats://n:4222\n  name: mine\nstreams:\n  replicas: 3\n",
			warn: "database -> mssql.database, capture_instances -> mssql.capture_instances, poll_interval -> mssql.poll_interval, remove nats.name",
			check: func(t *testing.T, c Config) {
				if c.MSSQL == nil || c.MSSQL.Database != "shop" || c.MSSQL.PollInterval != 2*time.Second || c.NATS.URL != "nats://n:4222" || c.Streams.Replicas != 3 {
					t.Fatalf("got %+v", c)
				}
			}},
		{name: "old mssql file with a connection string", yaml: "database: shop\ndsn: sqlserver://x\n", errs: []string{"q.yaml: mssql.dsn: not allowed in the file"}},
		{name: "mssql with its own nats", yaml: "mssql:\n  database: shop\n  nats:\n    url: x\n", errs: []string{"q.yaml: mssql.nats: move it to the top-level nats section"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "q.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			c, err := Load(path, slog.New(slog.NewTextHandler(&logs, nil)))
			if len(tt.errs) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tt.errs)
				}
				lines := strings.Split(err.Error(), "\n")
				for _, w := range tt.errs {
					found := false
					for _, l := range lines {
						found = found || strings.Contains(l, w)
					}
					if !found {
						t.Errorf("error %q: no line contains %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.warn == "" && logs.Len() > 0 {
				t.Errorf("unexpected warning: %s", logs.String())
			}
			if tt.warn != "" && (!strings.Contains(logs.String(), tt.warn) || !strings.Contains(logs.String(), path)) {
				t.Errorf("warning %q: want the file and %q", logs.String(), tt.warn)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
			if err := c.Defaults().Validate(); err != nil && tt.name != "old mssql file" {
				t.Errorf("validate: %v", err)
			}
		})
	}
}

// TestValidateNamesKeyAndFile: Validate reports every problem at once, one
// per line, each naming the file and the key path.
func TestValidateNamesKeyAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quarry.yaml")
	body := "server:\n  encoders: 99\n  log_level: loud\nstreams:\n  replicas: 9\nproducer:\n  rate: -1\n  timestamp: iso9999\n  timezone: Mars/Olympus\nminer:\n  retry_min: 2s\n  retry_max: 1s\nencoder:\n  name: a.b\ncommitter:\n  name: \"\"\n  lease_ttl: 1ms\nmssql:\n  database: a.b\n  capture_instances: [x]\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Defaults().Validate()
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, key := range []string{"server.encoders", "server.log_level", "streams.replicas", "producer.rate", "producer.timestamp", "producer.timezone", "miner.retry_max", "encoder.name", "committer.lease_ttl", "mssql.database"} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, path+": "+key)
		}
		if !found {
			t.Errorf("no line names %s: %s in\n%s", path, key, err)
		}
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, path+": ") {
			t.Errorf("line %q does not name the file", l)
		}
	}
}

func TestLoadNoFile(t *testing.T) {
	c, err := Load("", nil)
	if err != nil || c.File != "" {
		t.Fatalf("got %+v, %v", c, err)
	}
	if err := c.Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestDocExamples: the config examples in the docs load and validate.
func TestDocExamples(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "sources", "sqlserver.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\nmssql:\n")
	if !ok {
		t.Fatal("docs/sources/sqlserver.md: no ```yaml block starting with mssql:")
	}
	block, _, _ := strings.Cut(rest, "```")
	path := filepath.Join(t.TempDir(), "mssql.yaml")
	if err := os.WriteFile(path, []byte("mssql:\n"+block), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
	if c.MSSQL == nil || c.MSSQL.Database != "shop" || c.NATS.URL == "" {
		t.Fatalf("got %+v", c)
	}
}

// The receivers' config examples in docs/sources load and validate, and a
// misspelt receivers key is an error naming it.
func TestReceiversDocExamples(t *testing.T) {
	for _, doc := range []string{"syslog.md", "http.md", "otlp.md"} {
		b, err := os.ReadFile(filepath.Join("..", "docs", "sources", doc))
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(b), "```yaml\nproducer:\n")
		if !ok {
			t.Fatalf("docs/sources/%s: no ```yaml block starting with producer:", doc)
		}
		block, _, _ := strings.Cut(rest, "```")
		path := filepath.Join(t.TempDir(), "q.yaml")
		if err := os.WriteFile(path, []byte("producer:\n"+block), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path, nil)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if err := c.Defaults().Validate(); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if !c.Producer.Receivers.Enabled() {
			t.Fatalf("%s: no receiver enabled: %+v", doc, c.Producer.Receivers)
		}
	}
	path := filepath.Join(t.TempDir(), "q.yaml")
	os.WriteFile(path, []byte("producer:\n  receivers:\n    listen_htp: :9200\n    listen_syslog_tls: :6514\n"), 0o644)
	c, err := Load(path, nil)
	if err == nil || !strings.Contains(err.Error(), "producer.receivers.listen_htp: unknown key") {
		t.Fatalf("err %v", err)
	}
	os.WriteFile(path, []byte("producer:\n  receivers:\n    listen_syslog_tls: :6514\n"), 0o644)
	if c, err = Load(path, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), "producer.receivers.listen_syslog_tls: needs tls_cert and tls_key") {
		t.Fatalf("err %v", err)
	}
}

// TestLoadErrorsNameThePath: every problem is prefixed with the path the
// file was loaded from, as given, not its base name alone.
func TestLoadErrorsNameThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etc", "quarry.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("miner:\n  snapshot_evry: 5\nencoder:\n  workerz: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, nil)
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 {
		t.Fatalf("error %q: want two problems", err)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, path+": ") {
			t.Errorf("problem %q does not start with the path %q", l, path)
		}
	}
}
