// Package miniotest runs a real MinIO server for tests.
//
// The binary is $QUARRY_MINIO_BIN or <repo>/bin/tools/minio, built by
// scripts/build-minio.sh. Without it Start skips the test, except under CI=true
// where it fails, so CI never silently skips the S3 conformance tests.
package miniotest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/quarrylake/quarry/internal/syncbuf"
)

// Credentials of every test server.
const (
	AccessKey = "quarrytest"
	SecretKey = "quarrytest-secret"
)

// Binary returns the MinIO binary path, or an error saying why there is none.
func Binary() (string, error) {
	if p := os.Getenv("QUARRY_MINIO_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("QUARRY_MINIO_BIN=%s: %w", p, err)
		}
		return p, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", "tools", "minio")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no minio binary at %s (run scripts/build-minio.sh or set QUARRY_MINIO_BIN)", p)
	}
	return p, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start runs a MinIO server on a free loopback port with its data in
// t.TempDir(), waits until /minio/health/live answers 200 and stops it when
// the test ends. It returns the endpoint (host:port, plain http) and the
// credentials.
func Start(t testing.TB) (endpoint, accessKey, secretKey string) {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("minio: %v (CI=true: not skipping)", err)
		}
		t.Skipf("minio: %v", err)
	}
	dir := t.TempDir()
	var out syncbuf.Buffer
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("minio: free port: %v", err)
		}
		cport, err := freePort()
		if err != nil {
			t.Fatalf("minio: free port: %v", err)
		}
		endpoint = "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command(bin, "server", dir, "--address", endpoint, "--console-address", "127.0.0.1:"+strconv.Itoa(cport), "--quiet")
		cmd.Env = append(os.Environ(),
			"MINIO_ROOT_USER="+AccessKey,
			"MINIO_ROOT_PASSWORD="+SecretKey,
			"MINIO_BROWSER=off",
			"MINIO_UPDATE=off",
			"MINIO_CI_CD=1",
		)
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("minio: start %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		err = waitLive(endpoint, exited, 60*time.Second)
		if err == nil {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			return endpoint, AccessKey, SecretKey
		}
		_ = cmd.Process.Kill()
		<-exited
		// A port taken between freePort and the server's bind: try another.
		if attempt < 2 {
			continue
		}
		t.Fatalf("minio: %v\n%s", err, out.String())
	}
}

func waitLive(endpoint string, exited <-chan error, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("server exited before it was live: %v", err)
		default:
		}
		resp, err := client.Get("http://" + endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not live at %s after %v", endpoint, timeout)
}

// MakeBucket creates bucket on the server Start returned.
func MakeBucket(t testing.TB, endpoint, accessKey, secretKey, bucket string) {
	t.Helper()
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(accessKey, secretKey, "")})
	if err != nil {
		t.Fatalf("minio client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket %s: %v", bucket, err)
	}
}
