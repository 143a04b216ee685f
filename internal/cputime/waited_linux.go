package cputime

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// waited sums the second field of /proc/self/task/<tid>/schedstat, the
// nanoseconds each thread spent runnable on a run queue, waiting for a
// CPU (the kernel's sched_info run_delay). A thread that exited takes its
// share with it; callers use differences over seconds, where that is
// noise.
func waited() (time.Duration, bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	var sum int64
	buf := make([]byte, 0, 64)
	for _, t := range tasks {
		f, err := os.Open("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		n, _ := f.Read(buf[:cap(buf)])
		f.Close()
		fields := bytes.Fields(buf[:n])
		if len(fields) < 2 {
			return 0, false
		}
		d, err := strconv.ParseInt(string(fields[1]), 10, 64)
		if err != nil {
			return 0, false
		}
		sum += d
	}
	return time.Duration(sum), len(tasks) > 0
}
