package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/natsutil"
)

// hungServer is a fault-injecting wrapper of the embedded server: its
// Shutdown blocks until release is closed, as nats-server's did when a
// stream's loop held the stream lock (two processes on one store).
type hungServer struct {
	natsutil.Stopper
	release chan struct{}
}

func (h hungServer) Shutdown() {
	<-h.release
	h.Stopper.Shutdown()
}

// TestCloseBoundsServerShutdown: a server whose shutdown hangs holds Close
// up for server.shutdown_timeout, not for ever, and Close says so; a second
// Close returns at once.
func TestCloseBoundsServerShutdown(t *testing.T) {
	ctx := context.Background()
	p, err := Start(ctx, Config{Server: ServerConfig{
		DataDir: filepath.Join(t.TempDir(), "data"), ShutdownTimeout: 200 * time.Millisecond,
	}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer func() {
		close(release)
		if err := natsutil.StopServer(p.Server, time.Minute); err != nil {
			t.Error(err)
		}
	}()
	p.stopper = hungServer{p.stopper, release}
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, natsutil.ErrShutdownTimeout) {
			t.Fatalf("Close: %v, want %v", err, natsutil.ErrShutdownTimeout)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close still waiting for the server a minute after its 200ms shutdown timeout")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
