//go:build !unix

package natsutil

import (
	"errors"
	"os"
)

// tryLock: no store lock on this platform.
func tryLock(*os.File) (bool, error) { return false, errors.ErrUnsupported }
