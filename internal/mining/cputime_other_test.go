//go:build !unix

package mining

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
