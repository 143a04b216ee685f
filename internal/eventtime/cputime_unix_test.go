//go:build unix

package eventtime

import "syscall"

// cpuNanos is the CPU time this process used, so that a benchmark can
// report per-core speed on a shared machine.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
