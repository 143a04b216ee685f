//go:build unix

package natsutil

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes f's exclusive flock without waiting: held is false when
// another open file holds it; err is set when the file system has none.
func tryLock(f *os.File) (held bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, nil
	default:
		return false, err
	}
}
