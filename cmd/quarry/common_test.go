package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigPrecedence: the config file is overridden by the environment,
// which is overridden by flags; secrets come only from the environment.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "q.yaml")
	if err := os.WriteFile(cfgFile, []byte("nats:\n  url: nats://file:4222\n  user: fileuser\nlake:\n  url: /file/lake\nserver:\n  log_level: debug\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		nats     string
		lake     string
		user     string
		password string
	}{
		{"file only", nil, []string{"--config", cfgFile}, "nats://file:4222", "/file/lake", "fileuser", ""},
		{"env over file", map[string]string{"QUARRY_NATS_URL": "nats://env:4222", "QUARRY_LAKE": "/env/lake", "QUARRY_NATS_USER": "envuser", "QUARRY_NATS_PASSWORD": "s3cret"},
			[]string{"--config", cfgFile}, "nats://env:4222", "/env/lake", "envuser", "s3cret"},
		{"flag over env", map[string]string{"QUARRY_NATS_URL": "nats://env:4222", "QUARRY_LAKE": "/env/lake"},
			[]string{"--config", cfgFile, "--nats", "nats://flag:4222", "--lake", "/flag/lake"}, "nats://flag:4222", "/flag/lake", "fileuser", ""},
		{"config from env", map[string]string{"QUARRY_CONFIG": cfgFile}, nil, "nats://file:4222", "/file/lake", "fileuser", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			var c common
			c.register(fs, true)
			e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string { return tt.env[k] }}
			if _, err := parseFlags(fs, e, tt.args); err != nil {
				t.Fatal(err)
			}
			cc, err := c.resolve(fs, e)
			if err != nil {
				t.Fatal(err)
			}
			if cc.URL != tt.nats || c.lake != tt.lake || cc.User != tt.user || cc.Password != tt.password {
				t.Fatalf("got nats %q lake %q user %q password %q", cc.URL, c.lake, cc.User, cc.Password)
			}
			if c.logLevel != "debug" {
				t.Fatalf("log level from file: %q", c.logLevel)
			}
		})
	}
}

// TestConfigFileErrors: a role stops on a broken, missing or misspelled
// config file, naming the file and the key, before it connects anywhere.
func TestConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"bad yaml", []string{"miner", "--nats", "nats://127.0.0.1:1", "--config", write("bad.yaml", "nats: [unclosed\n")}, []string{"bad.yaml"}},
		{"missing file", []string{"miner", "--nats", "nats://127.0.0.1:1", "--config", filepath.Join(dir, "missing.yaml")}, []string{"missing.yaml"}},
		{"unknown nested key", []string{"miner", "--nats", "nats://127.0.0.1:1", "--config", write("unknown.yaml", "miner:\n  snapshot_evry: 5\n")}, []string{"unknown.yaml: miner.snapshot_evry: unknown key"}},
		{"unknown section", []string{"encoder", "--nats", "nats://127.0.0.1:1", "--lake", dir, "--config", write("section.yaml", "mineer:\n  snapshot_every: 5\n")}, []string{"section.yaml: mineer: unknown key"}},
		{"bad value", []string{"committer", "--nats", "nats://127.0.0.1:1", "--lake", dir, "--config", write("value.yaml", "miner:\n  retry_min: 2s\n  retry_max: 1s\nstreams:\n  replicas: 9\n")},
			[]string{"value.yaml: miner.retry_max 1s", "value.yaml: streams.replicas 9"}},
		{"run: unknown key under the old pipeline section", []string{"run", "--data", dir, "--config", write("run.yaml", "pipeline:\n  miner:\n    snapshot_evry: 5\n")}, []string{"run.yaml: pipeline.miner.snapshot_evry: unknown key"}},
		{"run: unknown key in miner", []string{"run", "--data", dir, "--config", write("run2.yaml", "miner:\n  snapshot_evry: 5\n")}, []string{"run2.yaml: miner.snapshot_evry: unknown key"}},
		{"producer mssql: no section", []string{"producer", "mssql", "--config", write("nomssql.yaml", "streams:\n  replicas: 1\n")}, []string{"mssql section is required"}},
		{"producer mssql: secret in the file", []string{"producer", "mssql", "--config", write("dsn.yaml", "mssql:\n  database: shop\n  capture_instances: [a]\n  dsn: x\n")}, []string{"dsn.yaml: mssql.dsn: not allowed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if code := runMain(ctx, e, tt.args); code == 0 {
				t.Fatalf("exit 0, output %q", out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output %q does not contain %q", out.String(), w)
				}
			}
		})
	}
}
