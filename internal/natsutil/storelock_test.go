//go:build unix

package natsutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestStoreLockChild is the other process of TestStoreInUse: it starts a
// server on $NATSUTIL_LOCK_DIR and prints what StartServer returned.
func TestStoreLockChild(t *testing.T) {
	dir := os.Getenv("NATSUTIL_LOCK_DIR")
	if dir == "" {
		t.Skip("run by TestStoreInUse")
	}
	s, err := StartServer(ServerConfig{StoreDir: dir, Port: -1}, nil)
	if err == nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
	fmt.Printf("child: in use %v: %v\n", errors.Is(err, ErrStoreInUse), err)
}

// TestStoreInUse: a store directory served by a server of this process is
// refused to a server of another process, with the holder's pid; another
// directory is not; and a server restarted in this process on its own
// directory starts.
func TestStoreInUse(t *testing.T) {
	held, free := t.TempDir(), t.TempDir()
	s, err := StartServer(ServerConfig{StoreDir: held, Port: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	// Restarted in this process: still this process's directory.
	s, err = StartServer(ServerConfig{StoreDir: held, Port: -1}, nil)
	if err != nil {
		t.Fatalf("restart in the same process: %v", err)
	}
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
	}()
	for _, tc := range []struct {
		dir  string
		want string
	}{
		{held, "child: in use true: nats store " + held + " (pid " + strconv.Itoa(os.Getpid()) + "): " + ErrStoreInUse.Error()},
		{free, "child: in use false: <nil>"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestStoreLockChild$", "-test.v")
		cmd.Env = append(os.Environ(), "NATSUTIL_LOCK_DIR="+tc.dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child on %s: %v\n%s", tc.dir, err, out)
		}
		if !strings.Contains(string(out), tc.want+"\n") {
			t.Errorf("child on %s: output\n%s\nwant the line %q", tc.dir, out, tc.want)
		}
	}
}
