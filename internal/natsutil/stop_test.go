package natsutil

import (
	"errors"
	"testing"
	"time"
)

// stuckServer is a fault-injecting wrapper: its Shutdown blocks until
// release is closed, as a server whose stream lock is held by a spinning
// goroutine does, then shuts the real server down.
type stuckServer struct {
	Stopper
	release chan struct{}
}

func (s stuckServer) Shutdown() {
	<-s.release
	s.Stopper.Shutdown()
}

func TestStopServer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stuck   bool
		timeout time.Duration
		want    error
	}{
		{"stops", false, time.Minute, nil},
		{"stops, no bound", false, 0, nil},
		{"stuck, bounded", true, 50 * time.Millisecond, ErrShutdownTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := StartServer(ServerConfig{StoreDir: t.TempDir(), Port: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			var st Stopper = s
			if tc.stuck {
				st = stuckServer{s, release}
			}
			err = StopServer(st, tc.timeout)
			if !errors.Is(err, tc.want) {
				t.Fatalf("StopServer: %v, want %v", err, tc.want)
			}
			if tc.want == nil && s.Running() {
				t.Fatal("server still running after StopServer returned nil")
			}
			// Let a stuck shutdown finish so the test leaves no server behind.
			close(release)
			if tc.stuck {
				if err := StopServer(s, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
