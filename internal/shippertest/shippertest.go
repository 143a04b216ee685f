// Package shippertest runs the real log shippers the receiver tests drive
// (syslog-ng, rsyslog, util-linux logger) and checks what they delivered:
// producer/internal/recvtest (the receivers' package tests) and cmd/quarry
// (through the lake) share it.
package shippertest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Install says how to get the real clients (Debian: rsyslog and
// syslog-ng-core conflict, so rsyslog is unpacked beside it; .ci/run does
// this).
const Install = "apt-get install -y syslog-ng-core syslog-ng-mod-http syslog-ng-scl bsdutils; " +
	"apt-get download rsyslog && dpkg-deb -x rsyslog_*.deb /opt/rsyslog (with libestr0 libfastjson4 liblognorm5)"

// rsyslogRoot is where .ci/run unpacks rsyslog.
const rsyslogRoot = "/opt/rsyslog"

// Daemon is a client daemon started by a test; its output is in the
// test log when the test fails.
type Daemon struct {
	cmd  *exec.Cmd
	out  *lockedBuf
	done chan struct{}
}

// Check fails the test when the daemon exited: it was to run until the
// test ends.
func (d *Daemon) Check(t testing.TB) {
	t.Helper()
	select {
	case <-d.done:
		t.Fatalf("%s exited: %v\n%s", filepath.Base(d.cmd.Path), d.cmd.ProcessState, d.out.String())
	default:
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start runs bin with args until the test ends (SIGTERM, then kill).
func Start(t testing.TB, bin string, args ...string) *Daemon {
	t.Helper()
	d := &Daemon{cmd: exec.Command(bin, args...), out: &lockedBuf{}, done: make(chan struct{})}
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := d.done
	go func() { d.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), d.out.String())
		}
	})
	return d
}

// Output is what the daemon wrote so far.
func (d *Daemon) Output() string { return d.out.String() }

// SyslogNG starts syslog-ng in the foreground with config conf (without
// its @version line), its state in a temporary directory.
func SyslogNG(t testing.TB, conf string) *Daemon {
	t.Helper()
	bin := Binary(t, "QUARRY_SYSLOG_NG", "syslog-ng", Install, "/usr/sbin/syslog-ng")
	dir := t.TempDir()
	path := filepath.Join(dir, "syslog-ng.conf")
	conf = "@version: 3.35\n@include \"scl.conf\"\noptions { stats-freq(0); keep-hostname(yes); };\n" + conf
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return Start(t, bin, "-F", "-e", "--no-caps", "-f", path, "-R", filepath.Join(dir, "persist"),
		"-p", filepath.Join(dir, "pid"), "-c", filepath.Join(dir, "ctl"))
}

// Rsyslogd starts rsyslogd in the foreground with config conf, its work
// directory in a temporary directory (its path is in conf as WORKDIR).
func Rsyslogd(t testing.TB, conf string) *Daemon {
	t.Helper()
	bin := Binary(t, "QUARRY_RSYSLOGD", "rsyslogd", Install, rsyslogRoot+"/usr/sbin/rsyslogd")
	dir := t.TempDir()
	conf = strings.ReplaceAll(conf, "WORKDIR", dir)
	path := filepath.Join(dir, "rsyslog.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-n", "-f", path, "-i", filepath.Join(dir, "pid")}
	// An unpacked rsyslog finds its modules beside its binary.
	if mods, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(bin))), "usr/lib/*/rsyslog")); len(mods) > 0 {
		args = append(args, "-M", mods[0])
	} else if mods, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(bin)), "lib/*/rsyslog")); len(mods) > 0 {
		args = append(args, "-M", mods[0])
	}
	return Start(t, bin, args...)
}

// Logger is util-linux logger.
func Logger(t testing.TB) string {
	t.Helper()
	return Binary(t, "QUARRY_LOGGER", "logger", Install, "/usr/bin/logger")
}

// Numbered writes n lines "<prefix> line <i>" to a new file and returns
// its path and the lines.
func Numbered(t testing.TB, prefix string, n int) (string, []string) {
	t.Helper()
	var b strings.Builder
	lines := make([]string, n)
	for i := range n {
		lines[i] = fmt.Sprintf("%s line %05d", prefix, i)
		b.WriteString(lines[i] + "\n")
	}
	path := filepath.Join(t.TempDir(), prefix+".log")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, lines
}

// ExactlyOnce fails the test unless got holds every line of want exactly
// once (in any order) and nothing else.
func ExactlyOnce(t testing.TB, got, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	var missing, twice []string
	for _, w := range want {
		switch seen[w] {
		case 0:
			missing = append(missing, w)
		case 1:
		default:
			twice = append(twice, w)
		}
		delete(seen, w)
	}
	var extra []string
	for g := range seen {
		extra = append(extra, g)
	}
	sort.Strings(extra)
	if len(missing)+len(twice)+len(extra) > 0 {
		t.Fatalf("%d lines: %d missing (%q...), %d more than once (%q...), %d unexpected (%q...)",
			len(want), len(missing), head(missing), len(twice), head(twice), len(extra), head(extra))
	}
}

func head(s []string) []string { return s[:min(len(s), 3)] }

// Binary finds a real client's binary: the environment variable env when
// set, else name on PATH, else the first of extra that exists. Missing,
// the test is skipped with a message saying how to install it, except
// with CI=true, where it fails.
func Binary(t testing.TB, env, name, install string, extra ...string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range extra {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := name + " not found (set " + env + " or install it: " + install + ")"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
