package natsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ErrStoreInUse is returned by StartServer when another process runs a
// server on the same store directory: two servers writing one JetStream
// store corrupt it (a second `quarry run --data D` beside a running one
// hung in nats-server's file store).
var ErrStoreInUse = errors.New("store directory in use by another process")

// storeLockName is the lock file StartServer keeps in a store directory.
const storeLockName = "quarry.lock"

// storeLocks are the store directories this process holds the lock of.
// A lock is held until the process exits (the kernel drops it with the
// process, also on a crash): a server restarted in the same process on the
// same directory (tests, the chaos harness) finds it held already.
var storeLocks struct {
	mu   sync.Mutex
	held map[string]*os.File
}

// lockStore takes the exclusive lock of dir's lock file for this process,
// creating dir. Where the file system has no such locks it logs nothing
// and lets the server start (the lock is a guard, not a requirement).
func lockStore(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("nats store %s: %w", dir, err)
	}
	storeLocks.mu.Lock()
	defer storeLocks.mu.Unlock()
	if storeLocks.held[abs] != nil {
		return nil
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return fmt.Errorf("nats store %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(abs, storeLockName), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("nats store %s: lock file: %w", dir, err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil // no locks on this file system
	}
	if !held {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		owner := strings.TrimSpace(string(b[:n]))
		if _, err := strconv.Atoi(owner); err != nil {
			owner = "unknown"
		}
		return fmt.Errorf("nats store %s (pid %s): %w", dir, owner, ErrStoreInUse)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if storeLocks.held == nil {
		storeLocks.held = map[string]*os.File{}
	}
	storeLocks.held[abs] = f
	return nil
}
