//go:build unix

package mining

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user+system) this process has used. It
// lets the benchmark report throughput per CPU-second, which stays
// meaningful on a machine shared with other work.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
