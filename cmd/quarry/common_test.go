package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("nats: [unclosed\n"), 0o644)
	unknown := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknown, []byte("miner:\n  snapshot_evry: 5\n"), 0o644)
	var v struct {
		SnapshotEvery int `yaml:"snapshot_every"`
	}
	if err := loadSection(bad, "nats", &v); err == nil || !strings.Contains(err.Error(), "parse config") {
		t.Fatalf("bad yaml: %v", err)
	}
	if err := loadSection(filepath.Join(dir, "missing.yaml"), "nats", &v); err == nil {
		t.Fatal("missing file: no error")
	}
	if err := loadSection(unknown, "miner", &v); err == nil || !strings.Contains(err.Error(), "snapshot_evry") {
		t.Fatalf("unknown field: %v", err)
	}
	if err := loadSection(unknown, "encoder", &v); err != nil {
		t.Fatalf("absent section: %v", err)
	}
}
