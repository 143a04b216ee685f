package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quarrylake/quarry/internal/objstore"
)

func TestS3OptionsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		name string
		env  map[string]string
		want objstore.S3Options
	}{
		{"quarry vars", map[string]string{
			"QUARRY_S3_ENDPOINT": "minio:9000", "QUARRY_S3_ACCESS_KEY": "ak", "QUARRY_S3_SECRET_KEY": "sk",
			"QUARRY_S3_REGION": "eu-west-1", "QUARRY_S3_TLS": "false",
			"AWS_ACCESS_KEY_ID": "other", "AWS_SECRET_ACCESS_KEY": "other",
		}, objstore.S3Options{Endpoint: "minio:9000", AccessKey: "ak", SecretKey: "sk", Region: "eu-west-1"}},
		{"aws fallbacks", map[string]string{
			"AWS_ACCESS_KEY_ID": "ak", "AWS_SECRET_ACCESS_KEY": "sk", "AWS_SESSION_TOKEN": "tok", "AWS_REGION": "us-east-1",
		}, objstore.S3Options{AccessKey: "ak", SecretKey: "sk", SessionToken: "tok", Region: "us-east-1", UseTLS: true}},
		{"endpoint url", map[string]string{"QUARRY_S3_ENDPOINT": "http://127.0.0.1:9000"},
			objstore.S3Options{Endpoint: "127.0.0.1:9000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := objstore.S3OptionsFromEnv(env(c.env))
			if got != c.want {
				t.Fatalf("got %#v\nwant %#v", got, c.want)
			}
		})
	}
	bad := objstore.S3OptionsFromEnv(env(map[string]string{"QUARRY_S3_TLS": "maybe"}))
	if _, err := objstore.Open(context.Background(), "s3://b", bad); err == nil || !strings.Contains(err.Error(), "QUARRY_S3_TLS") {
		t.Fatalf("open with bad QUARRY_S3_TLS: %v", err)
	}
}

func TestS3OptionsNeverPrintSecrets(t *testing.T) {
	o := objstore.S3Options{Endpoint: "h:1", AccessKey: "AKIDSECRETACCESS", SecretKey: "SUPERSECRET", SessionToken: "TOKENSECRET"}
	var logBuf bytes.Buffer
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("opts", "s3", o)
	for _, s := range []string{o.String(), fmt.Sprintf("%v", o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), logBuf.String()} {
		for _, secret := range []string{"SUPERSECRET", "TOKENSECRET", "AKIDSECRETACCESS"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q leaks %s", s, secret)
			}
		}
	}
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct {
		url, want string
		ok        bool
	}{
		{"file://" + dir + "/lake", "file://" + dir + "/lake", true},
		{dir + "/plain", "file://" + dir + "/plain", true},
		{"gs://bucket", "", false},
		{"", "", false},
		{"file://host/path", "", false},
	} {
		s, err := objstore.Open(ctx, c.url, objstore.S3Options{})
		if c.ok != (err == nil) {
			t.Errorf("open %q: %v", c.url, err)
			continue
		}
		if c.ok && s.String() != c.want {
			t.Errorf("open %q: String() = %q, want %q", c.url, s.String(), c.want)
		}
	}
	// A relative plain path becomes absolute.
	t.Chdir(dir)
	s, err := objstore.Open(ctx, "rel", objstore.S3Options{})
	if err != nil || s.String() != "file://"+filepath.Join(dir, "rel") {
		t.Fatalf("open relative: %v, %v", s, err)
	}
}

func TestLocalLeavesNoTempFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_ = s.PutIfAbsent(ctx, "a/k", []byte{byte(i)})
		_ = s.Put(ctx, "a/p", []byte{byte(i)})
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "a"))
	if len(ents) != 2 {
		t.Fatalf("dir holds %d entries, want 2 (no temp files): %v", len(ents), ents)
	}
	// A stray temp file (a crash mid-write) is invisible to List.
	if err := os.WriteFile(filepath.Join(dir, "a", ".tmp-123"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := s.List(ctx, "a/")
	if err != nil || len(l) != 2 {
		t.Fatalf("list = %v, %v", l, err)
	}
}
