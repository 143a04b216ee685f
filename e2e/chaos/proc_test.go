//go:build chaos

package chaos

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// slot is one role under supervision: it is restarted whenever it exits,
// unless held down or stopped. Every incarnation appends to <dir>/<name>.log.
type slot struct {
	name    string
	bin     string
	args    []string
	env     func(incarnation int) []string
	logPath string
	httpURL string // http://127.0.0.1:port of its health endpoint, or ""
	oneShot bool   // exits 0 when done (producer): not restarted then

	mu          sync.Mutex
	cur         *exec.Cmd
	curDone     chan struct{}
	held        bool
	stopped     bool
	incarnation int
	exits       []string // exit status of every incarnation
	finished    chan struct{}
	loopDone    chan struct{}
}

func newSlot(dir, bin, name string, args []string, env func(int) []string) *slot {
	return &slot{name: name, bin: bin, args: args, env: env, logPath: filepath.Join(dir, name+".log"),
		finished: make(chan struct{}), loopDone: make(chan struct{})}
}

// start launches the supervisor loop.
func (s *slot) start() { go s.loop() }

func (s *slot) loop() {
	defer close(s.loopDone)
	for {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return
		}
		if s.held {
			s.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		inc := s.incarnation
		s.incarnation++
		cmd := exec.Command(s.bin, s.args...)
		cmd.Env = os.Environ()
		if s.env != nil {
			cmd.Env = append(cmd.Env, s.env(inc)...)
		}
		f, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			fmt.Fprintf(f, "=== %s incarnation %d at %s\n", s.name, inc, time.Now().Format(time.RFC3339Nano))
			cmd.Stdout, cmd.Stderr = f, f
		}
		if err := cmd.Start(); err != nil {
			s.exits = append(s.exits, "start: "+err.Error())
			s.mu.Unlock()
			if f != nil {
				f.Close()
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		done := make(chan struct{})
		s.cur, s.curDone = cmd, done
		s.mu.Unlock()
		werr := cmd.Wait()
		close(done)
		if f != nil {
			f.Close()
		}
		s.mu.Lock()
		s.cur = nil
		status := "exit 0"
		if werr != nil {
			status = werr.Error()
		}
		s.exits = append(s.exits, status)
		if s.oneShot && werr == nil {
			s.stopped = true
			close(s.finished)
			s.mu.Unlock()
			return
		}
		stopped := s.stopped
		s.mu.Unlock()
		if stopped {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// signal sends sig to the running incarnation, if any.
func (s *slot) signal(sig syscall.Signal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.Process == nil {
		return false
	}
	return s.cur.Process.Signal(sig) == nil
}

// pid of the running incarnation (0 if none).
func (s *slot) running() (*exec.Cmd, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.curDone
}

// hold stops the running incarnation with sig and keeps the slot down for d.
func (s *slot) hold(sig syscall.Signal, d time.Duration) {
	s.mu.Lock()
	s.held = true
	s.mu.Unlock()
	if cmd, done := s.running(); cmd != nil {
		_ = cmd.Process.Signal(sig)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	time.Sleep(d)
	s.mu.Lock()
	s.held = false
	s.mu.Unlock()
}

// stop ends supervision: SIGTERM (SIGCONT first, in case it is paused), then
// SIGKILL after grace.
func (s *slot) stop(grace time.Duration) {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	if cmd, done := s.running(); cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	select {
	case <-s.loopDone:
	case <-time.After(grace):
	}
}

func (s *slot) exitLog() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.exits...)
}

// crashes counts incarnations that ended with the crash point status.
func (s *slot) crashes() int {
	n := 0
	for _, e := range s.exitLog() {
		if strings.Contains(e, "exit status 86") {
			n++
		}
	}
	return n
}

func (s *slot) tail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// readyz returns the status code and body of the slot's /readyz.
func (s *slot) readyz() (int, string, error) {
	if s.httpURL == "" {
		return 0, "", errors.New("no health endpoint")
	}
	resp, err := httpClient.Get(s.httpURL + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}
